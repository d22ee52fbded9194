"""A scripted OpenAI-compatible embeddings server (``POST /v1/embeddings``) for tests and
benchmarks, standing in for TEI, vLLM, Ollama or OpenAI.

Standard library only, like tests/llm_server.py, so it shares no code with the client under
test. Vectors are deterministic and meaningful: each word of a text is hashed into one of
``dim`` buckets (the hashing trick), so texts sharing words get close vectors and a load and a
query through it find the right passages. Faults are scripted per request, in order:
"429" (with ``Retry-After``), any other status ("500", "503", "413"...), "slow" (answer after
``slow_s``, past the client's timeout), "wrong_dim" (vectors one longer than ``dim``).
``latency`` delays every answer (a number, or a function of the request's inputs, so batches
can finish in another order than they were sent).

It records every request (``requests``: the inputs of each) and the most requests in flight at
once (``max_in_flight``). ``gate`` holds requests until that many are in flight at once (then
lets everything through for good), so a test proves concurrency by the count, not by timing:
a client that sends one request at a time never opens it and stays at ``max_in_flight == 1``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Latency = float | Callable[[list[str]], float]


def hashed_vector(text: str, dim: int) -> list[float]:
    """The server's vector of ``text``: word counts hashed into ``dim`` buckets, L2-normalised
    (an all-zero text gets a fixed unit vector)."""
    vec = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dim
        sign = 1.0 if digest[4] & 1 else -1.0
        vec[bucket] += sign
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


@dataclass
class _Fault:
    kind: str
    retry_after: str | None = None


@dataclass
class Received:
    """One request as the server saw it."""

    inputs: list[str]
    model: str
    dimensions: int | None
    at: float  # time.monotonic() when it arrived
    answered_at: float = 0.0  # when the reply (or fault) was sent


class ScriptedEmbeddingServer:
    """A local ``/v1/embeddings`` server whose vectors, faults and latency tests script."""

    def __init__(
        self, dim: int = 64, *, latency: Latency = 0.0, slow_s: float = 5.0, gate: int = 0
    ) -> None:
        self.dim = dim
        self.latency = latency
        self.slow_s = slow_s
        self.gate = gate
        # Reply with the data items in reverse order (each keeps its "index"), as a server that
        # finishes a batch's items out of order may.
        self.reverse_items = False
        self.requests: list[Received] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._faults: list[_Fault] = []
        self._gate_open = False
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> ScriptedEmbeddingServer:
        handler = type("_BoundHandler", (_Handler,), {"scripted": self})
        httpd = _HTTPServer(("127.0.0.1", 0), handler)
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name="scripted-embed", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedEmbeddingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- scripting --------------------------------------------------------------------------

    def add_fault(self, kind: str, *, times: int = 1, retry_after: str | None = None) -> None:
        """Fail the next ``times`` requests with ``kind`` (after any faults already queued)."""
        if kind not in ("slow", "wrong_dim") and not re.fullmatch(r"[1-5]\d\d", kind):
            raise ValueError(f"unknown fault kind {kind!r}")
        with self._cond:
            self._faults.extend(_Fault(kind, retry_after) for _ in range(times))

    @property
    def texts_embedded(self) -> int:
        return sum(len(r.inputs) for r in self.requests)

    # -- used by the handler ----------------------------------------------------------------

    def _enter(self, received: Received) -> _Fault | None:
        with self._cond:
            self.requests.append(received)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if self.gate and self._in_flight >= self.gate:
                self._gate_open = True
                self._cond.notify_all()
            return self._faults.pop(0) if self._faults else None

    def _wait_gate(self) -> None:
        if not self.gate:
            return
        with self._cond:
            # Bounded: a client that never sends ``gate`` requests at once is answered (slowly)
            # and the test sees max_in_flight below the gate.
            self._cond.wait_for(
                lambda: self._gate_open or self._stopping.is_set(), timeout=self.slow_s
            )

    def _leave(self) -> None:
        with self._cond:
            self._in_flight -= 1


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # see tests/llm_server.py: a small backlog skews concurrency

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (its timeout) resets the connection: expected here


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedEmbeddingServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
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

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/embeddings":
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except (ValueError, UnicodeDecodeError):
            self._send_json(400, {"error": {"message": "request body is not JSON"}})
            return
        inputs = req.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            self._send_json(400, {"error": {"message": "input must be a string or strings"}})
            return
        server = self.scripted
        received = Received(
            inputs, str(req.get("model", "")), req.get("dimensions"), time.monotonic()
        )
        fault = server._enter(received)
        try:
            server._wait_gate()
            self._answer(req, inputs, fault)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            received.answered_at = time.monotonic()
            server._leave()

    def _answer(self, req: dict[str, Any], inputs: list[str], fault: _Fault | None) -> None:
        server = self.scripted
        if fault is not None and fault.kind == "slow":
            server._stopping.wait(server.slow_s)
            self.close_connection = True
            return
        latency = server.latency(inputs) if callable(server.latency) else server.latency
        if latency and server._stopping.wait(latency):
            return
        if fault is not None and fault.kind.isdigit():
            status = int(fault.kind)
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            message = "rate limited" if status == 429 else f"scripted error {status}"
            self._send_json(status, {"error": {"message": message}}, headers)
            return
        dim = server.dim + (1 if fault is not None and fault.kind == "wrong_dim" else 0)
        data = [
            {"object": "embedding", "index": i, "embedding": hashed_vector(text, dim)}
            for i, text in enumerate(inputs)
        ]
        if server.reverse_items:
            data.reverse()
        tokens = sum(len(t.split()) for t in inputs)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": req.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )
