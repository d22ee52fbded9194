# ruff: noqa: F811 (the shared server fixtures are imported, then named as parameters)
"""Web pages the user opens cannot use the server: DNS rebinding (a foreign Host) and
cross-origin writes (CSRF) are refused without API keys, and only JSON (or multipart uploads)
is accepted as a body. Real uvicorn on 127.0.0.1, headers set the way a browser sends them."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.server_fixtures import (  # noqa: F401 (fixtures are used as parameters)
    QUESTION,
    Serve,
    root,
    searcher,
    serve,
)

PLANTED = b"Planted memo: the meal allowance was cut to 1 euro.\n"


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def _error(resp: httpx.Response, status: int, code: str) -> dict[str, str]:
    assert resp.status_code == status, resp.text
    body = resp.json()["error"]
    assert body["code"] == code and body["hint"]
    return body


def test_dns_rebinding_page_cannot_read_answers(serve: Serve, tmp_path: Path) -> None:
    url = serve()
    attacker = f"attacker.example:{_port(url)}"
    # What the page's fetch() sends once attacker.example resolves to 127.0.0.1.
    resp = httpx.post(
        f"{url}/v1/query",
        headers={
            "Host": attacker,
            "Origin": f"http://{attacker}",
            "Content-Type": "text/plain;charset=UTF-8",
        },
        content=b'{"question": "' + QUESTION.encode() + b'"}',
    )
    body = _error(resp, 403, "host_not_allowed")
    assert "45 euros" not in resp.text and "server.allowed_hosts" in body["hint"]
    # Nor a plain JSON request naming that host, nor a read of the collections.
    assert (
        httpx.post(
            f"{url}/v1/query", headers={"Host": attacker}, json={"question": QUESTION}
        ).status_code
        == 403
    )
    assert httpx.get(f"{url}/v1/models", headers={"Host": attacker}).status_code == 403
    assert httpx.get(f"{url}/healthz", headers={"Host": attacker}).status_code == 200

    # Loopback names of this server are fine, with or without a same-origin Origin.
    port = _port(url)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        ok = httpx.get(f"{url}/v1/models", headers={"Host": host, "Origin": f"http://{host}"})
        assert ok.status_code == 200, (host, ok.text)

    # A proxy's public name can be allowed explicitly.
    named = serve(allowed_hosts=["search.corp.example"])
    assert (
        httpx.get(f"{named}/v1/models", headers={"Host": "search.corp.example"}).status_code == 200
    )


def test_cross_origin_page_cannot_plant_a_document(serve: Serve, tmp_path: Path) -> None:
    url = serve()
    # A form on evil.example posting multipart to the server: no preflight, so only the
    # server can refuse it.
    resp = httpx.post(
        f"{url}/v1/load",
        headers={"Origin": "http://evil.example"},
        files=[("files", ("memo.txt", PLANTED, "text/plain"))],
        data={"collection": "planted"},
    )
    _error(resp, 403, "origin_not_allowed")
    models = [m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]]
    assert "planted" not in models
    assert not (tmp_path / "uploads").exists() or not any((tmp_path / "uploads").rglob("*.txt"))
    # A cross-origin chat read is refused the same way, even as JSON.
    _error(
        httpx.post(
            f"{url}/v1/chat/completions",
            headers={"Origin": "https://evil.example"},
            json={"messages": [{"role": "user", "content": QUESTION}]},
        ),
        403,
        "origin_not_allowed",
    )


def test_only_json_bodies_and_multipart_uploads(serve: Serve) -> None:
    url = serve()
    body = b'{"question": "' + QUESTION.encode() + b'"}'
    for content_type in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        resp = httpx.post(f"{url}/v1/query", headers=headers, content=body)
        hint = _error(resp, 415, "unsupported_media_type")["hint"]
        assert "application/json" in hint
    # Multipart is for uploads only.
    resp = httpx.post(
        f"{url}/v1/chat/completions", files=[("files", ("a.txt", b"x", "text/plain"))]
    )
    _error(resp, 415, "unsupported_media_type")
    # API keys protect against pages, yet the Content-Type rule stays.
    keyed = serve(api_keys=["k"])
    auth = {"Authorization": "Bearer k"}
    resp = httpx.post(
        f"{keyed}/v1/query", headers={**auth, "Content-Type": "text/plain"}, content=body
    )
    _error(resp, 415, "unsupported_media_type")
    models = httpx.get(f"{keyed}/v1/models", headers={**auth, "Host": "search.corp.example:443"})
    assert models.status_code == 200  # with keys the key is the check, not the Host


def test_allowed_origin_gets_cors_and_others_do_not(serve: Serve) -> None:
    url = serve(cors_origins=["https://ui.example"])
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    ok = httpx.options(
        f"{url}/v1/chat/completions", headers={**preflight, "Origin": "https://ui.example"}
    )
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == "https://ui.example"
    denied = httpx.options(
        f"{url}/v1/chat/completions", headers={**preflight, "Origin": "https://evil.example"}
    )
    _error(denied, 403, "origin_not_allowed")
    assert "access-control-allow-origin" not in denied.headers
    models = httpx.get(f"{url}/v1/models", headers={"Origin": "https://ui.example"})
    assert models.status_code == 200
    assert models.headers["access-control-allow-origin"] == "https://ui.example"
