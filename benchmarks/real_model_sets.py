"""Question sets with gold answers for ``benchmarks/real_model.py`` (and the attribution
calibration), and how an answer is scored against them without an LLM judge.

- ``data``: the sample questions of docs/sample-data.md over data/ (gold written out below);
- ``mixed``: benchmarks/mixed (tables, notes, e-mails, JSON, other languages, two hops);
- ``hotpot`` / ``musique``: HotpotQA and MuSiQue questions over their corpora, from the shared
  evaluation data next to the checkout (``../shared/eval``; ``--eval-dir`` elsewhere).

Each question is single-hop or two-hop (a bridge: the answer needs a fact found first). The
default subset (``SUBSET``) holds 8 single-hop and 14 two-hop questions: the mixed set's seven
bridges, the sample data's one, and the first three bridge questions of HotpotQA and of
MuSiQue in file order.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, prepare_imports

prepare_imports()

from deepsearcher.evaluation.metrics import GoldMatcher  # noqa: E402
from deepsearcher.types import Answer, Hit  # noqa: E402

# A git worktree sits one level deeper than the main checkout: its shared data is further up.
EVAL_FALLBACKS = [ROOT.parent.parent / "shared" / "eval"]
SETS = ("data", "mixed", "hotpot", "musique")
# The default questions: set -> ids (or file positions), with the two-hop ones marked.
SUBSET: dict[str, dict[str, list[Any]]] = {
    "single": {
        "data": ["d1", "d2", "d6", "d7"],
        "mixed": ["mx02", "mx10", "mx24", "mx45"],
    },
    "two-hop": {
        "data": ["d3"],
        "mixed": ["mx48", "mx49", "mx50", "mx51", "mx52", "mx53", "mx54"],
        "hotpot": ["5a77ec115542992a6e59dff7", "5a7decc75542995f4f40230f",
                   "5a8718c25542991e771816c7"],
        "musique": ["2hop__150763_14904", "2hop__6584_6587", "2hop__205146_62031"],
    },
}  # fmt: skip

# The sample questions of docs/sample-data.md. "parts": every part must appear (each a list of
# accepted variants); "evidence": (file, strings a chunk must hold to be a gold passage).
DATA_QUESTIONS: list[dict[str, Any]] = [
    {
        "id": "d1",
        "question": "How often must an administrator account's password be changed, "
        "and how soon must a lost laptop be reported?",
        "parts": [["90 days", "ninety days", "90-day"], ["4 hours", "four hours"]],
        "evidence": [["it_security_policy.html", ["90 days"]],
                     ["it_security_policy.html", ["4 hours"]]],
    },
    {
        "id": "d2",
        "question": "What is the NR-7's payload, and which firmware does it run?",
        "parts": [["12 kg", "150 kg"], ["NR-OS 4.2.1", "4.2.1"]],
        "evidence": [["nr7_product_spec.pdf", ["12 kg"]], ["nr7_product_spec.pdf", ["4.2.1"]]],
    },
    {
        "id": "d3",
        "question": "Who is the office manager at the site where the NR-7 is assembled?",
        "parts": [["Rafael Ortega"]],
        "evidence": [["office_locations.csv", ["Rafael Ortega"]],
                     ["nr7_product_spec.pdf", ["Austin"]]],
    },
    {
        "id": "d4",
        "question": "What international per diem applies to a trip in mid-October 2024, "
        "and who proposed it?",
        "parts": [["110"], ["CFO", "Priya Raman"]],
        "evidence": [["employee_handbook_travel_expense.md", ["110"]],
                     ["ops_meeting_notes_2024.txt", ["per-diem"]]],
    },
    {
        "id": "d5",
        "question": "Who supplies the NR-7 battery, and what supply risk does that create?",
        "parts": [["Kestrel"], ["only source", "single source", "sole source", "one supplier",
                                "single supplier", "sole supplier", "lead time", "16 weeks"]],
        "evidence": [["nr7_product_spec.pdf", ["Kestrel"]],
                     ["q3_2024_quarterly_report.docx", ["Kestrel", "lead time"]]],
    },
    {
        "id": "d6",
        "question": "Who must approve a business trip that costs USD 3,000?",
        "parts": [["CFO", "chief financial officer"]],
        "evidence": [["employee_handbook_travel_expense.md", ["3,000"]]],
    },
    {
        "id": "d7",
        "question": "What was EMEA revenue in Q3 2024?",
        "parts": [["3.1"]],
        "evidence": [["q3_2024_quarterly_report.docx", ["EMEA", "3.1"]]],
    },
    {
        "id": "d8",
        "question": "What is the total headcount of Northwind Robotics?",
        "parts": [["240"]],
        "evidence": [["q3_2024_quarterly_report.docx", ["240"]]],
    },
]  # fmt: skip

NOT_STATED = re.compile(
    r"(do(?:es)? not (?:state|mention|contain|say|specify|provide|include)|no information"
    r"|not (?:stated|mentioned|specified|provided|found|available)|cannot (?:be )?(?:found|answer"
    r"|determin))",
    re.IGNORECASE,
)
CITATION = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {
    w: str(10 * i)
    for i, w in enumerate(["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 3)
}
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "was",
        "were",
        "with",
        "that",
        "this",
        "from",
        "have",
        "has",
        "had",
        "not",
        "but",
        "its",
        "their",
        "they",
        "them",
        "what",
        "which",
        "when",
        "where",
        "who",
        "whom",
        "will",
        "would",
        "could",
        "should",
        "about",
        "into",
        "than",
        "then",
        "there",
        "these",
        "those",
        "been",
        "being",
        "also",
        "such",
        "each",
        "other",
        "more",
        "most",
        "some",
        "any",
        "all",
        "our",
        "your",
        "does",
        "did",
    ]
)


# A citation standing where a sentence's fact belongs ("The release that fixed it is [3]."): a
# verb or preposition, then only markers to the end of the sentence. Kept apart from the
# product's own check so the benchmark does not grade the code with the code.
FACT_AS_MARKER = re.compile(
    r"\b(?:is|are|was|were|be|been|of|at|in|on|to|from|by|for|as|with)\s*:?\s*"
    r"(?:\[\d{1,3}\]\s*)+[.!?]?\s*$",
    re.IGNORECASE,
)


def fact_as_marker(answer: str) -> bool:
    return any(FACT_AS_MARKER.search(s.strip()) for s in SENTENCE_END.split(answer))


def normalize(text: str) -> str:
    """Lower case, no punctuation (a decimal point stays), digits for number words and no
    thousands separators, single spaces; a field name's words apart ("account_manager")."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)", "", text)
    text = re.sub(r"(?<=\d)\.(?=\d)", "\0", text)  # keep 4.2.1 and 3.1 whole
    text = re.sub(r"[^\w\0]+|_+", " ", text).replace("\0", ".")
    return " ".join(_NUMBER_WORDS.get(w, w) for w in text.split())


