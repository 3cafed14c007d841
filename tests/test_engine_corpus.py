"""A corpus of malformed (and well-formed) model outputs, run through the whole engine.

Each case is a script for ``ScriptedLLM`` (what the model "says" at each call)
and what must come out of ``ReActEngine.stream``. Every case checks the
engine's contract: the turn ends without an exception, with a typed stop
reason, a non-empty answer that is also the last block of the raw stream, and
a bounded number of steps. Case-specific facts (which tool really ran, what the
model was told after an error) are checked on top.

The first group ports the shapes of llama-index's own ReAct output-parser
tests (``tests/agent/react/test_react_output_parser.py``); the rest are the
failure modes real models and real networks produce.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.tools import BaseTool

from config.settings import AppConfig
from engine import ReActEngine, ReActStreamParser, StopReason
from engine.errors import ForceFinalizeException, RetryException
from engine.prompts import FORCE_FINAL_INSTRUCTION, INJECTED_THOUGHTS, STOP_REASON_TEXT
from engine.tools import tool_from_function
from engine.types import TurnOutcome
from tests.fakes import FailMidStream, ScriptedLLM, ScriptItem, Stall

MAX_STEPS = 6
MAX_ATTEMPTS = 3
RETRIES = 2  # AppConfig.max_consecutive_retries
TURN_TIME_LIMIT_S = 5.0

FORCE_FINAL_EN = FORCE_FINAL_INSTRUCTION["en"].split(".")[0]  # "You must now give ..."
REPEATED_ECHO = INJECTED_THOUGHTS["repeated_action"]["en"].format(tool="echo")


def corpus_config(**overrides: Any) -> AppConfig:
    """Small budgets so that transport faults cost milliseconds; every tool offered."""
    values: dict[str, Any] = {
        "router_top_k": 50,
        "max_steps": MAX_STEPS,
        "max_consecutive_retries": RETRIES,
        "llm_max_attempts": MAX_ATTEMPTS,
        "llm_retry_budget_s": 2.0,
        "llm_timeout_s": 1.0,
        "llm_stall_timeout_s": 0.2,
        "llm_backoff_initial_s": 0.01,
        "tool_timeout_s": 1.0,
    }
    values.update(overrides)
    return AppConfig(**values)


class Toolbox:
    """Test tools that count how often they really run."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.args: list[tuple[str, dict[str, Any]]] = []

    def _ran(self, name: str, /, **kwargs: Any) -> None:
        self.runs[name] += 1
        self.args.append((name, kwargs))

    def tools(self) -> list[BaseTool]:
        box = self

        def echo(text: str) -> str:
            """Echo the text back. Example: {"text": "hello"}"""
            box._ran("echo", text=text)
            return f"echo:{text}"

        def add(a: int, b: int) -> int:
            """Add two integers. Example: {"a": 1, "b": 2}"""
            box._ran("add", a=a, b=b)
            return a + b

        def add2(a: int, b: int) -> int:
            """Add two integers (a second adder whose name ends with a digit)."""
            box._ran("add2", a=a, b=b)
            return a + b

        def addition(a: int, b: int) -> int:
            """Add two integers (registered under a Chinese name)."""
            box._ran("加法", a=a, b=b)
            return a + b

        def lookup(pages: list[str], load_kwargs: dict[str, Any], query_str: str) -> str:
            """Look up pages of a wiki."""
            box._ran("lookup", pages=pages, load_kwargs=load_kwargs, query_str=query_str)
            return "found " + ", ".join(pages)

        def configure(name: str, options: dict[str, Any]) -> str:
            """Configure a named item with nested options."""
            box._ran("configure", name=name, options=options)
            return f"configured {name}"

        def boom(text: str) -> str:
            """A tool that always fails with a plain Python exception."""
            box._ran("boom", text=text)
            raise ValueError(f"kaboom {text}")

        def picky(text: str) -> str:
            """A tool that refuses its input with a RetryException."""
            box._ran("picky", text=text)
            raise RetryException("picky wants an ISO date such as 2024-05-01, not words")

        def vault(text: str) -> str:
            """A tool whose backend is gone for good (ForceFinalizeException)."""
            box._ran("vault", text=text)
            raise ForceFinalizeException("the vault database is offline")

        def void(text: str) -> str:
            """A tool that runs fine and finds nothing."""
            box._ran("void", text=text)
            return ""

        return [
            tool_from_function(echo),
            tool_from_function(add),
            tool_from_function(add2),
            tool_from_function(addition, name="加法"),
            tool_from_function(lookup),
            tool_from_function(configure),
            tool_from_function(boom),
            tool_from_function(picky),
            tool_from_function(vault),
            tool_from_function(void),
        ]


