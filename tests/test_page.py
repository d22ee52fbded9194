"""The chat page's files over HTTP, in process: the fast lane's check of ``server/page.py``
(tests/test_chat_page.py drives the page itself in chromium, in the slow lane)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from deepsearcher.config import Settings
from deepsearcher.server import create_app


def test_page_and_assets_need_no_key_and_carry_a_self_only_csp(
    settings: Settings, make_searcher: Any, tmp_path: Path
) -> None:
    app = create_app(
        make_searcher(settings), settings, api_keys=["team-key"], upload_dir=tmp_path / "up"
    )
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'data-keys="on"' in page.text  # the page knows to ask for a key
        for path in ("/", "/static/app.js", "/static/app.css", "/static/favicon.svg"):
            resp = client.get(path)
            assert resp.status_code == 200, path
            assert "default-src 'none'" in resp.headers["content-security-policy"], path
            assert resp.headers["x-content-type-options"] == "nosniff", path
        assert "/static/app.js" in page.text
        # Only the page is open: data still needs the key.
        assert client.get("/v1/models").status_code == 401
        ok = client.get("/v1/models", headers={"Authorization": "Bearer team-key"})
        assert ok.status_code == 200
