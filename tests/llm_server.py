"""A scripted OpenAI-compatible chat server for tests and benchmarks.

Standard library only, so it shares no code (and no bugs) with the client under test. It binds
127.0.0.1 on a random port and serves ``POST /v1/chat/completions`` (JSON and SSE streaming) and
``GET /v1/models``.

Replies come from, in order: scripted faults (``add_fault``), rules (``add_rule``, newest
first), then a deterministic default responder keyed on the ``TASK:`` line that every prompt in
``deepsearcher.agents.prompts`` starts with, so a whole deep-search run works without rules.
A rule may reply with native ``tool_calls`` (``ToolCallsReply``); a server without tool support
is a "400" fault matched on requests that carry ``tools``.

Real servers and small models fail in ways the default responder does not; attributes imitate
them: ``strict_judge`` (every verdict NO), ``keep_everything`` (every verdict YES: a judge whose
verdicts tell nothing apart), ``logprobs`` (log-probabilities that lean to YES for relevant
passages even when the word is NO), ``stream_usage = False`` (no usage in streams), ``refuse``
(parameters answered with an error: ``response_format``, ``json_schema``, ``logprobs``,
``stream_options``), ``copy_examples`` (replies that copy the prompt's example), the "abort"
fault (a stream that ends without a finish_reason), and how a small model answers
(``answer_style``): ``"no-markers"`` (a right answer with no ``[n]``), ``"marker-as-fact"``
("The answer is [1]."), ``"first-hop"`` (the answer stops at the first lookup's fact). By
default an answer states the last finding the prompt lists, in the words of the document it
came from, else it is the first sentence of document 1; both cite what they quote.

Prompts over passages put the ``<document>`` blocks first and the ``TASK:`` line after them; the
task, its ``Question:``/``Lookup:`` lines and its instructions are read from the text outside
the documents, so a passage that says "TASK: …" changes nothing.
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Request = dict[str, Any]
Match = str | re.Pattern[str] | Callable[[Request], bool] | None


@dataclass(frozen=True)
class ToolCallsReply:
    """A reply with native ``tool_calls``: (name, arguments) pairs, arguments a dict (sent as
    its JSON) or a raw string (sent as is, e.g. broken JSON). A server that rejects ``tools``
    altogether is a fault: ``add_fault("400", times=None, match=lambda r: "tools" in r)``."""

    calls: list[tuple[str, Any]]
    content: str = ""

    def message(self) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": self.content or None,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for i, (name, args) in enumerate(self.calls)
            ],
        }

    def text(self) -> str:  # what usage counts
        return json.dumps(self.message()["tool_calls"])


Reply = str | ToolCallsReply | Callable[[Request], "str | ToolCallsReply"]

GARBAGE_REPLY = "%%% garbled 7f3a output ~~ zxqv %%%"
NO_ANSWER = "The documents do not state the answer."

_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        """what which when where whom whose does doing done that this these those with from have has
    about there their they them then than were been being into over under also some many much
    more most such only other each your yours will would should could shall must might after
    before while because between both either neither very just like here make made list tell
    give describe explain answer question questions document documents query queries search
    please know find said says within without across against among through during upon onto
    even ever every same anything something everything nothing""",
    )
)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI "content parts"
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _all_text(req: Request) -> str:
    return "\n".join(_content_text(m.get("content")) for m in req.get("messages", []))


def _last_user(req: Request) -> str:
    for m in reversed(req.get("messages", [])):
        if m.get("role") == "user":
            return _content_text(m.get("content"))
    return ""


_DOCUMENT_BLOCK = re.compile(r"<document[^>]*>.*?</document>", re.DOTALL)


def outside_documents(text: str) -> str:
    """The prompt without its quoted passages: the task and its instructions."""
    return _DOCUMENT_BLOCK.sub("", text)


def _task_line(text: str) -> str | None:
    for line in outside_documents(text).splitlines():
        if line.strip().startswith("TASK:"):
            return line.strip()[len("TASK:") :].strip()
    return None


def _task_message(req: Request) -> str:
    # A format retry ends with RETRY_FORMAT, not a TASK line; answer the task it retries.
    users = [
        _content_text(m.get("content")) for m in req.get("messages", []) if m.get("role") == "user"
    ]
    return next(
        (u for u in reversed(users) if _task_line(u) is not None), users[-1] if users else ""
    )


def task_of(req: Request) -> str | None:
    """The ``TASK: <name>`` of the last user message, if it has one."""
    return _task_line(_last_user(req))


def _matches(match: Match, req: Request) -> bool:
    if match is None:
        return True
    if isinstance(match, str):
        return match in _all_text(req)
    if isinstance(match, re.Pattern):
        return match.search(_all_text(req)) is not None
    return bool(match(req))


# ---------------------------------------------------------------------------------------------
# Default responder
# ---------------------------------------------------------------------------------------------


def _line_value(text: str, label: str) -> str:
    """The value of the last ``label:`` line outside the documents (examples come first)."""
    found = re.findall(rf"^{re.escape(label)}:[ \t]*(.*)$", outside_documents(text), re.MULTILINE)
    return found[-1].strip() if found else ""


def _content_words(text: str) -> set[str]:
    return {
        w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4 and w not in _STOPWORDS
    }


def _documents(text: str) -> list[tuple[str, str]]:
    """(n, body) of each ``<document ...>`` block; n is "" when the tag has none."""
    blocks = re.findall(r"<document([^>]*)>\n?(.*?)\n?</document>", text, re.DOTALL)
    out = []
    for attrs, body in blocks:
        n = re.search(r'n="(\d+)"', attrs)
        out.append((n.group(1) if n else "", body))
    return out


def _relevant(keywords: set[str], body: str) -> bool:
    return bool(keywords & set(re.findall(r"[a-z0-9]+", body.lower())))


def _judge_keywords(text: str) -> set[str]:
    task = outside_documents(text)
    asked = " ".join(
        _line_value(task, label) for label in ("Question", "Lookup", "Lookups", "Search query")
    )
    return _content_words(asked)


def judge_relevance(text: str) -> list[bool]:
    """The default judge: a passage is relevant when it shares a content word with the
    question or the lookup that found it. Every passage of the prompt, in order."""
    keywords = _judge_keywords(text)
    return [_relevant(keywords, body) for _, body in _documents(text)]


def judged_passages(text: str) -> list[bool]:
    """The verdicts a judge prompt asks for: document n ("Is document 3 above useful"), or
    documents first to last of a batch ("documents 1 to 8")."""
    verdicts = judge_relevance(text)
    task = outside_documents(text)
    one = re.search(r"Is document (\d+) above useful", task)
    if one:
        n = int(one.group(1))
        return verdicts[n - 1 : n]
    span = re.search(r"documents (\d+) to (\d+) above", task)
    if span:
        return verdicts[int(span.group(1)) - 1 : int(span.group(2))]
    return verdicts


def _plan_reply(text: str) -> str:
    question = _line_value(text, "Question")
    described = re.search(r'only describes: "(.*?)"\.', outside_documents(text))
    if described:
        phrase = described.group(1)
        return json.dumps({"steps": [f"Who or what is {phrase}?", question.replace(phrase, "#1")]})
    parts = [p.strip(" ?.,") for p in question.split(" and ") if p.strip(" ?.,")]
    steps = [f"{p}?" for p in parts] if len(parts) > 1 else [question]
    limit = re.search(r"at most (\d+)", text)
    return json.dumps({"steps": steps[: int(limit.group(1))] if limit else steps})


def _extract_reply(text: str, judge: str = "") -> str:
    """The lookup's answer from the passage sharing most content words with the lookup: for
    "who" a run of capitalised words (a name) the lookup does not hold, else the words of its
    best sentence that follow those the lookup holds."""
    lookup = _line_value(text, "Lookup")
    keywords = _content_words(lookup)
    scored = [
        (len(keywords & set(re.findall(r"[a-z0-9]+", body.lower()))), n, body)
        for n, body in _documents(text)
    ]
    best = max(scored, key=lambda t: t[0], default=(0, "", ""))
    # query.rerank "lookup": the same call names the useful passages (its verdicts).
    judging = '"useful"' in outside_documents(text)
    useful = {"useful": _useful_documents(text, judge)} if judging else {}
    if not best[0]:
        return json.dumps({"answer": "", "document": 0, **useful})
    _, n, body = best
    asked = set(re.findall(r"[a-z0-9]+", lookup.lower()))
    # A name the lookup does not already hold ("The Austin" for "… in Austin?" is no answer).
    names = [
        name
        for name in re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b", body)
        if not set(re.findall(r"[a-z0-9]+", name.lower())) - {"the"} <= asked
    ]
    if lookup.lower().startswith("who") and names:
        answer = names[0]
    else:
        sentences = re.split(r"(?<=[.!?])\s+|\n+", body.strip())
        sentence = max(
            sentences, key=lambda t: len(keywords & set(re.findall(r"[a-z0-9]+", t.lower())))
        )
        # The sentence's words after those the lookup already holds ("The daily meal
        # allowance is 50 EUR" -> "50 EUR"), as a model extracts the value, at most 8.
        words = sentence.split()
        while len(words) > 1 and re.sub(r"\W", "", words[0].lower()) in asked | {"the", "is"}:
            words = words[1:]
        answer = " ".join(words[:8]).rstrip(".,;:")
    return json.dumps({"answer": answer, "document": int(n or 1), **useful})


def _useful_documents(text: str, judge: str) -> list[int]:
    """The documents a lookup call names useful: by the default judge, or every one / none
    for ``keep_everything`` / ``strict_judge``."""
    verdicts = judge_relevance(text)
    if judge:
        verdicts = [judge == "YES"] * len(verdicts)
    return [n for n, kept in enumerate(verdicts, start=1) if kept]


def _answer_reply(text: str, style: str) -> str:
    docs = _documents(text)
    if not docs:
        return NO_ANSWER
    first = next((body for n, body in docs if n == "1"), docs[0][1]).strip()
    sentence = re.split(r"(?<=[.!?])\s+", first, maxsplit=1)[0].strip()
    # "- <lookup> <its answer> [n]" per finding; a lookup ends at its question mark.
    facts = re.findall(
        r"^- (?:.*?[?？] |\S+ )(\S.*?) \[(\d+)\]$", outside_documents(text), re.MULTILINE
    )
    if style == "marker-as-fact":
        return "The answer to the question is [1]."
    if style == "first-hop" and facts:
        return f"The answer is {facts[0][0]} [{facts[0][1]}]."
    if style == "no-markers":
        return sentence
    if facts and not style:
        # A model that reads what the lookups found states the last finding, citing the
        # document it came from, in that document's words.
        found, n = facts[-1]
        body = next((b for m, b in docs if m == n), "")
        holding = [t for t in re.split(r"(?<=[.!?])\s+|\n+", body) if found in t]
        if holding:
            return f"{holding[0].strip().rstrip('.')} [{n}]."
    return f"{sentence} [1]"


def default_reply(req: Request, answer_style: str = "", judge: str = "") -> str:
    """Deterministic replies per prompt task; see the module docstring."""
    text = _task_message(req)
    task = _task_line(text)
    if task == "plan":
        return _plan_reply(text)
    if task in ("judge", "judge-batch"):
        verdicts = ["YES" if v else "NO" for v in judged_passages(text)]
        if task == "judge":
            return verdicts[0] if verdicts else "NO"
        return json.dumps(verdicts)
    if task == "extract":
        return _extract_reply(text, judge)
    if task == "reflect":
        return "[]"
    if task == "answer":
        return _answer_reply(text, answer_style)
    if task == "route":
        names = [
            line[2:].strip().split()[0].rstrip(":,")
            for line in text.splitlines()
            if line.startswith("- ") and line[2:].strip()
        ]
        return json.dumps(names)
    if task is not None and task.startswith("research-"):
        return research_reply(task, text)
    if task == "rewrite":
        last = _line_value(text, "Last message")
        history = text.split("Conversation:", 1)[-1].split("Last message:", 1)[0]
        users = re.findall(
            r"^\s*(?:user|human|q)\s*:\s*(.+)$", history, re.MULTILINE | re.IGNORECASE
        )
        previous = users[-1].strip() if users else ""
        return f"{last} (about: {previous})" if previous and previous != last else last
    return "OK"


def research_reply(task: str, text: str) -> str:
    """Research stages (``deepsearcher.research.prompts``): a brief whose must-answer questions
    are the request's parts split on " and ", one plan section per question (the draft and
    the check are code, the researchers the deep search's tasks)."""
    if task == "research-brief":
        request = _line_value(text, "Request").split("\n(Asked:")[0]
        parts = [p.strip(" ?.,") for p in re.split(r"\s+and\s+|;\s*", request) if p.strip(" ?.,")]
        return json.dumps(
            {
                "goal": request,
                "scope": "the loaded documents",
                "audience": "the requester",
                "must_answer": [f"{p[0].upper()}{p[1:]}?" for p in parts] or [request],
                "question": "",
            }
        )
    if task == "research-plan":
        limit = re.search(r"at most (\d+)", text)
        questions = re.findall(r"^Must answer: (.*)$", text, re.MULTILINE)
        sections = [
            {"title": " ".join(q.rstrip("?").split()[:6]), "question": q, "complexity": 1}
            for q in questions
        ]
        return json.dumps(sections[: int(limit.group(1))] if limit else sections)
    return "DONE"  # the tool steps and hypotheses: nothing to add


