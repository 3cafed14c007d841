"""A theme's MCP servers: where each one runs, how to authenticate, which tools to offer.

Only the *name* of the environment variable holding a bearer token is kept
in the theme's files; the token itself is read from the environment when
the engine connects, so it never lands on disk with the theme.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,79}$")
_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class McpServerConfig(BaseModel):
    """One MCP server of a theme: a stdio command or a streamable-HTTP URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    command: str = Field("", description="stdio: the command line that starts the server")
    url: str = Field("", description="streamable HTTP: the server's URL")
    token_env: str = Field("", description="name of the environment variable with the token")
    allowed_tools: tuple[str, ...] = Field((), description="the only tools offered to the chat")
    timeout_s: float = Field(10.0, gt=0, le=120, description="max time of one call (s)")

    @model_validator(mode="before")
    @classmethod
    def _from_plain_string(cls, value: Any) -> Any:
        # Themes saved before MCP support held one URL or command per entry.
        if isinstance(value, str):
            text = value.strip()
            name = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")[:40] or "server"
            if text.startswith(("http://", "https://")):
                return {"name": name, "url": text}
            return {"name": name, "command": text}
        return value

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _SERVER_NAME.match(value):
            raise ValueError(
                f"MCP server name {value!r}: lowercase letters, digits, '-' or '_', 40 at most"
            )
        return value

    @field_validator("token_env")
    @classmethod
    def _check_token_env(cls, value: str) -> str:
        if value and not _ENV_NAME.match(value):
            raise ValueError(
                # The value is not quoted: it may be the token itself, pasted here.
                "the token field takes an environment variable name: store the NAME of the "
                "variable that holds the token (e.g. ATELIER_TOKEN), never the token itself"
            )
        return value

    @field_validator("allowed_tools")
    @classmethod
    def _check_tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if not _TOOL_NAME.match(v)]
        if bad:
            raise ValueError(f"invalid tool names: {bad}")
        return tuple(dict.fromkeys(value))

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command.strip()) == bool(self.url.strip()):
            raise ValueError(f"MCP server {self.name!r}: give either a command or a URL")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server {self.name!r}: the URL must start with http(s)://")
        if self.command:
            shlex.split(self.command)  # an unbalanced quote fails here, not at connection
        return self

    @property
    def target(self) -> str:
        """The command line or the URL, as the admin wrote it."""
        return self.url or self.command
