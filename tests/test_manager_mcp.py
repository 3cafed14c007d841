"""The RAG Manager's MCP servers: the one-line-per-server field and "Tester la connexion"."""
# ruff: noqa: F811 - the page tests' fixtures (admin, repo) are imported, then requested

from __future__ import annotations

import pytest

from manager.mcp_servers import format_servers, parse_servers
from manager.operations import SettingsInvalid
from tests.test_manager_page import (  # noqa: F401 - fixtures
    _fresh_page_state,
    admin,
    labelled,
    logged_in,
    minilm,
    open_page,
    repo,
    texts_of,
)
from themes.mcp_config import McpServerConfig
from themes.theme import ThemeRepository
from tracer.render import escape_markdown

FIELD = "Serveurs MCP (un par ligne)"
DEMO_LINE = "atelier | python -m demo_mcp.atelier | etat_machine"


def test_lines_round_trip() -> None:
    text = (
        "atelier | python -m demo_mcp.atelier | etat_machine, etat_atelier\n\n"
        "usine | https://mcp.example.com/mcp | lire_stock | USINE_TOKEN"
    )
    servers = [McpServerConfig.model_validate(s) for s in parse_servers(text)]
    assert servers[0].command == "python -m demo_mcp.atelier"
    assert servers[0].allowed_tools == ("etat_machine", "etat_atelier")
    assert servers[1].url == "https://mcp.example.com/mcp" and servers[1].token_env == "USINE_TOKEN"
    assert format_servers(servers) == text.replace("\n\n", "\n")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("atelier", "line 1"),
        ("a | b\na | c", "used twice"),
        ("usine | https://x/mcp | t | sk-live-123456", "environment variable name"),
        ("Bad Name | cmd", "lowercase"),
    ],
)
def test_bad_lines_are_refused_with_their_number(text: str, says: str) -> None:
    with pytest.raises(SettingsInvalid, match=says):
        parse_servers(text)


def test_servers_typed_in_the_settings_are_saved(admin: None, repo: ThemeRepository) -> None:
    repo.create("atelier")
    at = open_page(logged_in(), "settings")
    labelled(at.main.text_area, FIELD).input(DEMO_LINE + " | ATELIER_TOKEN")
    labelled(at.main.button, "Enregistrer").click()
    at.run()
    assert not at.exception
    (server,) = repo.get("atelier").settings.mcp_servers
    assert server.allowed_tools == ("etat_machine",) and server.token_env == "ATELIER_TOKEN"


def test_a_token_typed_in_place_of_its_variable_is_not_saved(
    admin: None, repo: ThemeRepository
) -> None:
    repo.create("atelier")
    at = open_page(logged_in(), "settings")
    labelled(at.main.text_area, FIELD).input(DEMO_LINE + " | Bearer abc.def-123")
    labelled(at.main.button, "Enregistrer").click()
    at.run()
    assert not at.exception
    assert repo.get("atelier").settings.mcp_servers == []
    assert "environment variable name" in at.error[0].value
    assert "abc" not in texts_of(at)  # the pasted token is not echoed on the page


def test_the_connection_test_lists_the_demo_servers_tools(
    admin: None, repo: ThemeRepository
) -> None:
    theme = repo.create("atelier")
    theme.settings.mcp_servers = [McpServerConfig.model_validate(parse_servers(DEMO_LINE)[0])]
    theme.save_settings()
    at = open_page(logged_in(), "settings")
    labelled(at.main.button, "Tester la connexion").click()
    at.run()
    assert not at.exception
    assert "atelier répond : 2 outil(s)." in texts_of(at)
    listed = "\n".join(str(t.value) for t in at.text)
    assert "etat_machine — autorisé" in listed
    assert "etat_atelier — non autorisé" in listed
    assert any("Température, état et production" in c.value for c in at.caption)


def test_the_connection_test_says_why_it_cannot_connect(admin: None, repo: ThemeRepository) -> None:
    theme = repo.create("atelier")
    theme.settings.mcp_servers = [
        McpServerConfig(name="absent", command="no-such-mcp-server", allowed_tools=("x",))
    ]
    theme.save_settings()
    at = open_page(logged_in(), "settings")
    labelled(at.main.button, "Tester la connexion").click()
    at.run()
    assert not at.exception
    said = at.error[0].value
    assert said.startswith("Connexion impossible à absent : la commande")
    assert "introuvable" in said and escape_markdown("no-such-mcp-server") in said