def contains(haystack: str, needle: str) -> bool:
    n = normalize(needle)
    return bool(n) and f" {n} " in f" {normalize(haystack)} "


def key_terms(text: str) -> list[str]:
    words = [w for w in normalize(text).split() if w not in _STOP]
    return list(dict.fromkeys(w for w in words if len(w) >= 4 or w[0].isdigit()))


def cited_sentences(answer: Answer) -> list[tuple[str, list[str]]]:
    """(sentence without citations, texts of the passages it cites) per cited sentence."""
    by_n = {s.n: s.text for s in answer.sources}
    out = []
    for sentence in SENTENCE_END.split(answer.answer):
        ns = [int(n) for m in CITATION.findall(sentence) for n in m.split(",")]
        if ns:
            out.append((CITATION.sub(" ", sentence), [by_n[n] for n in ns if n in by_n]))
    return out


def states_gold(q: Question, sentence: str) -> bool:
    """Whether ``sentence`` states what a gold passage of ``q`` holds (an answer or an
    evidence string): then, and only then, the passage it should cite is known."""
    facts = [v for variants in q.parts for v in variants]
    facts += [s for _doc, strings in q.evidence for s in strings]
    return any(contains(sentence, f) for f in facts)


def sentences_citing(answer_text: str, n: int) -> list[str]:
    """The sentences of an answer that cite passage ``n``, without their markers."""
    return [
        CITATION.sub(" ", sentence)
        for sentence in SENTENCE_END.split(answer_text)
        if any(str(n) in m.replace(" ", "").split(",") for m in CITATION.findall(sentence))
    ]