@dataclass
class Turn:
    """Everything one turn left behind."""

    outcome: TurnOutcome
    deltas: list[str]
    llm: ScriptedLLM
    box: Toolbox
    elapsed: float

    @property
    def raw(self) -> str:
        return "".join(self.deltas)

    def messages(self, call: int) -> list[ChatMessage]:
        return self.llm.calls[call]

    def text_of_call(self, call: int) -> str:
        """Every non-system message the model received at call ``call``."""
        return "\n".join(
            m.content or "" for m in self.llm.calls[call] if m.role != MessageRole.SYSTEM
        )


async def run_turn(
    script: Sequence[ScriptItem],
    *,
    prompt: str = "What is the answer?",
    language: str = "en",
    chunk_size: int = 7,
    config: AppConfig | None = None,
) -> Turn:
    box = Toolbox()
    llm = ScriptedLLM(list(script), chunk_size=chunk_size)
    engine = ReActEngine(config=config or corpus_config(), llm=llm, tools=box.tools())
    engine.start(language=language)
    deltas: list[str] = []
    started = time.monotonic()
    async for delta in engine.stream(prompt):
        assert isinstance(delta, str)
        deltas.append(delta)
    elapsed = time.monotonic() - started
    assert engine.last_outcome is not None
    return Turn(engine.last_outcome, deltas, llm, box, elapsed)


@dataclass(frozen=True)
class Expect:
    """What a case must produce, beyond the contract every case checks."""

    stop: StopReason
    calls: int | None  # model calls (attempts included); None: only bounded
    answer: str | None = None  # exact final answer
    answer_contains: Sequence[str] = ()
    runs: dict[str, int] = field(default_factory=dict)  # tool -> real executions
    kwargs: Sequence[tuple[str, dict[str, Any]]] = ()  # exact arguments of the runs
    told: Sequence[tuple[int, str]] = ()  # (call index, text the model was shown)
    not_told: Sequence[tuple[int, str]] = ()
    raw_contains: Sequence[str] = ()
    raw_excludes: Sequence[str] = ()
    language: str = "en"
    check: Callable[[Turn], None] | None = None


def case(script: Sequence[ScriptItem], expect: Expect, case_id: str) -> Any:
    return pytest.param(list(script), expect, id=case_id)


class AuthError(Exception):
    """Looks like an SDK's 401 error."""

    status_code = 401


ACT = "Thought: I need a tool.\nAction: {tool}\nAction Input: {args}\n"


def act(tool: str, args: str) -> str:
    return ACT.format(tool=tool, args=args)


def _fallback_mentions(reason: str) -> Callable[[Turn], None]:
    def check(turn: Turn) -> None:
        assert STOP_REASON_TEXT["en"][reason] in turn.outcome.answer

    return check


def _partial_attempt_not_fed_back(turn: Turn) -> None:
    # The retry after a broken stream resends the same prompt: the half-written
    # output of the failed attempt is not presented as the model's own words.
    assert turn.text_of_call(1) == turn.text_of_call(0)
    assert "partial" not in turn.text_of_call(1)


def _composed_answer_lists_results(turn: Turn) -> None:
    # The model never answered: the answer is composed from what the tools returned,
    # each distinct result once.
    assert turn.outcome.answer.count("echo → echo:loop") == 1


def _forced_call_has_scratchpad(turn: Turn) -> None:
    last = turn.text_of_call(len(turn.llm.calls) - 1)
    for i in range(MAX_STEPS):
        assert f"Observation: echo:t{i}" in last
    assert FORCE_FINAL_EN in last


