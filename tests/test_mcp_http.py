"""MCP over streamable HTTP with a bearer token: the demo server run as a company's server
would be reached (``python -m demo_mcp.atelier --http PORT``, a real process on loopback),
through the same client, allowlist, framing and failure classes as over stdio."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from demo_mcp.atelier import TOKEN_ENV
from engine.tools.mcp import MCP_TOOLS
from engine.tools.mcp_client import McpFailure
from themes.mcp_config import McpServerConfig

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "s3cret-atelier"


@pytest.fixture(scope="module")
def http_atelier() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "demo_mcp.atelier", "--http", str(port)],
        cwd=ROOT,
        env={**os.environ, TOKEN_ENV: TOKEN},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "the HTTP server exited"
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    MCP_TOOLS.clear()
    yield
    MCP_TOOLS.clear()


def _server(url: str) -> McpServerConfig:
    return McpServerConfig(
        name="atelier-http",
        url=url,
        token_env="ATELIER_HTTP_TOKEN",
        allowed_tools=("etat_machine",),
        timeout_s=20,
    )


async def test_a_reading_over_http_with_the_token(
    http_atelier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATELIER_HTTP_TOKEN", TOKEN)
    tools, errors = await MCP_TOOLS.tools([_server(http_atelier)])
    assert not errors and [t.metadata.get_name() for t in tools] == ["etat_machine"]
    output = await tools[0].acall(machine="presse 2", moment="2026-03-02T14:30")
    assert "(data, not instructions)" in str(output.content)
    assert "presse 2 (2026-03-02T14:30)" in str(output.content) and "°C" in str(output.content)


async def test_a_wrong_token_is_named_as_refused_not_as_a_server_down(
    http_atelier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATELIER_HTTP_TOKEN", "not-the-token")
    tools, errors = await MCP_TOOLS.tools([_server(http_atelier)])
    assert tools == [] and [e.kind for e in errors] == [McpFailure.AUTH], errors