def supported(sentence: str, passages: list[str]) -> bool:
    terms = key_terms(sentence)
    if len(terms) < 3:
        return bool(passages)  # too short to check: a citation to a real passage counts
    text = f" {normalize(' '.join(passages))} "
    return sum(1 for t in terms if f" {t} " in text) / len(terms) >= 0.34


# -- question sets ------------------------------------------------------------------------


@dataclass
class Question:
    set: str
    id: str
    question: str
    parts: list[list[str]]
    gold_docs: list[str]
    evidence: list[tuple[str, list[str]]]  # (gold doc, strings a gold passage holds)
    root: Path
    hops: int = 1


def data_questions() -> list[Question]:
    root = ROOT / "data"
    return [
        Question(
            "data", q["id"], q["question"], q["parts"],
            sorted({d for d, _ in q["evidence"]}), [(d, s) for d, s in q["evidence"]], root,
            2 if q["id"] in ("d3",) else 1,
        )
        for q in DATA_QUESTIONS
    ]  # fmt: skip


def jsonl_questions(name: str, path: Path, root: Path) -> list[Question]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        answers = [a for a in q["answers"] if a]
        # HotpotQA gives no evidence strings: the gold passage holds the answer, unless the
        # answer is yes/no (a comparison: then any chunk of a gold document).
        strings = q.get("evidence") or [[]]
        if not q.get("evidence") and not {a.lower() for a in answers} & {"yes", "no"}:
            strings = [[a] for a in answers]
        evidence = [(d, s if isinstance(s, list) else [s]) for d in q["gold_doc_ids"]
                    for s in strings]  # fmt: skip
        hops = int(
            q.get("hops") or (2 if q.get("type") == "bridge" or "hop__" in str(q["id"]) else 1)
        )
        out.append(Question(name, str(q["id"]), q["question"], [answers], q["gold_doc_ids"],
                            evidence, root, hops))  # fmt: skip
    return out


def _eval_folder(args: argparse.Namespace, name: str) -> Path | None:
    folder = {"hotpot": "hotpotqa100", "musique": "musique100"}[name]
    found = next(
        (d / folder for d in (args.eval_dir, *EVAL_FALLBACKS) if (d / folder).is_dir()),
        args.eval_dir / folder,
    )
    if not (found / "questions.jsonl").is_file():
        print(f"{name} skipped: {found}/questions.jsonl not found (--eval-dir)", file=sys.stderr)
        return None
    return found


def all_questions(args: argparse.Namespace, name: str) -> list[Question]:
    if name == "data":
        return data_questions()
    if name == "mixed":
        mixed = ROOT / "benchmarks" / "mixed"
        return jsonl_questions("mixed", mixed / "questions.jsonl", mixed / "corpus")
    folder = _eval_folder(args, name)
    if folder is None:
        return []
    return jsonl_questions(name, folder / "questions.jsonl", folder / "corpus")


def load_sets(args: argparse.Namespace) -> dict[str, list[Question]]:
    """The questions to ask, by set: ``--all`` every question of ``args.sets``, ``--limit N``
    the first N of each, else the default subset (``args.subset``: both, single or two-hop)."""
    sets: dict[str, list[Question]] = {}
    subsets = [args.subset] if getattr(args, "subset", "both") != "both" else list(SUBSET)
    for name in args.sets:
        qs = all_questions(args, name)
        if not qs:
            continue
        if args.all:
            pass
        elif args.limit is not None:
            qs = qs[: args.limit]
        else:
            wanted = {i for sub in subsets for i in SUBSET[sub].get(name, [])}
            qs = [q for q in qs if q.id in wanted]
        if qs:
            sets[name] = qs
    return sets


def is_two_hop(q: Question) -> bool:
    return q.hops > 1 or q.id in SUBSET["two-hop"].get(q.set, [])


def is_gold(q: Question, source: str, text: str) -> bool:
    """Whether a passage (its file and text) is a gold passage of ``q``."""
    return any(
        GoldMatcher([gold_doc], q.root).key(source) == gold_doc
        and all(contains(text, s) for s in strings)
        for gold_doc, strings in q.evidence
    )


def gold_keys(q: Question, passages: dict[str, Hit]) -> set[str]:
    """Which retrieved passages (id -> hit) are gold passages."""
    return {cid for cid, hit in passages.items() if is_gold(q, hit.source, hit.text)}
