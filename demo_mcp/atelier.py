"""« atelier »: a workshop simulator served over MCP (stdio), for the demo theme.

Machines (presses, an oven, a compressor, a conveyor) with a state, a
temperature and a production counter. Values are computed, not stored: the
same seed (``ATELIER_SEED``, default 42), machine and time (rounded to five
minutes) always give the same readings, so answers and tests are reproducible.

Run: ``python -m demo_mcp.atelier`` (the chat engine starts it by itself).
"""

from __future__ import annotations

import argparse
import hmac
import os
import random
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

SEED_ENV = "ATELIER_SEED"
_BUCKET_MINUTES = 5
_NOW_WORDS = {"", "now", "maintenant", "aujourd'hui", "today", "current", "actuel"}
_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


@dataclass(frozen=True)
class Machine:
    key: str
    label: str
    idle_c: float  # temperature when stopped
    working_c: float  # temperature in production
    parts_per_hour: int


MACHINES: tuple[Machine, ...] = (
    Machine("presse-1", "presse 1", 22.0, 68.0, 240),
    Machine("presse-2", "presse 2", 22.0, 74.0, 180),
    Machine("four", "four", 25.0, 215.0, 60),
    Machine("compresseur", "compresseur", 20.0, 55.0, 0),
    Machine("convoyeur", "convoyeur", 20.0, 31.0, 420),
)
STATES = ("en marche", "en marche", "en marche", "à l'arrêt", "en maintenance")


def machine_key(name: str) -> str:
    """« Presse 2 », « presse-2 », « presse2 » → ``presse-2``."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    plain = re.sub(r"^(la|le|l')\s*", "", plain.strip())
    plain = re.sub(r"[\s_]+", "-", plain)
    return re.sub(r"([a-z])-?(\d)", r"\1-\2", plain)


def parse_moment(moment: str) -> datetime:
    """An ISO date or date-time (``2026-03-02``, ``2026-03-02T14:30``); empty or "now": now."""
    # Seen with the embedded 1.5B model: it passes "now" for a question about the present.
    if moment.strip().lower() in _NOW_WORDS:
        return datetime.now().replace(microsecond=0)
    try:
        return datetime.fromisoformat(moment.strip())
    except ValueError as exc:
        raise ToolError(
            f"date/heure illisible : {moment!r}. Laisser vide pour maintenant, ou AAAA-MM-JJTHH:MM"
        ) from exc


def reading(machine: Machine, when: datetime, seed: int) -> dict[str, object]:
    """The machine's state at ``when``, the same for the same seed and five minutes."""
    bucket = int(when.timestamp()) // (_BUCKET_MINUTES * 60)
    rng = random.Random(f"{seed}:{machine.key}:{bucket}")
    state = rng.choice(STATES)
    base = machine.working_c if state == "en marche" else machine.idle_c
    temperature = round(base + rng.uniform(-3.0, 3.0), 1)
    start_of_day = when.replace(hour=6, minute=0, second=0, microsecond=0)
    hours = max(0.0, (when - start_of_day).total_seconds() / 3600)
    produced = int(min(hours, 14.0) * machine.parts_per_hour * rng.uniform(0.8, 0.95))
    return {
        "machine": machine.label,
        "moment": when.isoformat(timespec="minutes"),
        "etat": state,
        "temperature_c": temperature,
        "pieces_produites_depuis_6h": produced,
    }


def _seed() -> int:
    try:
        return int(os.environ.get(SEED_ENV, "42"))
    except ValueError:
        return 42


def _find(name: str) -> Machine:
    key = machine_key(name)
    for machine in MACHINES:
        if machine.key == key:
            return machine
    known = ", ".join(m.label for m in MACHINES)
    raise ToolError(f"machine inconnue : {name!r}. Machines : {known}")


def _line(values: dict[str, object]) -> str:
    return (
        f"{values['machine']} ({values['moment']}) : {values['etat']}, "
        f"{values['temperature_c']} °C, {values['pieces_produites_depuis_6h']} pièces depuis 6 h"
    )


# Errors are raised as ToolError: their message (which machine exists, which date format)
# reaches the model, which can then correct its call.
server = MCPServer(
    "atelier",
    instructions="Simulateur d'atelier : machines, états, températures.",
    log_level="ERROR",
)


@server.tool(annotations=_READ_ONLY)
def etat_machine(machine: str, moment: str = "") -> str:
    """Température, état et production d'une machine de l'atelier (presse 1, presse 2, four...)."""
    return _line(reading(_find(machine), parse_moment(moment), _seed()))


@server.tool(annotations=_READ_ONLY)
def etat_atelier(moment: str = "") -> str:
    """État et température de toutes les machines de l'atelier."""
    when = parse_moment(moment)
    return "\n".join(_line(reading(m, when, _seed())) for m in MACHINES)


TOKEN_ENV = "ATELIER_TOKEN"  # set: the HTTP server wants "Authorization: Bearer <it>"


def _bearer_only(app: Any, token: str) -> Any:
    """``app`` behind a bearer-token check: 401 for an HTTP request without the token."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            sent = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(sent, f"Bearer {token}"):
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def main(argv: list[str] | None = None) -> None:
    """Over stdio (how the demo theme starts it), or ``--http PORT``: streamable HTTP on
    loopback, as a company's server would be reached (with ``ATELIER_TOKEN`` set, only with
    that bearer token)."""
    parser = argparse.ArgumentParser(prog="python -m demo_mcp.atelier")
    parser.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP on 127.0.0.1")
    args = parser.parse_args(argv)
    if args.http is None:
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app()
    token = os.environ.get(TOKEN_ENV, "")
    uvicorn.run(_bearer_only(app, token) if token else app, host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