LLAMA_INDEX_SHAPES = [
    case(
        [
            "Thought: I need to use a tool to help me answer the question.\nAction: add\n"
            'Action Input: {"a": 1, "b": 1}\n',
            "Thought: I can answer.\nAnswer: 2",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="2",
            runs={"add": 1},
            kwargs=[("add", {"a": 1, "b": 1})],
            told=[(1, "Observation: 2")],
        ),
        "li-tool-use",
    ),
    case(
        [
            'Thought: I need to use a tool.\n\nAction: add\n\n\n\nAction Input: {"a": 1, "b": 1}\n',
            "Answer: 2",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="2",
            runs={"add": 1},
            kwargs=[("add", {"a": 1, "b": 1})],
        ),
        "li-spurious-newlines",
    ),
    case(
        [
            act("configure", '{"name": "cache", "options": {"depth": {"max": 2}, "tags": []}}'),
            "Answer: configured",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="configured",
            runs={"configure": 1},
            kwargs=[("configure", {"name": "cache", "options": {"depth": {"max": 2}, "tags": []}})],
        ),
        "li-nested-json",
    ),
    case(
        [
            "Thought: Gotta use a tool.\nAction: lookup\nAction Input: {'pages': ['coffee'] "
            "/* comment */, 'load_kwargs': {}, 'query_str': ''}, along those lines.\n",
            "Answer: coffee found",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="coffee found",
            runs={"lookup": 1},
            kwargs=[("lookup", {"pages": ["coffee"], "load_kwargs": {}, "query_str": ""})],
        ),
        "li-single-quotes-comment-extra-text",
    ),
    case(
        [
            'Thought: I need to use a tool.\nAction: add\nAction Input: QueryEngineTool({"a": 1, '
            '"b": 1})\n',
            "Answer: 2",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="2",
            runs={"add": 1},
            kwargs=[("add", {"a": 1, "b": 1})],
        ),
        "li-json-wrapped-in-call",
    ),
    case(
        [
            "Thought: I need to use a tool.\nAction: add (add two numbers)\n"
            'Action Input: {"a": 1, "b": 1}\n',
            "Answer: 2",
        ],
        Expect(StopReason.ANSWERED, calls=2, answer="2", runs={"add": 1}),
        "li-extra-text-after-action-name",
    ),
    case(
        [act("add2", '{"a": 2, "b": 3}'), "Answer: 5"],
        Expect(StopReason.ANSWERED, calls=2, answer="5", runs={"add2": 1}),
        "li-tool-name-with-digit",
    ),
    case(
        [
            'Thought: I need to use a tool.\nAction: add\nAction Input: {\n    "a": 1,\n'
            '    "b": 1\n}\n',
            "Answer: 2",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="2",
            runs={"add": 1},
            kwargs=[("add", {"a": 1, "b": 1})],
        ),
        "li-multiline-action-input",
    ),
    case(
        [
            'Thought: I need to use a tool.\n\nAction: 加法\n\nAction Input: {"a": 1, "b": 1}\n',
            "Answer: 2",
        ],
        Expect(StopReason.ANSWERED, calls=2, answer="2", runs={"加法": 1}),
        "li-non-ascii-tool-name",
    ),
    case(
        [
            "Thought: I have enough information to answer the question without using any more "
            "tools.\nAnswer: 2\n"
        ],
        Expect(StopReason.ANSWERED, calls=1, answer="2"),
        "li-final-response",
    ),
    case(
        [
            "Thought: I have enough information.\nAnswer: Here is the answer:\n\n"
            "This is the second line.\n"
        ],
        Expect(
            StopReason.ANSWERED, calls=1, answer="Here is the answer:\n\nThis is the second line."
        ),
        "li-multiline-answer",
    ),
    case(
        ["Answer: Paris is the capital of France."],
        Expect(StopReason.ANSWERED, calls=1, answer="Paris is the capital of France."),
        "li-answer-without-thought",
    ),
    case(
        [
            'Thought: I need a tool.\nAction: echo\nAction Input: ```json\n{"text": "fenced"}\n'
            "```\n",
            "Answer: done",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="done",
            runs={"echo": 1},
            kwargs=[("echo", {"text": "fenced"})],
        ),
        "li-action-input-in-code-fence",
    ),
]

