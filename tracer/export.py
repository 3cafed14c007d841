"""Export a conversation: a summary first, then the turns; as Markdown and as PDF.

Like the peer "Agent V2" (summary → Markdown → PDF) but without a model call:
the summary is extractive (each question with the first sentence of its
answer, the documents cited, the turns that did not end with an answer), so
an export is instant and works offline with the local model busy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from engine.prompts import STOP_REASON_TEXT
from engine.types import StopReason
from tracer.conversation import ChatEntry

_FONT_DIRS = (Path("/usr/share/fonts/truetype/dejavu"), Path("/usr/share/fonts/dejavu"))
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_LABELS = {
    "fr": {
        "title": "Conversation Chatitego",
        "exported": "Exportée le {when} · thème « {theme} » · {n} question(s)",
        "summary": "Résumé",
        "questions": "Questions et réponses en bref",
        "cited": "Documents cités",
        "unfinished": "Tours sans réponse complète",
        "none": "aucun",
        "turns": "Conversation",
        "you": "Vous",
        "bot": "Chatitego",
        "sources": "Sources",
        "page": "p.",
    },
    "en": {
        "title": "Chatitego conversation",
        "exported": "Exported on {when} · theme “{theme}” · {n} question(s)",
        "summary": "Summary",
        "questions": "Questions and answers in short",
        "cited": "Documents cited",
        "unfinished": "Turns without a complete answer",
        "none": "none",
        "turns": "Conversation",
        "you": "You",
        "bot": "Chatitego",
        "sources": "Sources",
        "page": "p.",
    },
}


@dataclass
class Summary:
    """The export's first section."""

    pairs: list[tuple[str, str]] = field(default_factory=list)  # question, answer in short
    cited: list[str] = field(default_factory=list)  # "file (p. 2, 3)"
    unfinished: list[str] = field(default_factory=list)  # "question — reason"


def _labels(language: str) -> dict[str, str]:
    return _LABELS["en" if language == "en" else "fr"]


def first_sentence(text: str, limit: int = 220) -> str:
    """The answer in short: its first sentence, at most ``limit`` characters."""
    flat = " ".join(text.split())
    sentence = _SENTENCE_END.split(flat, maxsplit=1)[0] if flat else ""
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def summarize(entries: Sequence[ChatEntry], language: str = "fr") -> Summary:
    """Extract the summary from the conversation."""
    summary = Summary()
    pages: dict[str, set[int]] = {}
    question = ""
    for e in entries:
        if e.role == "user":
            question = e.content
            continue
        summary.pairs.append((first_sentence(question), first_sentence(e.content)))
        for s in e.sources:
            pages.setdefault(s.file, set())
            if s.page is not None:
                pages[s.file].add(s.page)
        stop = e.stop
        if stop not in (None, StopReason.ANSWERED, StopReason.WAITING_FOR_USER):
            reason = STOP_REASON_TEXT["en" if language == "en" else "fr"].get(
                stop.value if stop else "", ""
            )
            summary.unfinished.append(f"{first_sentence(question)} — {reason}")
    p = _labels(language)["page"]
    for file, numbers in pages.items():
        listed = ", ".join(str(n) for n in sorted(numbers))
        summary.cited.append(f"{file} ({p} {listed})" if listed else file)
    return summary


def _source_line(entry: ChatEntry, language: str) -> str:
    p = _labels(language)["page"]
    parts = []
    for s in entry.sources:
        where = f" {p} {s.page}" if s.page is not None else ""
        parts.append(f"{s.file}{where} ({s.score:.2f})")
    return "; ".join(parts)


def conversation_markdown(
    entries: Sequence[ChatEntry],
    *,
    theme: str,
    language: str = "fr",
    now: datetime | None = None,
) -> str:
    """The conversation as a Markdown document, summary first."""
    t = _labels(language)
    summary = summarize(entries, language)
    when = (now or datetime.now()).strftime("%Y-%m-%d %H:%M")
    lines = [
        f"# {t['title']}",
        "",
        f"_{t['exported'].format(when=when, theme=theme, n=len(summary.pairs))}_",
        "",
        f"## {t['summary']}",
        "",
        f"**{t['questions']}**",
        "",
    ]
    lines += [f"{i}. {q} → {a}" for i, (q, a) in enumerate(summary.pairs, start=1)] or [
        f"- {t['none']}"
    ]
    lines += ["", f"**{t['cited']}** : " + (", ".join(summary.cited) or t["none"]), ""]
    if summary.unfinished:
        lines += [f"**{t['unfinished']}**", ""] + [f"- {u}" for u in summary.unfinished] + [""]
    lines += [f"## {t['turns']}", ""]
    for e in entries:
        who = t["you"] if e.role == "user" else t["bot"]
        lines += [f"### {who}", "", e.content.strip(), ""]
        if e.role == "assistant" and e.sources:
            lines += [f"_{t['sources']} : {_source_line(e, language)}_", ""]
    return "\n".join(lines).rstrip() + "\n"


def _font_file(name: str) -> Path | None:
    for directory in _FONT_DIRS:
        if (directory / name).is_file():
            return directory / name
    return None


def conversation_pdf(
    entries: Sequence[ChatEntry],
    *,
    theme: str,
    language: str = "fr",
    now: datetime | None = None,
) -> bytes:
    """The same document as a PDF (DejaVu Sans where installed, for any alphabet)."""
    from fpdf import FPDF

    t = _labels(language)
    summary = summarize(entries, language)
    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=True, margin=15)
    pdf.set_title(t["title"])
    regular, bold = _font_file("DejaVuSans.ttf"), _font_file("DejaVuSans-Bold.ttf")
    if regular and bold:
        pdf.add_font("body", "", str(regular))
        pdf.add_font("body", "B", str(bold))
        family = "body"

        def fit(text: str) -> str:
            return text
    else:  # core fonts are Latin-1 only: keep what they can print
        family = "helvetica"

        def fit(text: str) -> str:
            return text.encode("latin-1", "replace").decode("latin-1")

    pdf.add_page()

    def write(text: str, size: float = 10.5, style: str = "", gap: float = 1.5) -> None:
        pdf.set_font(family, style, size)
        pdf.multi_cell(0, size * 0.5, fit(text), new_x="LMARGIN", new_y="NEXT")
        pdf.ln(gap)

    when = (now or datetime.now()).strftime("%Y-%m-%d %H:%M")
    write(t["title"], 18, "B", 2)
    write(t["exported"].format(when=when, theme=theme, n=len(summary.pairs)), 9, "", 4)
    write(t["summary"], 14, "B")
    write(t["questions"], 11, "B")
    for i, (q, a) in enumerate(summary.pairs, start=1):
        write(f"{i}. {q} → {a}")
    if not summary.pairs:
        write(t["none"])
    write(f"{t['cited']} : " + (", ".join(summary.cited) or t["none"]), gap=3)
    if summary.unfinished:
        write(t["unfinished"], 11, "B")
        for u in summary.unfinished:
            write(f"• {u}")
    pdf.ln(3)
    write(t["turns"], 14, "B")
    for e in entries:
        write(t["you"] if e.role == "user" else t["bot"], 11, "B", 0.5)
        write(e.content.strip() or "—", gap=1)
        if e.role == "assistant" and e.sources:
            write(f"{t['sources']} : {_source_line(e, language)}", 8.5, "", 1)
        pdf.ln(2)
    return bytes(pdf.output())
