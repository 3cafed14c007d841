"""Connecting to one MCP server through llama-index's ``BasicMCPClient`` (official SDK).

No protocol code of ours: this module only builds the client from a theme's
``McpServerConfig`` (stdio command or streamable-HTTP URL, bearer token read
from the environment) and turns what goes wrong into a typed
``McpUnavailable`` whose message says what to do.
"""

from __future__ import annotations

import asyncio
import math
import os
import shlex
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from engine.errors import EngineError
from themes.mcp_config import McpServerConfig

if TYPE_CHECKING:
    from llama_index.tools.mcp import BasicMCPClient

T = TypeVar("T")
DESCRIPTION_CHARS = 200


class McpFailure(str, Enum):
    MISSING_TOKEN = "missing_token"
    NOT_FOUND = "not_found"
    UNREACHABLE = "unreachable"
    AUTH = "auth"
    TIMEOUT = "timeout"
    ERROR = "error"


class McpUnavailable(EngineError):
    """The server could not be used; ``kind`` says why, the message what to do."""

    def __init__(self, server: str, kind: McpFailure, detail: str = "") -> None:
        self.server = server
        self.kind = kind
        self.detail = detail
        suffix = f" ({detail})" if detail else ""
        super().__init__(f"MCP server {server!r}: {_EXPLAIN[kind]}{suffix}")


_EXPLAIN = {
    McpFailure.MISSING_TOKEN: "its token variable is not set in the environment",
    McpFailure.NOT_FOUND: "its command was not found",
    McpFailure.UNREACHABLE: "cannot connect (is the server running?)",
    McpFailure.AUTH: "the server refused the token",
    McpFailure.TIMEOUT: "no answer in time",
    McpFailure.ERROR: "the connection failed",
}


# The same reasons in the words of the turn's note (engine-written, shown in the panel).
_EXPLAIN_TO_USER = {
    "fr": {
        McpFailure.MISSING_TOKEN: "son jeton n'est pas configuré",
        McpFailure.NOT_FOUND: "sa commande est introuvable",
        McpFailure.UNREACHABLE: "connexion impossible",
        McpFailure.AUTH: "le serveur a refusé le jeton",
        McpFailure.TIMEOUT: "pas de réponse à temps",
        McpFailure.ERROR: "la connexion a échoué",
    },
    "en": _EXPLAIN,
}
_UNAVAILABLE_NOTE = {
    "fr": "Le serveur de données en direct « {server} » est indisponible ({why}) : ses outils "
    "manquent à ce tour.",
    "en": "The live-data server '{server}' is unavailable ({why}): its tools are missing this "
    "turn.",
}


def unavailable_note(error: McpUnavailable, language: str) -> str:
    """The sentence a turn shows (and the model reads) for a server it could not use."""
    lang = language if language in _UNAVAILABLE_NOTE else "en"
    why = _EXPLAIN_TO_USER[lang][error.kind]
    return _UNAVAILABLE_NOTE[lang].format(server=error.server, why=why)


@dataclass(frozen=True)
class ServerTool:
    """A tool a server offers, as the admin sees it when testing the connection."""

    name: str
    description: str
    allowed: bool
    read_only: bool


def build_client(server: McpServerConfig, timeout_s: float | None = None) -> BasicMCPClient:
    """A client for ``server``; the token comes from the environment variable it names."""
    from llama_index.tools.mcp import BasicMCPClient  # the SDK only where MCP is used

    timeout = max(1, math.ceil(timeout_s or server.timeout_s))
    token = _token(server)
    if server.url:
        return BasicMCPClient(server.url, timeout=timeout, headers=_auth_headers(token))
    argv = shlex.split(server.command)
    # "python" means this installation's interpreter: the theme's files stay portable.
    program = sys.executable if argv[0] in ("python", "python3") else argv[0]
    env = {server.token_env: token} if token else None
    return BasicMCPClient(program, args=argv[1:], env=env, timeout=timeout)