# ---------------------------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------------------------


@dataclass
class _Rule:
    match: Match
    reply: Reply
    times: int | None
    latency: float | None


@dataclass
class _Fault:
    kind: str
    times: int | None
    match: Match


_FAULT_KINDS = ("timeout", "garbage", "bad_json", "disconnect", "abort")


class ScriptedLLMServer:
    """A local chat-completions server whose replies, faults and latency tests script.

    Fault kinds: any HTTP status as a string ("500", "503", "429" with ``Retry-After: 0``, "400",
    "401"), "timeout" (hang ``hang_s`` then close without answering), "garbage" (200 with a
    nonsense reply), "bad_json" (200 with an invalid body), "disconnect" (drop the connection
    mid-body; a stream is cut after its first delta), "abort" (a stream ends cleanly after its
    first delta, without a finish_reason: llama.cpp aborting it for another request).
    """

    def __init__(
        self, latency: float = 0.0, *, hang_s: float = 5.0, model: str = "scripted"
    ) -> None:
        self.latency = latency
        self.hang_s = hang_s
        # Stream deltas of this many characters instead of words, so tags split across deltas.
        self.stream_piece_chars: int | None = None
        # Stall a stream this long after its first ``stream_stall_after`` deltas (a reply that
        # starts, then hangs).
        self.stream_stall_after: int | None = None
        self.stream_stall_s = 60.0
        self.model = model
        # Imitations of real servers and models (all off by default):
        # a judge that says NO to everything (its log-probabilities still lean to YES for
        # relevant passages, as a strict small model's do);
        self.strict_judge = False
        # log-probabilities in replies to requests that ask for them (logprobs=true);
        self.logprobs = False
        # no usage in streamed replies, whatever stream_options asks (llama.cpp, some proxies);
        self.stream_usage = True
        # request parameters answered with an error naming them, as servers without the
        # feature do: "response_format", "logprobs", "stream_options", "tools", or
        # "json_schema" (only response_format of that type, a 500 as llama-cpp-python sends);
        self.refuse: set[str] = set()
        # plan / reflect replies that copy the prompt's example (format
        # retries too: a model that always copies).
        self.copy_examples = False
        # a judge that says YES to every passage (verdicts that tell nothing apart);
        self.keep_everything = False
        # how the answer is written: "" (one cited sentence), "no-markers", "marker-as-fact",
        # "first-hop" (see the module docstring).
        self.answer_style = ""
        self.requests: list[Request] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._rules: list[_Rule] = []
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> ScriptedLLMServer:
        handler = type("_BoundHandler", (_Handler,), {"scripted": self})
        httpd = _HTTPServer(("127.0.0.1", 0), handler)
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name="scripted-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on latency or a "timeout" fault
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- scripting --------------------------------------------------------------------------

    def add_rule(
        self, match: Match, reply: Reply, *, times: int | None = None, latency: float | None = None
    ) -> None:
        """Reply with ``reply`` to requests matching ``match`` (substring, regex or predicate)."""
        with self._lock:
            self._rules.insert(0, _Rule(match, reply, times, latency))

    def add_fault(self, kind: str, *, times: int | None = 1, match: Match = None) -> None:
        """Fail the next ``times`` matching chat requests (``None``: all of them)."""
        if kind not in _FAULT_KINDS and not re.fullmatch(r"[1-5]\d\d", kind):
            raise ValueError(f"unknown fault kind {kind!r}")
        with self._lock:
            self._faults.insert(0, _Fault(kind, times, match))

    def count(self, task: str) -> int:
        """Requests whose last user message starts with ``TASK: <task>``."""
        with self._lock:
            return sum(1 for r in self.requests if task_of(r) == task)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._rules.clear()
            self._faults.clear()
            self.max_in_flight = self._in_flight

    # -- used by the handler ----------------------------------------------------------------

    def _take(self, items: list[Any], req: Request) -> Any:
        for item in items:
            if _matches(item.match, req):
                if item.times is not None:
                    item.times -= 1
                    if item.times <= 0:
                        items.remove(item)
                return item
        return None

    def _plan(self, req: Request) -> tuple[_Fault | None, str | ToolCallsReply, float]:
        with self._lock:
            self.requests.append(req)
            fault: _Fault | None = self._take(self._faults, req)
            # A cut or aborted reply is still the scripted one, cut.
            cuts = fault is not None and fault.kind in ("disconnect", "abort")
            rule: _Rule | None = None if fault and not cuts else self._take(self._rules, req)
        latency = self.latency if rule is None or rule.latency is None else rule.latency
        if fault is not None and fault.kind == "garbage":
            return None, GARBAGE_REPLY, latency
        if rule is not None:
            reply = rule.reply(req) if callable(rule.reply) else rule.reply
            return fault, reply, latency
        task = task_of(req)
        asked = _task_line(_task_message(req))
        if self.copy_examples and asked in ("plan", "reflect"):
            example = re.search(
                r'\{"(?:queries|steps)": \[[^\]\n]*\]\}', outside_documents(_task_message(req))
            )
            if example:
                return fault, example.group(0), latency
        if task in ("judge", "judge-batch") and (self.strict_judge or self.keep_everything):
            word = "NO" if self.strict_judge else "YES"
            count = len(judged_passages(_task_message(req)))
            return fault, word if task == "judge" else json.dumps([word] * count), latency
        judge = "NO" if self.strict_judge else "YES" if self.keep_everything else ""
        return fault, default_reply(req, self.answer_style, judge), latency

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1


