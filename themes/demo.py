"""The demo theme: Chatitego's own user guide (French and English), created on first run.

So that a newcomer who runs the README's command has something to ask about.
The guide's text is written by the team and ships in ``themes/demo/``. The
theme also reads live data from ``demo_mcp.atelier``, a simulated workshop
served over MCP (« Quelle est la température de la presse 2 ? »).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from themes.mcp_config import McpServerConfig
from themes.theme import Theme, ThemeRepository

DEMO_THEME = "demo"
DEMO_SOURCES = Path(__file__).parent / "demo"
DEMO_PROMPT = (
    "Tu es l'assistant de Chatitego. Tu réponds aux questions sur l'utilisation de "
    "Chatitego en t'appuyant sur son guide (outil search_documents) et tu cites tes sources. "
    "L'état en direct des machines de l'atelier de démonstration vient de l'outil etat_machine."
)
# "python" is this installation's interpreter when the engine starts the server.
DEMO_MCP_SERVER = McpServerConfig(
    name="atelier",
    command="python -m demo_mcp.atelier",
    allowed_tools=("etat_machine", "etat_atelier"),
)


def ensure_demo_theme(data_dir: Path | str, embed_model: Any) -> Theme:
    """Create and index the demo theme if it does not exist yet; return it."""
    from themes.ingest import ingest_files

    repository = ThemeRepository(data_dir)
    if repository.exists(DEMO_THEME):
        theme = repository.get(DEMO_THEME)
        if theme.load_data().vectors.count() > 0:
            return theme
    else:
        theme = repository.create(
            DEMO_THEME,
            title="Guide de Chatitego",
            description="Le guide de l'utilisateur de Chatitego, en français et en anglais.",
            language="fr",
            system_prompt=DEMO_PROMPT,
        )
        theme.settings.mcp_servers = [DEMO_MCP_SERVER]
        theme.save_settings()
    ingest_files(theme, sorted(DEMO_SOURCES.glob("*.md")), embed_model)
    return theme
