"""What HTTP clients may see of the server's own machine: source paths relative to a root the
client knows of, and no internal addresses or absolute paths in notes and error messages.

Chunks store absolute source paths and the agents' notes name the LLM endpoint, which is right
for the CLI user on their own machine. Over HTTP they tell a client the server's folder layout,
a symlink's target, or an internal URL, so the server maps them here, at its boundary, and logs
the original text.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from deepsearcher.config import Settings
from deepsearcher.types import (
    Answer,
    DoneEvent,
    Event,
    Hop,
    HopEvent,
    LoadReport,
    NoteEvent,
    Source,
    VerdictEvent,
)

logger = logging.getLogger(__name__)

# An absolute POSIX path (two segments at least) or a Windows drive path, inside other text.
_ABS_PATH = re.compile(r"(?<![\w.:/])(?:/[^\s/'\"`,;()<>]+){2,}/?|\b[A-Za-z]:\\[^\s'\"`,;()<>]+")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"`<>]+", re.IGNORECASE)
INTERNAL_ADDRESS = "<internal address>"
INTERNAL_PATH = "<server path>"


class PublicView:
    """Maps answers, events, load reports and messages to what a client is shown."""

    def __init__(
        self,
        settings: Settings,
        upload_dir: Path,
        collection_roots: Callable[[str], Path | None] = lambda _name: None,
    ) -> None:
        server = settings.server
        self.load_root = Path(server.load_root).expanduser().resolve() if server.load_root else None
        self.upload_dir = upload_dir.expanduser().resolve()
        self._collection_roots = collection_roots
        self._secrets = [
            (value.rstrip("/"), label)
            for value, label in (
                (settings.llm.base_url, "the LLM server"),
                (settings.embedding.base_url, "the embedding server"),
                (settings.web_search.base_url, "the web search server"),
                (settings.vector_store.uri, "the vector store"),
            )
            if value
        ]

    # -- paths ----------------------------------------------------------------------------------

    def path(self, source: str, collection: str | None = None) -> str:
        """A document path relative to load_root, the upload folder or the collection's common
        folder; never absolute."""
        if "://" in source:
            return source
        path = Path(source)
        if not path.is_absolute():
            return source
        roots = [self.load_root, self.upload_dir]
        if collection:
            roots.append(self._collection_roots(collection))
        for root in roots:
            if root is not None and path.is_relative_to(root) and path != root:
                return path.relative_to(root).as_posix()
        return path.name

    # -- text -----------------------------------------------------------------------------------

    def _without_endpoints(self, text: str) -> str:
        for value, label in self._secrets:
            text = text.replace(value, label)
        return text

    def text(self, message: str) -> str:
        """``message`` without internal URLs and absolute paths (the original goes to the log)."""
        public = self._without_endpoints(message)
        public = _URL.sub(lambda m: m[0] if _is_public_url(m[0]) else INTERNAL_ADDRESS, public)
        public = _ABS_PATH.sub(lambda m: self._public_path(m[0]), public)
        if public != message:
            logger.info("shown to the client without internals: %s", message)
        return public

    def _public_path(self, raw: str) -> str:
        top = raw.split("/", 2)[1] if raw.startswith("/") else raw[:3]
        if not os.path.isdir(os.sep + top if raw.startswith("/") else top):
            return raw  # not a folder of this machine: an API route such as /v1/load
        shown = self.path(raw.rstrip("/"))
        # path() falls back to the base name for a path under no known root: too much guessing
        # inside free text, so say only that it was a server path.
        return shown if shown != Path(raw).name else INTERNAL_PATH

    def texts(self, messages: Iterable[str]) -> list[str]:
        return [self.text(m) for m in messages]

    # -- objects --------------------------------------------------------------------------------

    def answer(self, answer: Answer) -> Answer:
        sources = self.sources(answer.sources)
        # The answer is about the documents, which may well name paths and intranet URLs; only
        # the configured endpoints (a fallback answer quotes the LLM error) are taken out.
        text = self._without_endpoints(answer.answer)
        if text != answer.answer:
            logger.info("answer shown without the server's endpoints: %s", answer.answer)
        return dataclasses.replace(
            answer,
            answer=text,
            sources=sources,
            retrieved=self.sources(answer.retrieved),
            hops=[self._hop(h) for h in answer.hops],
            notes=self.texts(answer.notes),
            cut_short=self.text(answer.cut_short) if answer.cut_short else None,
        )

    def sources(self, sources: Iterable[Source]) -> list[Source]:
        return [
            s
            if s.kind == "web"
            else dataclasses.replace(s, source=self.path(s.source, s.collection))
            for s in sources
        ]

    def _hop(self, hop: Hop) -> Hop:
        if hop.source is None or "://" in hop.source:
            return hop
        return dataclasses.replace(hop, source=self.path(hop.source))

    def event(self, event: Event) -> Event:
        if isinstance(event, HopEvent) and event.source and "://" not in event.source:
            return dataclasses.replace(event, source=self.path(event.source))
        if isinstance(event, NoteEvent):
            return dataclasses.replace(event, message=self.text(event.message))
        if isinstance(event, VerdictEvent):
            return dataclasses.replace(event, source=self.path(event.source))
        if isinstance(event, DoneEvent) and event.answer is not None:
            return dataclasses.replace(event, answer=self.answer(event.answer))
        return event

    def report(self, report: LoadReport) -> LoadReport:
        failures = [
            dataclasses.replace(f, path=self.path(f.path), reason=self.text(f.reason))
            for f in report.failures
        ]
        return dataclasses.replace(report, failures=failures)


def common_root(sources: Iterable[str]) -> Path | None:
    """The deepest folder holding every local source (None when there are none)."""
    folders = {os.path.dirname(s) for s in sources if "://" not in s and os.path.isabs(s)}
    if not folders:
        return None
    try:
        return Path(os.path.commonpath(sorted(folders)))
    except ValueError:  # mixed drives on Windows
        return None


def _is_public_url(url: str) -> bool:
    """Web pages an answer cites are public; loopback, private and bare host names are not."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if not host or host == "localhost" or "." not in host or url.lower().startswith("file:"):
        return False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return not host.endswith((".local", ".internal", ".localhost", ".lan"))
    return ip.is_global
