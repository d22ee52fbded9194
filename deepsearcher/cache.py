"""The answer cache: a repeated question is answered from a stored answer, with no search and
no LLM call, and marked ``cached: true``.

The key is a hash of everything that can change an answer: the normalised question, every
``QueryOptions`` field (so an API key's ``allowed_collections`` or a filter is part of it), the
models, the settings that steer a search, and the version of every collection the answer could
draw on. A load that changes a collection gives it a new version, so answers from before simply
stop matching (and expire by ``cache.ttl_s``): nothing has to find and delete them. The entries
live in the vector store (``VectorStore.answers``), shared by every process on it.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.metadata
import json
import logging
import re
import time
import unicodedata
import zlib
from collections.abc import Mapping
from typing import Any

from deepsearcher.config import Settings
from deepsearcher.options import QueryOptions
from deepsearcher.store import VectorStore
from deepsearcher.types import EVIDENCE_NOTE, Answer, Citation, Hop, Usage

logger = logging.getLogger(__name__)

# Pruning scans the cache collection; once an hour per process is plenty for a TTL in hours.
_PRUNE_EVERY_S = 3600.0


def _now() -> float:
    return time.time()


# A word that starts the question or a sentence in it, after any opening quote or bracket.
_SENTENCE_START = re.compile(r"(?:^|(?<=[.!?]\s))([\"'«“‘(\[¿¡]*)(\w+)")


def _lower_if_title(match: re.Match[str]) -> str:
    word = match[2]
    if word[0].isupper() and (len(word) == 1 or word[1:].islower()):
        word = word[0].lower() + word[1:]
    return match[1] + word


def normalise_question(question: str) -> str:
    """The question as the cache sees it: NFC, whitespace collapsed, trailing punctuation
    dropped, and the capital a sentence starts with lowered ("What is X?" and "what is  X"
    are one question).

    Letter case is kept everywhere else: next to a number it is often the meaning ("5 MW" is
    a million times "5 mW", "3 Ms" is not "3 ms"), and in words too ("US" and "us", "Polish"
    and "polish"). Only a capitalised word (one capital, then lower case) that starts a
    sentence is lowered; "MW", "mW" or "NR-7" stay as typed, wherever they are.

    Only forms that spell the same text meet: NFC joins a composed and a decomposed "é", and
    nothing else is folded. NFKC would make "5²" and "52", "H₂O" and "H2O", "１０" and "10"
    one key, so one client could plant the answer another gets; full case folding
    (``casefold``) merges "Maße" with "Masse" and the ligature "ﬁ" with "fi" the same way."""
    text = " ".join(unicodedata.normalize("NFC", question).split())
    end = len(text)
    while end and (text[end - 1].isspace() or unicodedata.category(text[end - 1])[0] == "P"):
        end -= 1
    return _SENTENCE_START.sub(_lower_if_title, text[:end])


def cacheable(answer: Answer) -> bool:
    """Only a complete answer is kept: not one cut short by a budget, not a retrieval-only
    fallback, not one with a note of something that went wrong on the way. Notes about its
    evidence (``EVIDENCE_NOTE``) describe the answer itself and come back with it."""
    return (
        not answer.cut_short
        and all(n.startswith(EVIDENCE_NOTE) for n in answer.notes)
        and answer.mode != "retrieval-only"
        and bool(answer.answer.strip())
        and all(s.kind == "doc" for s in answer.sources)
    )


def _jsonable(value: Any) -> Any:
    """A stable JSON form of an option value, whatever its type (new option types included)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_jsonable(v) for v in value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def _package_version() -> str:
    # A release may change prompts and parsing: its answers are not the previous one's.
    try:
        return importlib.metadata.version("deepsearcher")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _answer_settings(settings: Settings) -> dict[str, Any]:
    """The settings that change what an answer says (not timeouts, hosts or keys)."""
    store = settings.vector_store
    return {
        "version": _package_version(),
        "llm": settings.llm.model_dump(
            include={"provider", "model", "base_url", "temperature", "max_tokens"}
        ),
        "embedding": settings.embedding.model_dump(include={"provider", "model", "dimensions"}),
        "query": settings.query.model_dump(),
        # Search settings (hybrid, analyzer, fusion window, RRF k, new ones too), not where
        # the store is; the effective dense weight, which follows the embedder when unset.
        "vector_store": {
            **store.model_dump(exclude={"provider", "uri", "token_env", "collection"}),
            "dense_weight": store.dense_weight,
        },
    }


def _encode(answer: Answer) -> str:
    raw = json.dumps(dataclasses.asdict(answer), ensure_ascii=False).encode()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def _decode(payload: str) -> Answer:
    d = json.loads(zlib.decompress(base64.b64decode(payload)))
    d["sources"] = [Citation(**s) for s in d["sources"]]
    d["retrieved"] = [Citation(**s) for s in d.get("retrieved", [])]
    d["hops"] = [Hop(**h) for h in d.get("hops", [])]
    d["usage"] = Usage(**d["usage"])
    return Answer(**d)


class AnswerCache:
    """Keys, policy and (de)serialisation over a store's ``AnswerStore``. Blocking: async
    callers run it in a thread, like the store itself."""

    def __init__(self, store: VectorStore, settings: Settings) -> None:
        self.store = store
        self.ttl_s = settings.cache.ttl_s
        self._settings = _answer_settings(settings)
        self._next_prune = 0.0

    def key(self, question: str, options: QueryOptions) -> str:
        """The key of ``question`` under ``options``, with the collections' current versions."""
        named = options.collections
        allowed = options.allowed_collections
        versions = self.store.collection_versions(list(named) if named else None)
        if allowed is not None:
            versions = {n: v for n, v in versions.items() if n in allowed}
        parts = {
            "question": normalise_question(question),
            "options": {
                f.name: _jsonable(getattr(options, f.name)) for f in dataclasses.fields(options)
            },
            "settings": self._settings,
            "collections": dict(sorted(versions.items())),
        }
        blob = json.dumps(parts, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> Answer | None:
        payload = self.store.answers.get_answer(key, _now())
        if payload is None:
            return None
        try:
            answer = _decode(payload)
        except (ValueError, TypeError, KeyError, zlib.error):
            logger.debug("unreadable cache entry %s ignored", key, exc_info=True)
            return None
        answer.cached = True
        return answer

    def put(self, key: str, answer: Answer) -> bool:
        """Keep ``answer`` under ``key`` when it is complete; True when it was kept."""
        if not cacheable(answer):
            return False
        now = _now()
        if now >= self._next_prune:
            self._next_prune = now + _PRUNE_EVERY_S
            self.store.answers.prune_answers(now)
        self.store.answers.put_answer(key, _encode(answer), now + self.ttl_s)
        return True