FORMAT_ERRORS = [
    case(
        [
            "Thought: I need a tool.\nAction: echo\n",
            act("echo", '{"text": "fixed"}'),
            "Answer: fixed",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=3,
            answer="fixed",
            runs={"echo": 1},
            told=[(1, "without an 'Action Input:' line")],
        ),
        "missing-action-input",
    ),
    case(
        ["Thought: I need a tool.\nAction: echo\n"] * 6,
        Expect(
            StopReason.FORCED_FINAL,
            calls=RETRIES + 2,
            runs={},
            told=[(RETRIES + 1, FORCE_FINAL_EN)],
            check=_fallback_mentions("forced_final"),
        ),
        "missing-action-input-forever",
    ),
    case(
        ["Thought: Let me think about this carefully.\n", "Thought: done thinking.\nAnswer: 42"],
        Expect(
            StopReason.ANSWERED, calls=2, answer="42", told=[(1, "neither an Action nor an Answer")]
        ),
        "thought-without-action",
    ),
    case(
        ["Thought: Let me think about this carefully.\n", "Answer: 42"],
        Expect(
            StopReason.ANSWERED, calls=2, answer="42", told=[(1, "neither an Action nor an Answer")]
        ),
        "thought-without-action-then-bare-answer",
    ),
    case(
        [act("echo", '{"text": "a"'), act("echo", '{"text": "a"}'), "Answer: a"],
        Expect(
            StopReason.ANSWERED,
            calls=3,
            answer="a",
            runs={"echo": 1},
            kwargs=[("echo", {"text": "a"})],
            told=[(1, "not valid JSON")],
        ),
        "invalid-json-unclosed",
    ),
    case(
        [act("echo", '{"text": "a", "extra": }'), "Answer: gave up"],
        Expect(
            StopReason.ANSWERED, calls=2, answer="gave up", runs={}, told=[(1, "not valid JSON")]
        ),
        "invalid-json-garbage",
    ),
    case(
        [act("echo", "{'text': 'single'}"), "Answer: single"],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="single",
            runs={"echo": 1},
            kwargs=[("echo", {"text": "single"})],
        ),
        "single-quoted-json",
    ),
    case(
        [act("web_search", '{"query": "x"}'), "Answer: no search"],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="no search",
            runs={},
            told=[(1, "There is no tool named 'web_search'"), (1, "echo")],
        ),
        "unknown-tool",
    ),
    case(
        ['Thought: hmm\nAction: Echo\nAction Input: {"text": "case"}\n', "Answer: case"],
        Expect(StopReason.ANSWERED, calls=2, answer="case", runs={"echo": 1}),
        "tool-name-wrong-case",
    ),
    case(
        ["Thought: I will call it.\nAction: calculate(2+2)\n", "Answer: 4"],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="4",
            told=[(1, "Observation: 4")],
            check=lambda t: _assert_tool_call(t, "calculate", {"expression": "2+2"}),
        ),
        "action-with-inline-args",
    ),
    case(
        [
            act("calculate", '{"input": "hello world", "num_beams": 5}'),
            act("calculate", '{"expression": "3 * 3"}'),
            "Answer: 9",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=3,
            answer="9",
            told=[
                (1, "calculate has no argument 'input', 'num_beams'"),
                (1, '{"expression": "..."}'),
                (2, "Observation: 9"),
            ],
            check=lambda t: _assert_tool_call(t, "calculate", {"expression": "3 * 3"}),
        ),
        "example-arguments-copied-from-prompt",
    ),
    case(
        [act("calculate", '{"input": "2+2"}'), "Answer: 4"],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="4",
            told=[(1, "Observation: 4")],
            check=lambda t: _assert_tool_call(t, "calculate", {"expression": "2+2"}),
        ),
        "argument-renamed",
    ),
    case(
        [
            '**Thought:** I need a tool.\n**Action:** echo\n**Action Input:** {"text": "b"}\n',
            "**Thought:** done\n**Answer:** bold answer",
        ],
        Expect(StopReason.ANSWERED, calls=2, answer="bold answer", runs={"echo": 1}),
        "bold-markers",
    ),
    case(
        [
            'Pensée : il me faut un outil.\nAction : echo\nEntrée de l\'action : {"text": "fr"}\n',
            "Pensée : c'est bon.\nRéponse finale : voilà la réponse.",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="voilà la réponse.",
            runs={"echo": 1},
            language="fr",
        ),
        "french-markers",
    ),
    case(
        ["Pensée : je sais.\nRéponse : c'est 6."],
        Expect(StopReason.ANSWERED, calls=1, answer="c'est 6.", language="fr"),
        "french-reponse-with-space-before-colon",
    ),
    case(
        ["The capital of France is Paris."],
        Expect(StopReason.ANSWERED, calls=1, answer="The capital of France is Paris."),
        "no-markers-plain-answer",
    ),
    case(
        ["Thought: I know it.\n### Final Answer\nThe result is 4."],
        Expect(StopReason.ANSWERED, calls=1, answer="The result is 4."),
        "markdown-heading-final-answer",
    ),
    case(
        ["Thought: I know it.\nFinal Answer: The result is 5."],
        Expect(StopReason.ANSWERED, calls=1, answer="The result is 5."),
        "final-answer-variant",
    ),
    case(
        ['Thought: I know it.\nAnswer:\n```python\nprint("hi")\n```\n'],
        Expect(StopReason.ANSWERED, calls=1, answer='```python\nprint("hi")\n```'),
        "answer-with-code-block",
    ),
    case(
        ["```\nThought: I know it.\nAnswer: fenced answer\n```\n"],
        Expect(StopReason.ANSWERED, calls=1, answer="fenced answer"),
        "whole-step-in-code-fence",
    ),
    case(
        ["", "Thought: sorry.\nAnswer: back on track"],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="back on track",
            told=[(1, "Your previous response was empty")],
        ),
        "empty-response-then-answer",
    ),
    case(
        [""] * 6,
        Expect(
            StopReason.FORCED_FINAL, calls=RETRIES + 2, check=_fallback_mentions("forced_final")
        ),
        "empty-response-forever",
    ),
    case(
        [
            act("echo", '{"text": "a"}') + "Observation: echo:invented\nThought: done\n"
            "Answer: invented answer",
            "Thought: now I know.\nAnswer: real answer",
        ],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="real answer",
            runs={"echo": 1},
            told=[(1, "Observation: echo:a")],
            not_told=[(1, "invented")],
            raw_excludes=["invented"],
        ),
        "fabricated-observation",
    ),
    case(
        [act("echo", '{"text": "q"}') + "Answer: 42", "Thought: now I know.\nAnswer: real"],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="real",
            runs={"echo": 1},
            not_told=[(1, "Answer: 42")],
            raw_excludes=["Answer: 42"],
        ),
        "answer-after-action-same-output",
    ),
]

