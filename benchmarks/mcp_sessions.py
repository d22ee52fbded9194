"""What an open MCP session costs the server, and that the bounds hold.

    .venv/bin/python benchmarks/mcp_sessions.py [--sessions 1000] [--concurrency 16]

Starts ``deepsearcher serve`` as a subprocess over an empty Milvus Lite file (no LLM), with
``server.mcp_sessions_per_client`` and ``server.mcp_max_sessions`` set to ``--sessions``, then
opens that many MCP sessions at /mcp the way the probe did (one ``initialize`` each, never
closed) and reads the server's resident memory (VmRSS) before and after: the difference over
the sessions is the memory one idle session holds. One more session is then refused (429, with
its Retry-After); then all are deleted and as many opened and deleted again (Python keeps the
memory it freed for reuse: the second round not growing it shows nothing leaks). Prints one markdown table
and writes it to benchmarks/out/mcp_sessions.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _common import OUT, ROOT, machine, prepare_imports

prepare_imports()
from tests.mcp_wire import ACCEPT, INIT  # noqa: E402


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _open(client: httpx.AsyncClient, url: str, n: int, concurrency: int) -> list[str]:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> str:
        async with gate:
            resp = await client.post(f"{url}/mcp", json=INIT, headers=ACCEPT)
            resp.raise_for_status()
            return resp.headers["mcp-session-id"]

    return list(await asyncio.gather(*(one() for _ in range(n))))


async def _delete(client: httpx.AsyncClient, url: str, ids: list[str]) -> None:
    for sid in ids:
        await client.delete(f"{url}/mcp", headers={"Mcp-Session-Id": sid})


async def _measure(url: str, pid: int, n: int, concurrency: int) -> dict[str, object]:
    async with httpx.AsyncClient(timeout=60) as client:
        warm = await _open(client, url, min(50, n), concurrency)  # allocator and code paths
        await _delete(client, url, warm)
        await asyncio.sleep(1)
        before = _rss_mb(pid)
        t0 = time.perf_counter()
        ids = await _open(client, url, n, concurrency)
        seconds = time.perf_counter() - t0
        await asyncio.sleep(1)
        after = _rss_mb(pid)
        refused = await client.post(f"{url}/mcp", json=INIT, headers=ACCEPT)
        await _delete(client, url, ids)
        await asyncio.sleep(1)
        freed = _rss_mb(pid)
        await _delete(client, url, await _open(client, url, n, concurrency))
        await asyncio.sleep(1)
        again = _rss_mb(pid)  # the memory freed is reused: no growth means no leak
    return {
        "sessions": n,
        "open_s": seconds,
        "rss_before": before,
        "rss_after": after,
        "kb_per_session": (after - before) * 1024 / n,
        "refused": f"{refused.status_code} {refused.json()['error']['code']}, "
        f"Retry-After {refused.headers.get('retry-after')}",
        "rss_deleted": freed,
        "rss_again": again,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "DEEPSEARCHER_VECTOR_STORE__URI": str(Path(tmp) / "bench.db"),
            "DEEPSEARCHER_SERVER__MCP_SESSIONS_PER_CLIENT": str(args.sessions),
            "DEEPSEARCHER_SERVER__MCP_MAX_SESSIONS": str(args.sessions),
        }
        env.pop("DEEPSEARCHER_API_KEYS", None)
        server = subprocess.Popen(
            [sys.executable, "-m", "deepsearcher", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.5)
            row = asyncio.run(_measure(url, server.pid, args.sessions, args.concurrency))
        finally:
            server.terminate()
            server.wait(timeout=30)
    table = "\n".join(
        [
            f"MCP sessions, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine()}",
            "",
            "| sessions | opened in s | RSS before MB | RSS after MB | KB per session "
            "| one more | RSS after DELETE MB | after as many again MB |",
            "|---:|---:|---:|---:|---:|:---|---:|---:|",
            f"| {row['sessions']} | {row['open_s']:.1f} | {row['rss_before']:.0f} "
            f"| {row['rss_after']:.0f} | {row['kb_per_session']:.0f} | {row['refused']} "
            f"| {row['rss_deleted']:.0f} | {row['rss_again']:.0f} |",
        ]
    )
    print(table)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "mcp_sessions.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
