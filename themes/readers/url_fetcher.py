"""Downloading one document from the web, redirects followed by hand through the SSRF guard.

Each hop is checked and pinned by :mod:`themes.readers.ssrf_guard`: the connection goes to the
checked IP address, with the original host name in the Host header and in TLS SNI/certificate
checks.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING
from urllib.parse import unquote

from themes.readers.errors import RejectedFile, RejectedURL, display_url
from themes.readers.file_names import safe_file_name
from themes.readers.ssrf_guard import (
    IPAddress,
    check_url,
    default_resolver,
    is_public_address,
    pinned_address,
)

if TYPE_CHECKING:
    import httpx

_MB = 2**20

DOCX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
# Accepted media types, with the extension a fetched document of that type is saved under and
# the extensions an advertised name may already carry (GitHub serves .md files as text/plain).
_ACCEPTED_CONTENT_TYPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "text/html": (".html", (".html", ".htm")),
    "text/plain": (".txt", (".txt", ".md", ".markdown")),
    "text/markdown": (".md", (".md", ".markdown")),
    "text/x-markdown": (".md", (".md", ".markdown")),
    "application/pdf": (".pdf", (".pdf",)),
    DOCX_CONTENT_TYPE: (".docx", (".docx",)),
}

# Cloud metadata services hand out credentials to whoever asks from inside the VM. Refused


@dataclasses.dataclass(frozen=True)
class FetchedDocument:
    """A downloaded document, not yet on disk (see save_fetched)."""

    final_url: str  # after redirects
    content_type: str  # media type only, lower case, e.g. "application/pdf"
    body: bytes
    suggested_name: str  # already safe (safe_file_name), with an extension matching the type


def _media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def _disposition_file_name(header: str | None) -> str | None:
    """The file name of a Content-Disposition header, best effort (RFC 6266 / 5987)."""
    if not header:
        return None
    extended = re.search(r"filename\*\s*=\s*([\w-]*)'[^']*'([^;]+)", header, re.IGNORECASE)
    if extended:
        charset = extended.group(1) or "utf-8"
        try:
            return unquote(extended.group(2).strip(), encoding=charset, errors="replace")
        except LookupError:
            return unquote(extended.group(2).strip())
    plain = re.search(r'filename\s*=\s*(?:"([^"]*)"|([^;]+))', header, re.IGNORECASE)
    if plain:
        return (plain.group(1) or plain.group(2) or "").strip() or None
    return None


def _suggest_name(url: httpx.URL, content_type: str, disposition: str | None) -> str:
    extension, known = _ACCEPTED_CONTENT_TYPES[content_type]
    host = url.raw_host.decode("ascii", errors="replace")
    last_segment = url.path.rstrip("/").rsplit("/", 1)[-1]  # httpx already decoded the path
    candidate = _disposition_file_name(disposition) or last_segment or host
    if os.path.splitext(candidate)[1].lower() not in known:
        candidate += extension
    try:
        return safe_file_name(candidate)
    except RejectedFile:
        return safe_file_name(host + extension)


def _read_body(response: httpx.Response, original: str, max_bytes: int, deadline: float) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise RejectedURL(original, _too_large(max_bytes))
    chunks: list[bytes] = []
    size = 0
    # The Content-Length may be absent or lie; count what actually arrives (after decoding).
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise RejectedURL(original, _too_large(max_bytes))
        if time.monotonic() > deadline:
            raise _timed_out(original)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(max_bytes: int) -> str:
    return f"document larger than {max_bytes / _MB:.1f} MB, not fetched"


def _timed_out(original: str) -> RejectedURL:
    return RejectedURL(original, "the server took too long to answer, not fetched")


def fetch_url(
    url: str,
    *,
    max_bytes: int = 10 * 2**20,
    timeout_s: float = 20.0,
    max_redirects: int = 5,
    resolver: Callable[[str], list[str]] | None = None,
    allowed_ports: Collection[int] = (80, 443),
    is_allowed_address: Callable[[IPAddress], bool] = is_public_address,
) -> FetchedDocument:
    """Download one document from the web, refusing anything that could reach internal systems.

    ``resolver`` maps a host name to its IP addresses (default: the system resolver);
    ``is_allowed_address`` is the address policy applied to every answer of every hop (default:
    public addresses only; cloud metadata addresses are refused whatever the policy). Raises
    RejectedURL for non-http(s) schemes, credentials in the URL, ports outside
    ``allowed_ports``, refused addresses, HTTP errors, too many redirects, bodies over
    ``max_bytes``, a total time over ``timeout_s`` and content types other than HTML, plain
    text, Markdown, PDF and DOCX.

    Time limit: the deadline is checked between network reads, and each read waits at most the
    time left when the hop started; DNS resolution is not covered (the system resolver has no
    timeout parameter) and is bounded by the resolver's own configuration.
    """
    import httpx

    resolve = resolver or default_resolver
    deadline = time.monotonic() + timeout_s
    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise RejectedURL(url, "malformed URL") from None
    try:
        with httpx.Client(trust_env=False, follow_redirects=False, headers=_HEADERS) as client:
            for hop in range(max_redirects + 1):
                address = _hop_address(
                    current, url, hop, allowed_ports, resolve, is_allowed_address
                )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _timed_out(url)
                request = _pinned_request(client, current, address, remaining)
                response = client.send(request, stream=True)
                try:
                    redirect = _redirect_target(response, current, url)
                    if redirect is None:
                        return _fetched_document(response, current, url, max_bytes, deadline)
                    current = redirect
                finally:
                    response.close()
    except httpx.TimeoutException:
        raise _timed_out(url) from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise RejectedURL(url, f"could not be fetched ({type(exc).__name__})") from None
    raise RejectedURL(url, f"more than {max_redirects} redirects, not fetched")


_HEADERS = {
    "User-Agent": "Chatitego document fetcher",
    "Accept": ", ".join(_ACCEPTED_CONTENT_TYPES),
    # Asking for an uncompressed body keeps a gzip bomb from expanding in one read.
    "Accept-Encoding": "identity",
}


def _hop_address(
    current: httpx.URL,
    original: str,
    hop: int,
    allowed_ports: Collection[int],
    resolve: Callable[[str], list[str]],
    is_allowed_address: Callable[[IPAddress], bool],
) -> IPAddress:
    """The checked address this hop connects to; a refused redirect says where it led."""
    try:
        check_url(current, original, allowed_ports)
        return pinned_address(current, original, resolve, is_allowed_address)
    except RejectedURL as exc:
        if hop == 0:
            raise
        shown = display_url(str(current))
        raise RejectedURL(original, f"redirect to {shown} refused: {exc.reason}") from None


def _pinned_request(
    client: httpx.Client, current: httpx.URL, address: IPAddress, timeout_s: float
) -> httpx.Request:
    """A GET to the checked address; the host name still drives the Host header, TLS SNI and
    certificate verification ("sni_hostname" is an httpcore request extension)."""
    import httpx

    host = current.raw_host.decode("ascii")
    # httpx reports default ports as None, so a port here is an explicit one.
    host_header = f"[{host}]" if ":" in host else host
    if current.port is not None:
        host_header += f":{current.port}"
    return client.build_request(
        "GET",
        current.copy_with(host=str(address), fragment=None),
        headers={"Host": host_header},
        extensions={"sni_hostname": host},
        timeout=httpx.Timeout(timeout_s),
    )


def _redirect_target(
    response: httpx.Response, current: httpx.URL, original: str
) -> httpx.URL | None:
    """Where a redirect leads, or ``None`` when the response is not a redirect."""
    import httpx

    if not response.is_redirect:
        return None
    try:
        return current.join(response.headers["location"]).copy_with(fragment=None)
    except (httpx.InvalidURL, ValueError):
        raise RejectedURL(original, "malformed redirect location") from None


def _fetched_document(
    response: httpx.Response, current: httpx.URL, original: str, max_bytes: int, deadline: float
) -> FetchedDocument:
    """The document of a final (non-redirect) response, when its status and type are accepted."""
    if not response.is_success:
        raise RejectedURL(original, f"the server answered HTTP {response.status_code}, not fetched")
    content_type = _media_type(response.headers.get("content-type"))
    if content_type not in _ACCEPTED_CONTENT_TYPES:
        raise RejectedURL(
            original,
            f"unsupported content type '{content_type or 'none'}', not fetched "
            "(web pages, text, Markdown, PDF and DOCX only)",
        )
    body = _read_body(response, original, max_bytes, deadline)
    return FetchedDocument(
        final_url=str(current),
        content_type=content_type,
        body=body,
        suggested_name=_suggest_name(
            current, content_type, response.headers.get("content-disposition")
        ),
    )
