"""Data passed between pipeline stages. Plain dataclasses: cheap, typed, easy to serialise."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

# ---------------------------------------------------------------------------------------------
# Ingestion
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Element:
    """A span of a parsed document: where it sits in ``Document.text`` and what it is.

    Structured spans tell the chunker how to keep each chunk self-describing:

    - ``kind="Table"`` with ``table_header``: ``text[start:end]`` is the header line followed by
      one line per row (cells joined by `` | ``); the chunker splits it by rows and repeats the
      header (and ``title``, the sheet name or table caption) in every chunk.
    - ``kind="Record"``: one JSON record rendered as ``key: value`` lines; ``record_id`` is the
      record's id field or its index. A record is kept whole in one chunk when it fits.
    - ``kind="SpeakerNotes"``: a slide's notes; on slides ``page`` is the slide number.
    """

    start: int
    end: int
    page: int | None = None
    heading: str | None = None
    kind: str = "text"  # unstructured's category: Title, NarrativeText, Table, ...
    table_header: str | None = None
    title: str | None = None
    record_id: str | None = None


@dataclass
class Document:
    """One parsed file. ``text`` is the concatenation of its elements' texts."""

    source: str  # absolute path (or URL)
    text: str
    elements: list[Element] = field(default_factory=list)
    file_type: str = "text"
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Chunk:
    """A piece of a document sized for the embedder. ``start``/``end`` index ``Document.text``."""

    id: str
    doc_id: str
    source: str
    content_hash: str
    index: int
    text: str
    start: int
    end: int
    pages: list[int] = field(default_factory=list)
    heading: str | None = None
    file_type: str = "text"
    record_id: str | None = None  # the JSON record the chunk comes from
    # Where the chunk sits ("report.pdf › 6. Sick leave"), embedded and BM25-indexed with the
    # text (chunking.context_prefix) but never shown as part of the passage.
    context: str = ""
    # For metadata filters: the file's modification time (ISO, UTC) and the loader's scalar
    # metadata (e-mail from/subject/date, encoding...), shared by a document's chunks.
    modified: str | None = None
    doc_meta: dict[str, Any] = field(default_factory=dict)

    @property
    def page(self) -> int | None:
        return self.pages[0] if self.pages else None

    @property
    def page_end(self) -> int | None:
        return self.pages[-1] if self.pages else None

    @property
    def indexed_text(self) -> str:
        """What is embedded and BM25-indexed: the context prefix, then the text."""
        return f"{self.context}\n{self.text}" if self.context else self.text


@dataclass
class LoadProgress:
    """One step of a load, for progress displays. ``stage``: waiting (for another load of the
    collection), discovered, hashed, parsed, failed, embedded, file_done, pruned."""

    stage: str
    path: str | None = None
    count: int = 0
    total: int = 0
    message: str | None = None


ProgressCallback = Callable[[LoadProgress], None]


@dataclass
class LoadFailure:
    path: str
    reason: str


@dataclass
class LoadReport:
    collection: str
    files_new: int = 0
    files_changed: int = 0
    files_unchanged: int = 0
    files_failed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_total: int = 0
    failures: list[LoadFailure] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def files_loaded(self) -> int:
        return self.files_new + self.files_changed

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "files": {
                "new": self.files_new,
                "changed": self.files_changed,
                "unchanged": self.files_unchanged,
                "failed": self.files_failed,
            },
            "chunks": {
                "added": self.chunks_added,
                "removed": self.chunks_removed,
                "total": self.chunks_total,
            },
            "failures": [asdict(f) for f in self.failures],
            "seconds": round(self.seconds, 3),
        }


# ---------------------------------------------------------------------------------------------
# Retrieval and answers
# ---------------------------------------------------------------------------------------------


def source_label(
    source: str,
    page: int | None = None,
    page_end: int | None = None,
    kind: Literal["doc", "web"] = "doc",
) -> str:
    """How every citation names a passage: ``report.pdf p. 4`` or ``report.pdf p. 2–3``; a web
    result by its URL. The one place this format lives (CLI, server, prompts all use it)."""
    if page is None or kind == "web":
        return source
    if page_end is not None and page_end != page:
        return f"{source} p. {page}–{page_end}"
    return f"{source} p. {page}"


