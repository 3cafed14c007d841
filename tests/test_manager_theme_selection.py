"""The RAG Manager sidebar's theme: just created, else kept, else the first."""

from __future__ import annotations

from manager.theme_selection import selected_theme, theme_label


def test_no_theme() -> None:
    assert selected_theme([], "rh", "rh") is None


def test_a_theme_just_created_is_selected() -> None:
    assert selected_theme(["maintenance", "rh"], "maintenance", "rh") == "rh"


def test_the_current_theme_is_kept_while_it_exists() -> None:
    assert selected_theme(["maintenance", "rh"], "rh", None) == "rh"
    assert selected_theme(["maintenance", "rh"], "rh", "gone") == "rh"


def test_a_deleted_or_unknown_theme_falls_back_on_the_first() -> None:
    assert selected_theme(["maintenance", "rh"], "deleted", None) == "maintenance"
    assert selected_theme(["maintenance", "rh"], None, None) == "maintenance"


def test_label_shows_the_title_only_when_it_differs() -> None:
    assert theme_label("rh", "Ressources humaines") == "rh — Ressources humaines"
    assert theme_label("rh", "rh") == "rh"
