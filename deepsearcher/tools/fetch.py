"""Fetch a web result's page and extract its main text, guarded against SSRF.

A result URL comes from a third party (the search provider, or a page it links to), so it is
untrusted: fetching it blindly would let a search result reach services on the user's own
network (cloud metadata at 169.254.169.254, an admin panel on 10.x, a database on localhost).
Every hop is therefore checked before any connection is made:

- only ``http``/``https``;
- the host is resolved (``getaddrinfo`` in a thread) and refused if ANY address is private,
  loopback, link-local, site-local, multicast, reserved, unspecified or otherwise not globally
  routable, including an IPv4 address carried inside an IPv6 one (IPv4-mapped, 6to4, Teredo,
  NAT64), unless ``web_search.allow_private_hosts``;
- the connection goes to the address that was checked (the Host header and TLS SNI keep the
  name), so a DNS answer that changes between check and connect (rebinding) cannot slip by;
- redirects are followed by hand, each hop checked again, at most ``MAX_REDIRECTS``;
- the body is streamed and cut at ``max_page_bytes``; the whole fetch has ``timeout_s``.

Any refusal or failure returns ``None`` and is logged; the caller keeps the result's snippet.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx

from deepsearcher.config import WebSearchSettings

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 3
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("text/plain",)
_USER_AGENT = "deepsearcher (+https://github.com/zilliztech/deep-searcher)"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchRefused(Exception):
    """The URL (or a redirect hop) may not be fetched; ``str()`` says why."""


# NAT64 (RFC 6052 well-known prefix, RFC 8215 local-use prefix): the gateway forwards to the
# IPv4 address written into the IPv6 one, so 64:ff9b::7f00:1 reaches 127.0.0.1.
_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")


def _bits(value: int, start: int, length: int) -> int:
    """``length`` bits of a 128-bit address starting at bit ``start`` (0 = most significant)."""
    return (value >> (128 - start - length)) & ((1 << length) - 1)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """IPv4 addresses an IPv6 address delivers to, with the mechanism's name."""
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    if ip.ipv4_mapped is not None:
        found.append(("IPv4-mapped", ip.ipv4_mapped))
    if ip.sixtofour is not None:
        found.append(("6to4", ip.sixtofour))
    if ip.teredo is not None:
        server, client = ip.teredo
        found += [("Teredo", server), ("Teredo", client)]
    value = int(ip)
    if ip in _NAT64_WELL_KNOWN:
        found.append(("NAT64", ipaddress.IPv4Address(_bits(value, 96, 32))))
    elif ip in _NAT64_LOCAL_USE:
        # The operator picks the prefix length inside the /48 and RFC 6052 places the IPv4
        # bits around the reserved octet (bits 64-71) differently for each; we cannot tell
        # which is in use, so every layout must decode to a public address (/96, the usual
        # DNS64 setup, first so its reason is the one reported).
        layouts = (
            _bits(value, 96, 32),  # /96
            _bits(value, 72, 32),  # /64
            (_bits(value, 56, 8) << 24) | _bits(value, 72, 24),  # /56
            (_bits(value, 48, 16) << 16) | _bits(value, 72, 16),  # /48
        )
        found += [("NAT64", ipaddress.IPv4Address(v)) for v in dict.fromkeys(layouts)]
    return found


def _ipv4_refusal(ip: ipaddress.IPv4Address) -> str | None:
    # Most specific first: 169.254/16 is also "private", but "link-local" says more.
    for label in ("loopback", "link_local", "unspecified", "multicast", "reserved", "private"):
        if getattr(ip, f"is_{label}"):
            return label.replace("_", "-")
    if not ip.is_global:  # shared address space (100.64/10), documentation ranges, ...
        return "not globally routable"
    return None