def _logprobs(reply: str, req: Request, strict: bool) -> dict[str, Any]:
    """Log-probabilities of a reply's word-sized tokens. At a YES/NO word of a judge reply the
    alternatives carry the judge's doubt: a relevant passage gets P(YES) 0.9 (0.3 from a
    strict judge, which still says NO), an unrelated one 0.05 (0.01)."""
    task = task_of(req)
    judging = task in ("judge", "judge-batch")
    relevant = iter(judged_passages(_task_message(req)) if judging else [])
    content = []
    for piece in _pieces(reply):
        word = piece.strip().strip("\"'{}:,[]").lower()
        if judging and word in ("yes", "no"):
            p_yes = (0.3 if strict else 0.9) if next(relevant, False) else 0.01 if strict else 0.05
            top = [("YES", math.log(p_yes)), ("NO", math.log(1 - p_yes)), ("Yes", -9.0)]
            spoken = dict(top).get(piece.strip(), -0.1)
        else:
            top, spoken = [(piece, 0.0)], 0.0
        content.append(
            {
                "token": piece,
                "logprob": spoken,
                "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top],
            }
        )
    return {"content": content}


def _pieces(text: str) -> list[str]:
    # Word-sized deltas whose concatenation is exactly the text, like a real tokenizer's stream.
    return re.findall(r"\S+\s*|\s+", text) or [text]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog of 5 drops connections when tests fire many calls at once; the client
    # then waits for a SYN retry (~1 s) and concurrency measurements lie.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (its timeout, a cancelled run) resets the connection while a
        # reply is written: expected in these tests. socketserver would print the traceback to
        # whatever sys.stderr is then, which can be a CliRunner capture of a later test.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedLLMServer
    protocol_version = "HTTP/1.0"  # one request per connection; streams end at close

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            model = {
                "id": self.scripted.model,
                "object": "model",
                "created": 0,
                "owned_by": "tests",
            }
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            )

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            )
            return
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except (ValueError, UnicodeDecodeError):
            self._send_json(
                400,
                {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}},
            )
            return
        server = self.scripted
        server._enter()
        try:
            self._serve_chat(req)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to answer
        finally:
            server._leave()

    def _refusal(self, req: Request) -> bool:
        """Answer 400/422 to a parameter the server is set to refuse; True when it did."""
        refuse = self.scripted.refuse
        fmt = req.get("response_format") or {}
        if "json_schema" in refuse and fmt.get("type") == "json_schema":
            # What llama-cpp-python 0.3 answers: its validation error, as a 500.
            message = (
                "1 validation error: {'type': 'literal_error', 'loc': ('body', "
                "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}"
            )
            self._send_json(500, {"error": {"message": message, "type": "internal_server_error"}})
            return True
        for name in sorted(refuse - {"json_schema"}):
            if name in req:
                message = f"Unrecognized request argument supplied: {name}"
                self._send_json(
                    400, {"error": {"message": message, "type": "invalid_request_error"}}
                )
                return True
        return False

    def _serve_chat(self, req: Request) -> None:
        server = self.scripted
        if self._refusal(req):
            with server._lock:
                server.requests.append(req)
            return
        fault, reply, latency = server._plan(req)
        if fault is not None and fault.kind == "timeout":
            server._stopping.wait(server.hang_s)
            self.close_connection = True
            return
        if latency and server._stopping.wait(latency):
            return
        if fault is not None and fault.kind.isdigit():
            status = int(fault.kind)
            kind = {429: "rate_limit_exceeded", 400: "invalid_request_error"}.get(
                status, "server_error"
            )
            message = {429: "rate limited", 400: "scripted bad request"}.get(
                status, f"scripted error {status}"
            )
            headers = {"Retry-After": "0"} if status == 429 else None
            self._send_json(status, {"error": {"message": message, "type": kind}}, headers)
            return
        if fault is not None and fault.kind == "bad_json":
            data = b"{this is not json"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        cut = fault is not None and fault.kind == "disconnect"
        abort = fault is not None and fault.kind == "abort"
        messages_text = "\n".join(_content_text(m.get("content")) for m in req.get("messages", []))
        reply_text = reply.text() if isinstance(reply, ToolCallsReply) else reply
        usage = {
            "prompt_tokens": len(messages_text.split()),
            "completion_tokens": len(reply_text.split()),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        model = req.get("model") or server.model
        if req.get("stream"):
            include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
            if not server.stream_usage:
                include_usage = False
            self._stream(reply_text, model, usage if include_usage else None, cut, abort)
            return
        native = isinstance(reply, ToolCallsReply)
        body = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": reply.message()
                    if isinstance(reply, ToolCallsReply)
                    else {"role": "assistant", "content": reply},
                    "finish_reason": "tool_calls" if native else "stop",
                    **(
                        {"logprobs": _logprobs(reply_text, req, server.strict_judge)}
                        if server.logprobs and req.get("logprobs") and not native
                        else {}
                    ),
                }
            ],
            "usage": usage,
        }
        if cut:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
            return
        self._send_json(200, body)

    def _stream(
        self, reply: str, model: str, usage: dict[str, int] | None, cut: bool, abort: bool
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        base = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

        def send(chunk: dict[str, Any] | str) -> None:
            payload = chunk if isinstance(chunk, str) else json.dumps({**base, **chunk})
            self.wfile.write(f"data: {payload}\n\n".encode())
            self.wfile.flush()

        send(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ]
            }
        )
        size = self.scripted.stream_piece_chars
        pieces = [reply[i : i + size] for i in range(0, len(reply), size)] if size else None
        for i, piece in enumerate(pieces or _pieces(reply)):
            send({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
            if (cut or abort) and i == 0:
                self.close_connection = True
                return
            if i + 1 == self.scripted.stream_stall_after and self.scripted._stopping.wait(
                self.scripted.stream_stall_s
            ):
                return
        send({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if usage is not None:
            send({"choices": [], "usage": usage})
        send("[DONE]")