def _token(server: McpServerConfig) -> str:
    if not server.token_env:
        return ""
    token = os.environ.get(server.token_env, "")
    if not token:
        raise McpUnavailable(server.name, McpFailure.MISSING_TOKEN, server.token_env)
    return token


def _auth_headers(token: str) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {token}"} if token else None


async def _http_status(server: McpServerConfig) -> int | None:
    """The status an HTTP server answers a bare request with (None: no answer).

    The SDK turns a 401 into a generic "Server returned an error response": asked once
    more, plainly, the server says whether it refused the token.
    """
    import httpx

    try:
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.post(
                server.url,
                headers=_auth_headers(_token(server)),
                json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
            )
        return response.status_code
    except (httpx.HTTPError, McpUnavailable):
        return None


async def bounded(server: McpServerConfig, call: Awaitable[T], timeout_s: float) -> T:
    """Await ``call`` within ``timeout_s``; any failure becomes ``McpUnavailable``.

    On timeout the call is cancelled but not waited for: stopping a stdio server
    that is busy may take seconds more, and the turn must not pay for it.
    """
    task = asyncio.ensure_future(call)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        task.cancel()
        _ABANDONED.add(task)
        task.add_done_callback(_ABANDONED.discard)
        raise McpUnavailable(server.name, McpFailure.TIMEOUT, f"{timeout_s:g} s")
    try:
        return task.result()
    except McpUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds; all become one type
        failure = classify_failure(server, exc)
        if failure.kind is McpFailure.ERROR and server.url:
            status = await _http_status(server)
            if status in (401, 403):
                failure = McpUnavailable(server.name, McpFailure.AUTH, f"HTTP {status}")
        raise failure from exc


# Calls cancelled on timeout, still closing their connection in the background.
_ABANDONED: set[asyncio.Future[Any]] = set()


def classify_failure(server: McpServerConfig, exc: BaseException) -> McpUnavailable:
    """The typed failure behind an SDK exception (often wrapped in exception groups)."""
    leaf = _first_leaf(exc)
    text = f"{type(leaf).__name__}: {leaf}"[:200]
    if isinstance(leaf, FileNotFoundError):
        return McpUnavailable(server.name, McpFailure.NOT_FOUND, server.command.split()[0])
    status = getattr(getattr(leaf, "response", None), "status_code", None)
    if status in (401, 403):
        return McpUnavailable(server.name, McpFailure.AUTH, f"HTTP {status}")
    if isinstance(leaf, (ConnectionError, OSError)) or "Connect" in type(leaf).__name__:
        return McpUnavailable(server.name, McpFailure.UNREACHABLE, text)
    return McpUnavailable(server.name, McpFailure.ERROR, text)


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def is_read_only(tool: Any) -> bool:
    """False when the server declares the tool writes or destroys (MCP annotations)."""
    hints = getattr(tool, "annotations", None)
    if hints is None:
        return True
    return hints.read_only_hint is not False and hints.destructive_hint is not True


def short_description(text: str | None, limit: int = DESCRIPTION_CHARS) -> str:
    """The first line of a server's description, bounded: it is untrusted text."""
    lines = [" ".join(ln.split()) for ln in (text or "").splitlines() if ln.strip()]
    first = "".join(ch for ch in (lines[0] if lines else "") if ch.isprintable())
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


async def list_server_tools(server: McpServerConfig) -> list[ServerTool]:
    """Every tool ``server`` offers (allowed or not), for the admin's connection test."""
    client = build_client(server)
    result = await bounded(server, client.list_tools(), server.timeout_s)
    allowed = set(server.allowed_tools)
    return [
        ServerTool(t.name, short_description(t.description), t.name in allowed, is_read_only(t))
        for t in result.tools
    ]


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine from synchronous code (a Streamlit page), in a private loop."""

    async def main() -> T:
        return await factory()

    return asyncio.run(main())
