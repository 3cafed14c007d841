"""The theme's MCP servers as the RAG Manager edits them, and the connection test.

One server per line: ``name | command or URL | allowed tools | TOKEN_VARIABLE``
(the last two optional; tools comma-separated). The fourth field is the *name*
of the environment variable that holds the bearer token, never the token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from engine.tools.mcp_client import McpFailure, McpUnavailable, ServerTool, list_server_tools
from engine.tools.mcp_client import run_sync as _run_sync
from manager.operations import SettingsInvalid
from themes.mcp_config import McpServerConfig


def format_servers(servers: Sequence[McpServerConfig]) -> str:
    """The text-area form of ``servers`` (what ``parse_servers`` reads back)."""
    lines = []
    for server in servers:
        fields = [server.name, server.target, ", ".join(server.allowed_tools), server.token_env]
        while fields and not fields[-1]:
            fields.pop()
        lines.append(" | ".join(fields))
    return "\n".join(lines)


def parse_servers(text: str) -> list[dict[str, Any]]:
    """The servers typed in the text area; ``SettingsInvalid`` names the line at fault."""
    servers: list[dict[str, Any]] = []
    names: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 2 or len(parts) > 4 or not parts[0] or not parts[1]:
            raise SettingsInvalid(
                f"MCP server line {number}: write 'name | command or URL | tools | TOKEN_VARIABLE'"
            )
        name, target, *rest = parts
        tools = [t.strip() for t in (rest[0] if rest else "").split(",") if t.strip()]
        token_env = rest[1] if len(rest) > 1 else ""
        kind = "url" if target.startswith(("http://", "https://")) else "command"
        entry = {"name": name, kind: target, "allowed_tools": tools, "token_env": token_env}
        try:
            McpServerConfig.model_validate(entry)
        except ValidationError as exc:
            problems = "; ".join(str(e["msg"]) for e in exc.errors())
            raise SettingsInvalid(f"MCP server line {number}: {problems}") from None
        if name in names:
            raise SettingsInvalid(f"MCP server line {number}: the name {name!r} is used twice")
        names.add(name)
        servers.append(entry)
    return servers


@dataclass(frozen=True)
class ConnectionReport:
    """What the connection test found: the tools, or why it could not connect."""

    server: str
    tools: list[ServerTool] = field(default_factory=list)
    failure: McpFailure | None = None
    detail: str = ""


def check_connection(server: McpServerConfig) -> ConnectionReport:
    """Connect to ``server`` and list every tool it offers (a failure is a report)."""
    try:
        tools = _run_sync(lambda: list_server_tools(server))
    except McpUnavailable as exc:
        return ConnectionReport(server.name, failure=exc.kind, detail=exc.detail)
    return ConnectionReport(server.name, tools=tools)
