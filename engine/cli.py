"""``python -m engine chat``: a terminal chat over the engine, for ops and quick trials."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from config.settings import AppConfig
from engine.engine import ReActEngine
from engine.markers import PartialLine, classify_partial_line, match_marker
from engine.theme_context import DETAIL_LEVELS
from engine.types import ReActType, StopReason
from models.llms import LLMConfigurationError

_DIM = "\033[2m"
_BOLD = "\033[1m"
_RESET = "\033[0m"
_LABELS = {
    ReActType.THOUGHT: "Thought",
    ReActType.ACTION: "Action",
    ReActType.ACTION_INPUT: "Action Input",
    ReActType.OBSERVATION: "Observation",
}


class TerminalRenderer:
    """Print a raw ReAct stream as it arrives: reasoning dimmed, the answer plain.

    Line-based: a line's type is known from its start (a marker) or is the
    type of the line before; a line start that may still become a marker is
    held until it is decided, so nothing printed ever needs to be taken back.
    """

    def __init__(self, out: TextIO, *, show_all: bool, color: bool) -> None:
        self.out = out
        self.show_all = show_all
        self.color = color
        self._kind: ReActType | None = None  # type of the line being printed
        self._held = ""  # undecided start of the current line
        self._line_open = False  # current line's start decided and printed
        self._trim_next = False

    def feed(self, delta: str) -> None:
        text, self._held = self._held + delta, ""
        while text:
            if self._line_open:
                chunk, newline, text = text.partition("\n")
                self._print(chunk + newline)
                self._line_open = not newline
                continue
            line, newline, rest = text.partition("\n")
            if not newline and classify_partial_line(line) is PartialLine.MAYBE:
                self._held = line
                return
            self._start_line(line)
            self._print(newline)
            self._line_open = not newline
            text = rest

    def close(self) -> None:
        if self._held:
            self._start_line(self._held)
            self._held = ""
        if self._visible():
            self.out.write("\n")
        self.out.flush()

    def _start_line(self, line: str) -> None:
        self._trim_next = False
        marker = match_marker(line)
        if marker is None:
            self._print(line)
            return
        self._kind = marker[0]
        rest = _raw_rest(line)
        label = (
            ("» " if self.show_all else "")
            if self._kind.is_closing
            else (f"{_LABELS.get(self._kind, self._kind.value)}: ")
        )
        self._print(label + rest)
        # "Thought:" arrived alone: the rest of the line brings its own leading space.
        self._trim_next = not rest

    def _visible(self) -> bool:
        kind = self._kind or ReActType.ANSWER  # text before any marker may be the answer
        return self.show_all or kind.is_closing

    def _print(self, text: str) -> None:
        if self._trim_next:
            text = text.lstrip(" ")
            self._trim_next = not text
        if not text or not self._visible():
            return
        kind = self._kind or ReActType.ANSWER
        if self.color and not kind.is_closing:
            text = f"{_DIM}{text}{_RESET}"
        self.out.write(text)
        self.out.flush()


_STOP_NOTICE = {
    StopReason.FORCED_FINAL: "(réponse forcée : le modèle n'a pas suivi le format)",
    StopReason.MAX_STEPS: "(nombre maximal d'étapes atteint)",
    StopReason.LLM_UNAVAILABLE: "(le modèle ne répond pas — réessayez ou changez de modèle)",
    StopReason.LLM_AUTH_FAILED: "(clé d'accès refusée — vérifiez MISTRAL_API_KEY)",
    StopReason.CONTEXT_OVERFLOW: "(trop long pour la fenêtre du modèle — question plus courte "
    "ou nouvelle conversation)",
    StopReason.MODEL_ERROR: "(le modèle n'a pas pu être chargé ou exécuté — voir le détail)",
    StopReason.WAITING_FOR_USER: "(répondez à la question pour continuer)",
    StopReason.INTERNAL_ERROR: "(erreur interne — voir les journaux)",
}


async def chat_loop(engine: ReActEngine, show_all: bool, inp: TextIO, out: TextIO) -> None:
    """Read questions line by line until EOF or 'exit'."""
    history: list[dict[str, str]] = []
    color = out.isatty()
    while True:
        out.write("\n> ")
        out.flush()
        line = inp.readline()
        if not line or line.strip().lower() in ("exit", "quit", ":q"):
            return
        prompt = line.strip()
        if not prompt:
            continue
        engine.set_history(history)
        renderer = TerminalRenderer(out, show_all=show_all, color=color)
        async for delta in engine.stream(prompt):
            renderer.feed(delta)
        renderer.close()
        outcome = engine.last_outcome
        assert outcome is not None
        notice = _STOP_NOTICE.get(outcome.stop_reason)
        if notice:
            out.write(f"{notice}\n")
        history.append({"role": "user", "content": prompt})
        reply: dict[str, str] = {"role": "assistant", "content": outcome.answer}
        if outcome.stop_reason is StopReason.WAITING_FOR_USER:
            reply["stop_reason"] = outcome.stop_reason.value
        history.append(reply)


def _raw_rest(line: str) -> str:
    """Text after a marker's colon, keeping trailing spaces (the next delta may continue it)."""
    cut = max(line.find(":"), line.find("："))
    rest = line[cut + 1 :] if cut >= 0 else ""
    return rest.lstrip(" *_")


def settings_table() -> str:
    """The README's settings table, generated from ``AppConfig``'s fields."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, info in AppConfig.model_fields.items():
        default = info.default
        shown = "" if default is None else str(default)
        env = "CHATITEGO_DATA_DIR" if name == "data_dir" else name.upper()
        rows.append(f"| `{env}` | `{shown}` | {info.description or ''} |")
    return "\n".join(rows)


_last_pct: dict[str, int] = {}


def _print_progress(stage: str, done: int, total: int) -> None:
    pct = 100 * done // total if total else 100
    if _last_pct.get(stage) == pct // 5 and done < total:
        return  # one line update per 5 %
    _last_pct[stage] = pct // 5
    label = {"assemble": "Assemblage du modèle local", "load": "Chargement du modèle local"}
    end = "\n" if done >= total else ""
    print(f"\r{label.get(stage, stage)} : {pct:3d} %", end=end, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    chat = sub.add_parser("chat", help="terminal chat with the configured model")
    chat.add_argument("--show", choices=("answer", "all"), default="all")
    chat.add_argument("--lang", choices=("fr", "en"), default="fr")
    chat.add_argument("--detail", choices=DETAIL_LEVELS, default="standard")
    chat.add_argument("--theme", default=None, help="theme name (RAG over its documents)")
    sub.add_parser("settings", help="print the settings table (Markdown)")
    args = parser.parse_args(argv)
    if args.command == "settings":
        print(settings_table())
        return 0
    engine = ReActEngine()
    engine.progress = _print_progress
    print("Chargement des modèles…", file=sys.stderr, flush=True)
    try:
        engine.start(theme=args.theme, language=args.lang, detail=args.detail)
        engine.warm_up()
    except LLMConfigurationError as exc:
        print(f"Impossible de démarrer : {exc}", file=sys.stderr)
        return 2
    print(f"Prêt ({engine.describe_llm()}). Posez votre question ; 'exit' pour quitter.")
    try:
        asyncio.run(chat_loop(engine, args.show == "all", sys.stdin, sys.stdout))
    except KeyboardInterrupt:
        return 130
    return 0