def refusal_reason(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public address, or None when it is.

    An IPv6 address that carries an IPv4 address (IPv4-mapped, 6to4, Teredo, NAT64) is judged
    by that IPv4 address with the IPv4 rules: 2002:7f00:1:: reaches 127.0.0.1 through a 6to4
    relay. The deprecated site-local range fec0::/10 is refused like a private one."""
    if isinstance(ip, ipaddress.IPv4Address):
        return _ipv4_refusal(ip)
    for mechanism, inner in embedded_ipv4(ip):
        reason = _ipv4_refusal(inner)
        if reason:
            return f"{reason} via {mechanism} ({inner})"
    if ip.ipv4_mapped is not None or ip in _NAT64_WELL_KNOWN or ip in _NAT64_LOCAL_USE:
        # Translated to a public IPv4 address: as public as that address. Python counts these
        # prefixes as reserved, which would refuse every host on an IPv6-only (DNS64) network.
        return None
    if ip.is_site_local:
        return "site-local"
    for label in ("loopback", "link_local", "unspecified", "multicast", "reserved", "private"):
        if getattr(ip, f"is_{label}"):
            return label.replace("_", "-")
    if not ip.is_global:
        return "not globally routable"
    return None


async def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (blocking resolver in a thread)."""
    try:
        infos = await asyncio.to_thread(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise FetchRefused(f"cannot resolve {host}: {exc}") from None
    addresses: list[IPAddress] = []
    for info in infos:
        raw = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 scope id
        ip = ipaddress.ip_address(raw)
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise FetchRefused(f"cannot resolve {host}: no address")
    return addresses


@dataclass
class FetchedPage:
    url: str  # after redirects
    content_type: str
    text: str  # decoded body (possibly truncated at the size cap)
    truncated: bool


class PageFetcher:
    """Fetch pages under the limits of ``WebSearchSettings``; see the module docstring."""

    def __init__(self, settings: WebSearchSettings) -> None:
        self.settings = settings

    async def check_url(self, url: str) -> tuple[httpx.URL, IPAddress]:
        """Parse and vet one hop; return it with the address to connect to."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise FetchRefused(f"invalid URL ({exc})") from None
        if parsed.scheme not in ("http", "https"):
            raise FetchRefused(f"scheme {parsed.scheme or '(none)'!r} is not http(s)")
        if not parsed.host:
            raise FetchRefused("URL has no host")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        addresses = await resolve_host(parsed.host, port)
        if not self.settings.allow_private_hosts:
            for ip in addresses:
                reason = refusal_reason(ip)
                if reason:
                    raise FetchRefused(
                        f"{parsed.host} resolves to {reason} address {ip} "
                        "(set web_search.allow_private_hosts to allow)"
                    )
        return parsed, addresses[0]

    async def fetch(self, url: str, client: httpx.AsyncClient) -> FetchedPage:
        """GET ``url`` with the guard on every hop; raise FetchRefused on any refusal/failure."""
        try:
            return await asyncio.wait_for(self._fetch(url, client), self.settings.timeout_s)
        except asyncio.TimeoutError:
            raise FetchRefused(f"timed out after {self.settings.timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            raise FetchRefused(f"{type(exc).__name__}: {exc}") from None

    async def _fetch(self, url: str, client: httpx.AsyncClient) -> FetchedPage:
        current = url
        for hop in range(MAX_REDIRECTS + 1):
            target, ip = await self.check_url(current)
            request = _pinned_request(client, target, ip)
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                if response.status_code in _REDIRECT_STATUSES:
                    location = response.headers.get("location")
                    if not location:
                        raise FetchRefused(f"HTTP {response.status_code} without Location")
                    if hop == MAX_REDIRECTS:
                        raise FetchRefused(f"more than {MAX_REDIRECTS} redirects")
                    current = urljoin(str(target), location)
                    continue
                if response.status_code != 200:
                    raise FetchRefused(f"HTTP {response.status_code}")
                content_type = response.headers.get("content-type", "").split(";")[0].strip()
                if content_type and not content_type.startswith(_HTML_TYPES + _TEXT_TYPES):
                    raise FetchRefused(f"content type {content_type} is not HTML or text")
                body, truncated = await self._read_capped(response)
                encoding = response.charset_encoding or "utf-8"
                try:
                    text = body.decode(encoding, errors="replace")
                except LookupError:  # an unknown charset label
                    text = body.decode("utf-8", errors="replace")
                return FetchedPage(str(target), content_type or "text/html", text, truncated)
            finally:
                await response.aclose()
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _read_capped(self, response: httpx.Response) -> tuple[bytes, bool]:
        cap = self.settings.max_page_bytes
        parts: list[bytes] = []
        size = 0
        async for piece in response.aiter_bytes():
            parts.append(piece)
            size += len(piece)
            if size >= cap:
                # Stop reading: the rest never leaves the socket buffer. A cut page still
                # extracts (HTML parsers tolerate a missing tail).
                return b"".join(parts)[:cap], True
        return b"".join(parts), False


def _pinned_request(client: httpx.AsyncClient, url: httpx.URL, ip: IPAddress) -> httpx.Request:
    # Connect to the vetted address, not to whatever the name resolves to a moment later.
    host = url.host
    headers = {"Host": url.netloc.decode("ascii"), "User-Agent": _USER_AGENT}
    extensions = {"sni_hostname": host} if url.scheme == "https" else {}
    return client.build_request(
        "GET", url.copy_with(host=str(ip)), headers=headers, extensions=extensions
    )


def extract_main_text(page: FetchedPage) -> str | None:
    """Main text of the page (trafilatura for HTML); None when nothing usable is found."""
    if page.content_type.startswith(_TEXT_TYPES):
        plain = page.text.strip()
        return plain or None
    import trafilatura  # the `web` extra; checked by the caller before fetching

    text = trafilatura.extract(page.text, include_comments=False, include_tables=True)
    return text.strip() if text and text.strip() else None


def trafilatura_available() -> bool:
    try:
        import trafilatura  # noqa: F401
    except ImportError:
        return False
    return True
