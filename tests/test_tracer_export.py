"""Conversation export: summary first, then the turns; Markdown and a readable PDF."""

from __future__ import annotations

import io
from datetime import datetime

from pypdf import PdfReader

from engine.types import StopReason
from tracer.conversation import ChatEntry, SourceRef
from tracer.export import conversation_markdown, conversation_pdf, first_sentence, summarize

WHEN = datetime(2026, 12, 2, 10, 30)
ENTRIES = [
    ChatEntry(role="user", content="Combien de jours de congés ?"),
    ChatEntry(
        role="assistant",
        content="Vingt-cinq jours par an. Ils se posent dans l'outil RH.",
        stop_reason="answered",
        sources=[
            SourceRef(file="rh.pdf", page=4, score=0.81),
            SourceRef(file="rh.pdf", page=2, score=0.5),
        ],
    ),
    ChatEntry(role="user", content="Et le télétravail ?"),
    ChatEntry(
        role="assistant", content="Je n'ai pas conclu.", stop_reason=StopReason.MAX_STEPS.value
    ),
]


def test_the_summary_lists_questions_documents_and_unfinished_turns() -> None:
    summary = summarize(ENTRIES)
    assert summary.pairs == [
        ("Combien de jours de congés ?", "Vingt-cinq jours par an."),
        ("Et le télétravail ?", "Je n'ai pas conclu."),
    ]
    assert summary.cited == ["rh.pdf (p. 2, 4)"]
    assert summary.unfinished == ["Et le télétravail ? — nombre maximal d'étapes atteint"]


def test_markdown_has_the_summary_before_the_turns() -> None:
    md = conversation_markdown(ENTRIES, theme="rh", now=WHEN)
    assert md.startswith("# Conversation Chatitego\n")
    assert "2026-12-02 10:30" in md and "« rh »" in md and "2 question(s)" in md
    assert md.index("## Résumé") < md.index("## Conversation") < md.index("### Vous")
    assert "_Sources : rh.pdf p. 4 (0.81); rh.pdf p. 2 (0.50)_" in md


def test_english_export() -> None:
    md = conversation_markdown(ENTRIES, theme="rh", language="en", now=WHEN)
    assert "## Summary" in md and "### You" in md and "maximum number of steps" in md


def test_the_pdf_holds_the_same_text_accents_included() -> None:
    data = conversation_pdf(ENTRIES, theme="rh", now=WHEN)
    assert data.startswith(b"%PDF")
    text = "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)
    flat = " ".join(text.split())
    for expected in ("Résumé", "Combien de jours de congés ?", "télétravail", "rh.pdf (p. 2, 4)"):
        assert expected in flat


def test_an_empty_conversation_still_exports() -> None:
    assert "aucun" in conversation_markdown([], theme="rh", now=WHEN)
    assert conversation_pdf([], theme="rh", now=WHEN).startswith(b"%PDF")


def test_first_sentence_is_bounded() -> None:
    assert first_sentence("Un. Deux.") == "Un."
    assert len(first_sentence("x" * 500, limit=50)) == 50
