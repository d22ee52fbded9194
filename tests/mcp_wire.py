"""The MCP streamable HTTP transport spoken by hand, as a probe (or a raw socket) speaks it:
the headers and the ``initialize`` message that open a session."""

from __future__ import annotations

import httpx

PROTOCOL_VERSION = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}


def open_session(url: str, key: str | None = None) -> httpx.Response:
    """POST ``initialize`` to ``{url}/mcp``: the response carries the session id."""
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(f"{url}/mcp", json=INIT, headers=ACCEPT | auth, timeout=30)


def session_headers(session_id: str) -> dict[str, str]:
    """The headers of a request within the session."""
    return ACCEPT | {"Mcp-Session-Id": session_id, "Mcp-Protocol-Version": PROTOCOL_VERSION}