@dataclass(kw_only=True)
class Located:
    """Where a passage sits: the provenance a retrieved passage (``Hit``) carries into the
    citation that shows it (``Citation``), declared once. Keyword-only, so each record keeps its
    own fields first in its constructor; the JSON forms stay flat."""

    if TYPE_CHECKING:
        source: str  # each record declares it: a file path (or the URL of a web result)

    start: int | None = None  # character span in the document's text
    end: int | None = None
    page: int | None = None  # first page (slide) of the passage
    page_end: int | None = None  # last page; equals ``page`` for a one-page passage
    record_id: str | None = None  # the JSON record the passage comes from
    kind: Literal["doc", "web"] = "doc"
    title: str | None = None  # web results

    @property
    def label(self) -> str:
        """The citation label: file and page range (web results: the URL)."""
        return source_label(self.source, self.page, self.page_end, self.kind)

    def location(self) -> dict[str, Any]:
        """The provenance fields, to carry them to another record: ``Citation(..., **loc)``."""
        return {f.name: getattr(self, f.name) for f in fields(Located)}


@dataclass
class Hit(Located):
    """A retrieved chunk (or web result) with its score."""

    id: str
    text: str
    source: str
    score: float
    collection: str
    heading: str | None = None
    doc_id: str | None = None


@dataclass
class Citation(Located):
    """A numbered citation in an answer."""

    n: int
    source: str
    text: str
    collection: str
    # The relevance judge kept this passage. False: no judge read it (naive RAG, no LLM) or it
    # was added unjudged or against a NO verdict to reach query.min_evidence.
    verified: bool = False
    # The model wrote no [n] for this passage: attribution matched a sentence of the answer to
    # it (the passage holds the sentence's terms and is closest to it in meaning).
    attributed: bool = False

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "n": self.n,
            "source": self.source,
            "page": self.page,
            "page_end": self.page_end,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "collection": self.collection,
            "verified": self.verified,
            "attributed": self.attributed,
        }
        if self.record_id is not None:
            d["record_id"] = self.record_id
        if self.kind == "web":
            d["kind"] = "web"
            d["title"] = self.title
        return d


# ``Source`` is the name the package exports for citations (research reports have a ``Source``
# of their own, a numbered evidence id): the same class under both names.
Source = Citation


@dataclass
class Usage:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Some tokens were counted locally (characters / 4): the server reported no usage.
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.llm_calls += other.llm_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.estimated = self.estimated or other.estimated

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if self.estimated:
            d["estimated"] = True
        return d


Mode = Literal["deep", "naive", "retrieval-only"]
# Notes about what an answer stands on (the evidence floor, citations) start with this. They
# describe the answer, not a failure on the way: asked again, the same answer has them again.
EVIDENCE_NOTE = "evidence: "
# What an answer stands on: passages the relevance judge kept and the model cited ("verified"),
# passages matched to sentences the model left uncited ("attributed"), passages no judge
# confirmed ("unverified": naive RAG, no LLM, or the judge kept too few), or nothing it cites.
Evidence = Literal["verified", "attributed", "unverified", "none"]
HopStatus = Literal["answered", "not found", "skipped"]


@dataclass
class Hop:
    """One lookup of a question's plan and its short answer. A dependent hop (``depends_on``)
    is searched once the hops it depends on are answered, their answers put in place of
    ``#k`` in ``question`` to make ``query``."""

    index: int  # 1-based, in plan order
    question: str  # as planned; "#k" stands for hop k's answer
    query: str = ""  # as searched (empty while it waits for the hops it depends on)
    depends_on: list[int] = field(default_factory=list)
    answer: str = ""  # the short answer extracted from its passages ("" while not found)
    status: HopStatus = "not found"
    source: str | None = None  # the file (or URL) of the passage the answer was taken from
    page: int | None = None
    # Its number in the answer's sources or retrieved passages, once the answer is written.
    n: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Answer:
    question: str
    answer: str
    mode: Mode
    sources: list[Citation] = field(default_factory=list)
    sub_queries: list[str] = field(default_factory=list)
    iterations: int = 0
    usage: Usage = field(default_factory=Usage)
    chunks_retrieved: int = 0
    chunks_kept: int = 0
    chunks_dropped: int = 0
    seconds: float = 0.0
    cut_short: str | None = None  # why the loop stopped early (budget), if it did
    notes: list[str] = field(default_factory=list)  # visible degradations (web down, bad output)
    # Served from the answer cache: no search ran and no LLM was called for this reply.
    cached: bool = False
    evidence: Evidence = "none"
    # Passages the answer was given but does not cite, apart from ``sources`` (what it cites).
    retrieved: list[Citation] = field(default_factory=list)
    # Cited sentences whose passages do not hold their key terms.
    unsupported_citations: list[str] = field(default_factory=list)
    # Sentences of the answer that no passage it was given holds (nothing could be attributed).
    unsupported_sentences: list[str] = field(default_factory=list)
    # The lookups the question was broken into and what each found (deep search).
    hops: list[Hop] = field(default_factory=list)
    # Seconds from the start of the run to the first streamed token of the answer.
    first_token_s: float | None = None
    # The text streamed so far is not the answer: the stream broke off and was written again,
    # or a citation standing for its fact was repaired. Front ends show ``answer`` again.
    stream_replaced: bool = False
    # Set when the configured LLM refused the connection: what to tell the user (the answer
    # then lists passages). Front ends read this, not the note's text; JSON has the note.
    llm_unreachable: str | None = None
    # Set when the answer step wrote no answer (failed, out of time, LLM unreachable): the
    # note that says why; the answer then quotes passages. Not in JSON: the note is.
    no_answer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "question": self.question,
            "answer": self.answer,
            "mode": self.mode,
            "sources": [s.to_dict() for s in self.sources],
            "sub_queries": list(self.sub_queries),
            "iterations": self.iterations,
            "usage": self.usage.to_dict(),
            "chunks": {
                "retrieved": self.chunks_retrieved,
                "kept": self.chunks_kept,
                "dropped": self.chunks_dropped,
            },
            "seconds": round(self.seconds, 3),
            "cached": self.cached,
            "evidence": self.evidence,
            "retrieved": [s.to_dict() for s in self.retrieved],
        }
        if self.unsupported_citations:
            d["unsupported_citations"] = list(self.unsupported_citations)
        if self.unsupported_sentences:
            d["unsupported_sentences"] = list(self.unsupported_sentences)
        if self.hops:
            d["hops"] = [h.to_dict() for h in self.hops]
        if self.first_token_s is not None:
            d["first_token_s"] = round(self.first_token_s, 3)
        if self.stream_replaced:
            d["stream_replaced"] = True
        if self.cut_short:
            d["cut_short"] = self.cut_short
        if self.notes:
            d["notes"] = list(self.notes)
        return d


