"""A real Milvus gRPC server (milvus-lite's server mode) on loopback, standing in for Milvus
standalone or a cluster: shared by every test that needs several processes on one store."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def stop_process(proc: subprocess.Popen[Any], timeout_s: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_milvus_server(data_dir: Path, timeout_s: float = 60) -> Iterator[str]:
    """Start ``milvus-lite server`` on a free port; yield its ``http://127.0.0.1:PORT`` URI."""
    port = free_port()
    exe = Path(sys.executable).with_name("milvus-lite")
    proc = subprocess.Popen(
        [
            str(exe),
            "server",
            "--data-dir",
            str(data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    try:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                pytest.fail(f"milvus-lite server exited with {proc.returncode}")
            time.sleep(0.2)
        else:
            pytest.fail("milvus-lite server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


@pytest.fixture
def milvus_server(tmp_path: Path) -> Iterator[str]:
    with running_milvus_server(tmp_path / "srv") as uri:
        yield uri