TOOL_OUTCOMES = [
    case(
        [act("boom", '{"text": "x"}'), "Answer: the tool failed"],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="the tool failed",
            runs={"boom": 1},
            told=[(1, "the tool boom failed (ValueError: kaboom x)")],
            check=lambda t: _assert_error_record(t, "boom"),
        ),
        "tool-raises-plain-exception",
    ),
    case(
        [act("picky", '{"text": "tomorrow"}'), "Answer: needs a date"],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="needs a date",
            runs={"picky": 1},
            told=[(1, "Error from picky: picky wants an ISO date")],
            check=lambda t: _assert_error_record(t, "picky"),
        ),
        "tool-raises-retry-exception",
    ),
    case(
        [act("vault", '{"text": "x"}'), "Thought: I must stop.\nAnswer: the vault is offline"],
        Expect(
            StopReason.FORCED_FINAL,
            calls=2,
            answer="the vault is offline",
            runs={"vault": 1},
            told=[(1, "Error from vault: the vault database is offline"), (1, FORCE_FINAL_EN)],
        ),
        "tool-raises-force-finalize",
    ),
    case(
        [act("vault", '{"text": "x"}'), act("echo", '{"text": "ignored"}')],
        Expect(
            StopReason.FORCED_FINAL,
            calls=2,
            runs={"vault": 1},
            check=_fallback_mentions("forced_final"),
        ),
        "force-finalize-ignored-by-model",
    ),
    case(
        [act("void", '{"text": "x"}'), "Answer: nothing found"],
        Expect(
            StopReason.ANSWERED,
            calls=2,
            answer="nothing found",
            runs={"void": 1},
            told=[
                (1, "(empty result"),
                (1, "(Note) Thought: " + INJECTED_THOUGHTS["empty_observation"]["en"]),
            ],
            raw_contains=["Thought: " + INJECTED_THOUGHTS["empty_observation"]["en"]],
        ),
        "empty-tool-result",
    ),
    case(
        [act("echo", '{"text": "loop"}'), act("echo", '{"text": "loop"}'), "Answer: loop"],
        Expect(
            StopReason.ANSWERED,
            calls=3,
            answer="loop",
            runs={"echo": 2},
            told=[(2, f"(Note) Thought: {REPEATED_ECHO}")],
            raw_contains=[f"Thought: {REPEATED_ECHO}"],
        ),
        "repeated-identical-action",
    ),
    case(
        [act("echo", '{"text": "loop"}')] * 12,
        # One corrective Thought per step (3 at most), then the Finalizer forces the final answer.
        Expect(
            StopReason.FORCED_FINAL,
            calls=6,
            runs={"echo": 5},
            told=[(5, FORCE_FINAL_EN)],
            check=_composed_answer_lists_results,
        ),
        "repeated-identical-action-forever",
    ),
    case(
        [act("echo", f'{{"text": "t{i}"}}') for i in range(12)],
        Expect(
            StopReason.MAX_STEPS,
            calls=MAX_STEPS + 1,
            runs={"echo": MAX_STEPS},
            check=_forced_call_has_scratchpad,
        ),
        "endless-actions-never-answers",
    ),
    case(
        ["Thought: still thinking...\n"] * 12,
        Expect(
            StopReason.FORCED_FINAL, calls=RETRIES + 2, check=_fallback_mentions("forced_final")
        ),
        "endless-thoughts-never-answers",
    ),
]