# ---------------------------------------------------------------------------------------------
# Progress events: the loop yields these; the CLI renders them, the server forwards them.
# ---------------------------------------------------------------------------------------------


@dataclass
class EventBase:
    """What every event shares: its JSON form. Each event names its ``type`` as a ``Literal``,
    so ``Event`` is a tagged union a type checker narrows on ``event.type == "done"``."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SubQueriesEvent(EventBase):
    type: Literal["sub_queries"] = field(default="sub_queries", init=False)
    queries: list[str] = field(default_factory=list)
    iteration: int = 0


@dataclass
class PlanEvent(EventBase):
    """The lookups a question was broken into: ``depends_on[i]`` lists the earlier steps
    (1-based) whose answers step i+1 needs; ``dropped`` the steps left out as restatements of
    the question or of another step."""

    type: Literal["plan"] = field(default="plan", init=False)
    steps: list[str] = field(default_factory=list)
    depends_on: list[list[int]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


@dataclass
class HopEvent(EventBase):
    """A lookup of the plan got its short answer (``answer``, from ``source``) or none."""

    type: Literal["hop"] = field(default="hop", init=False)
    index: int = 0
    question: str = ""
    query: str = ""
    answer: str = ""
    source: str | None = None  # the file (or URL) of the passage it came from
    page: int | None = None
    status: HopStatus = "not found"


@dataclass
class SearchEvent(EventBase):
    type: Literal["search"] = field(default="search", init=False)
    query: str = ""
    hits: int = 0
    new: int = 0


@dataclass
class VerdictEvent(EventBase):
    type: Literal["verdict"] = field(default="verdict", init=False)
    chunk_id: str = ""
    source: str = ""
    kept: bool = False
    # log P(YES) - log P(NO) of the verdict, when the server returned log-probabilities.
    margin: float | None = None


@dataclass
class ReflectionEvent(EventBase):
    type: Literal["reflection"] = field(default="reflection", init=False)
    gap_queries: list[str] = field(default_factory=list)
    iteration: int = 0


@dataclass
class NoteEvent(EventBase):
    """A visible degradation or decision (web search down, item dropped, budget hit)."""

    type: Literal["note"] = field(default="note", init=False)
    message: str = ""
    # The note says the LLM could not be reached (a front end that reports that once, as an
    # error, leaves this note out of the progress it shows). Not part of the JSON form.
    llm_unreachable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message}


@dataclass
class AnswerDeltaEvent(EventBase):
    type: Literal["answer_delta"] = field(default="answer_delta", init=False)
    text: str = ""


@dataclass(kw_only=True)
class DoneEvent(EventBase):
    """The last event of every run."""

    type: Literal["done"] = field(default="done", init=False)
    answer: Answer

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "answer": self.answer.to_dict()}


Event = (
    PlanEvent
    | HopEvent
    | SubQueriesEvent
    | SearchEvent
    | VerdictEvent
    | ReflectionEvent
    | NoteEvent
    | AnswerDeltaEvent
    | DoneEvent
)
