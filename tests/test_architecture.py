"""ARCHITECTURE.md stays true: every module of the layered packages has its line there, and
every path it names exists (a moved module fails here until the map follows it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERED = ("config", "models", "themes", "engine", "tracer", "manager")


def _modules() -> set[str]:
    return {
        p.relative_to(ROOT).as_posix()
        for package in LAYERED
        for p in (ROOT / package).rglob("*.py")
        if "__pycache__" not in p.parts and p.name != "__init__.py"
    }


def _named_paths(text: str) -> set[str]:
    return set(re.findall(r"`([\w/.-]+\.py)`", text))


def test_every_module_is_on_the_map() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert sorted(_modules() - _named_paths(text)) == []


def test_every_path_on_the_map_exists() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert sorted(p for p in _named_paths(text) if not (ROOT / p).is_file()) == []