TRANSPORT_FAULTS = [
    case(
        [ConnectionError("connection refused")] * 10,
        Expect(
            StopReason.LLM_UNAVAILABLE,
            calls=MAX_ATTEMPTS,
            check=_fallback_mentions("llm_unavailable"),
        ),
        "llm-down",
    ),
    case(
        [AuthError("401 Unauthorized: invalid key")] * 3,
        Expect(StopReason.LLM_AUTH_FAILED, calls=1, check=_fallback_mentions("llm_auth_failed")),
        "llm-auth-error-not-retried",
    ),
    case(
        [ConnectionError("blip"), "Thought: ok.\nAnswer: back"],
        Expect(StopReason.ANSWERED, calls=2, answer="back"),
        "llm-fails-once-then-answers",
    ),
    case(
        [
            FailMidStream(["Thought: partial", " text\nAct"], ConnectionError("reset")),
            "Thought: again.\nAnswer: recovered",
        ],
        Expect(
            StopReason.ANSWERED, calls=2, answer="recovered", check=_partial_attempt_not_fed_back
        ),
        "stream-fails-midway-then-recovers",
    ),
    case(
        [Stall(["Thought: slow"], 30.0), "Thought: again.\nAnswer: after the stall"],
        Expect(StopReason.ANSWERED, calls=2, answer="after the stall"),
        "stalled-stream-then-recovers",
    ),
    case(
        [Stall(["Thought: slow"], 30.0)] * 5,
        Expect(
            StopReason.LLM_UNAVAILABLE,
            calls=MAX_ATTEMPTS,
            check=_fallback_mentions("llm_unavailable"),
        ),
        "stalled-stream-forever",
    ),
    case(
        [act("echo", '{"text": "a"}'), *[ConnectionError("down")] * 6],
        Expect(
            StopReason.LLM_UNAVAILABLE,
            calls=1 + MAX_ATTEMPTS,
            runs={"echo": 1},
            check=lambda t: _assert_in("echo → echo:a", t.outcome.answer),
        ),
        "llm-down-after-a-tool-keeps-results",
    ),
]

