"""``python -m engine chat``: a terminal chat over the engine, for ops and quick trials."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from engine.engine import ReActEngine
from engine.stream_parser import ReActStreamParser
from engine.types import ReActBlock, ReActType, StopReason

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
    """Print a raw ReAct stream: reasoning dimmed, the answer plain, as tokens arrive."""

    def __init__(self, out: TextIO, *, show_all: bool, color: bool) -> None:
        self.out = out
        self.show_all = show_all
        self.color = color
        self.parser = ReActStreamParser()
        self._printed = 0  # characters of the current block already printed
        self._started = False  # header of the current block printed

    def feed(self, delta: str) -> None:
        for block in self.parser.feed(delta):
            self._finish_block(block)
        current = self.parser.current
        if current is not None and current.type is not ReActType.UNKNOWN:
            self._print_progress(current)

    def close(self) -> None:
        for block in self.parser.flush():
            self._finish_block(block)

    def _visible(self, kind: ReActType) -> bool:
        return self.show_all or kind.is_closing

    def _print_progress(self, block: ReActBlock) -> None:
        if not self._visible(block.type):
            return
        if not self._started:
            self._header(block.type)
        new = block.content[self._printed :]
        if new:
            self._write(new, block.type)
            self._printed = len(block.content)

    def _finish_block(self, block: ReActBlock) -> None:
        if self._visible(block.type):
            if not self._started:
                self._header(block.type)
            self._write(block.content[self._printed :], block.type)
            self.out.write("\n")
        self._printed = 0
        self._started = False
        self.out.flush()

    def _header(self, kind: ReActType) -> None:
        self._started = True
        if not kind.is_closing:
            self._write(f"{_LABELS.get(kind, kind.value)}: ", kind)
        elif self.show_all:
            self.out.write(f"{_BOLD}» {_RESET}" if self.color else "» ")

    def _write(self, text: str, kind: ReActType) -> None:
        if self.color and not kind.is_closing:
            self.out.write(f"{_DIM}{text}{_RESET}")
        else:
            self.out.write(text)
        self.out.flush()


_STOP_NOTICE = {
    StopReason.FORCED_FINAL: "(réponse forcée : le modèle n'a pas suivi le format)",
    StopReason.MAX_STEPS: "(nombre maximal d'étapes atteint)",
    StopReason.LLM_UNAVAILABLE: "(le modèle ne répond pas — réessayez ou changez de modèle)",
    StopReason.LLM_AUTH_FAILED: "(clé d'accès refusée — vérifiez MISTRAL_API_KEY)",
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    chat = sub.add_parser("chat", help="terminal chat with the configured model")
    chat.add_argument("--show", choices=("answer", "all"), default="all")
    chat.add_argument("--lang", choices=("fr", "en"), default="fr")
    chat.add_argument("--detail", choices=("concise", "standard", "detailed"), default="standard")
    chat.add_argument("--theme", default=None, help="theme name (RAG over its documents)")
    args = parser.parse_args(argv)
    engine = ReActEngine()
    engine.start(theme=args.theme, language=args.lang, detail=args.detail)
    try:
        asyncio.run(chat_loop(engine, args.show == "all", sys.stdin, sys.stdout))
    except KeyboardInterrupt:
        return 130
    return 0