CORPUS = [*LLAMA_INDEX_SHAPES, *FORMAT_ERRORS, *TOOL_OUTCOMES, *TRANSPORT_FAULTS]


def _assert_in(needle: str, haystack: str) -> None:
    assert needle in haystack


def _assert_tool_call(turn: Turn, name: str, kwargs: dict[str, Any]) -> None:
    records = [(r.name, r.kwargs) for r in turn.outcome.tool_calls]
    assert records == [(name, kwargs)]
    assert not turn.outcome.tool_calls[0].is_error


def _assert_error_record(turn: Turn, name: str) -> None:
    [record] = turn.outcome.tool_calls
    assert record.name == name
    assert record.is_error
    assert record.output.startswith("Error")


def check_contract(turn: Turn, expect: Expect) -> None:
    """What every turn owes its caller, whatever the model did."""
    outcome = turn.outcome
    assert isinstance(outcome.stop_reason, StopReason)
    assert outcome.stop_reason is expect.stop, (outcome.stop_reason, outcome.answer, turn.raw)
    assert isinstance(outcome.answer, str) and outcome.answer.strip()
    assert outcome.steps <= MAX_STEPS + 1
    assert len(turn.llm.calls) <= (MAX_STEPS + 1) * MAX_ATTEMPTS
    assert turn.elapsed < TURN_TIME_LIMIT_S
    # The client reading the raw stream ends on the same answer as last_outcome.
    parser = ReActStreamParser()
    parser.feed(turn.raw)
    parser.flush()
    assert parser.blocks == outcome.blocks
    # Exactly one closing block, the last one: nothing in an Observation (a tool's
    # text, an error message's format reminder) may read as an answer.
    closing = [i for i, b in enumerate(outcome.blocks) if b.type.is_closing]
    assert closing == [len(outcome.blocks) - 1], outcome.blocks
    assert outcome.blocks[-1].content == outcome.answer
    assert parser.get_final_answer() == outcome.answer
    # Tool records are the tools that really ran, in order.
    assert [r.name for r in outcome.tool_calls if r.name in turn.box.runs] == [
        name for name, _ in turn.box.args
    ]


def check_expectations(turn: Turn, expect: Expect) -> None:
    if expect.calls is not None:
        assert len(turn.llm.calls) == expect.calls, turn.raw
    if expect.answer is not None:
        assert turn.outcome.answer == expect.answer
    for fragment in expect.answer_contains:
        assert fragment in turn.outcome.answer
    assert dict(turn.box.runs) == expect.runs
    if expect.kwargs:
        assert turn.box.args == list(expect.kwargs)
    for call, text in expect.told:
        assert text in turn.text_of_call(call), (call, text, turn.text_of_call(call))
    for call, text in expect.not_told:
        assert text not in turn.text_of_call(call)
    for text in expect.raw_contains:
        assert text in turn.raw
    for text in expect.raw_excludes:
        assert text not in turn.raw
    if expect.check is not None:
        expect.check(turn)


def test_corpus_has_enough_named_cases() -> None:
    ids = [p.id for p in CORPUS]
    assert len(ids) >= 30
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(("script", "expect"), CORPUS)
async def test_corpus_case(script: list[ScriptItem], expect: Expect) -> None:
    turn = await run_turn(script, language=expect.language)
    check_contract(turn, expect)
    check_expectations(turn, expect)


# Chunking must not matter: token by token, the engine reaches the same outcome.
CHUNKING_CASES = [
    p
    for p in CORPUS
    if p.id
    in {
        "li-tool-use",
        "li-multiline-action-input",
        "bold-markers",
        "french-markers",
        "answer-with-code-block",
        "whole-step-in-code-fence",
        "fabricated-observation",
        "answer-after-action-same-output",
        "empty-tool-result",
        "markdown-heading-final-answer",
    }
]


@pytest.mark.parametrize(("script", "expect"), CHUNKING_CASES)
async def test_corpus_case_token_by_token(script: list[ScriptItem], expect: Expect) -> None:
    turn = await run_turn(script, language=expect.language, chunk_size=1)
    check_contract(turn, expect)
    check_expectations(turn, expect)
