"""ReActFinalizer: stops on a closing block, corrects reasoning that goes wrong.

It only sees typed blocks (seed 001: it never asks the parser anything), so the
tests hand it blocks directly, except the last one which runs the seed's example
flow through the real parser.
"""

from __future__ import annotations

import pytest

from engine.finalizer import Decision, ReActFinalizer, Verdict
from engine.observations import EMPTY_RESULT_TEXT
from engine.prompts import INJECTED_THOUGHTS
from engine.stream_parser import ReActStreamParser
from engine.types import CLOSING_TYPES, ReActBlock, ReActType

T = ReActType


def block(kind: ReActType, content: str = "") -> ReActBlock:
    return ReActBlock(kind, content)


def tool_step(fin: ReActFinalizer, tool: str, raw_input: str, observation: str) -> list[Decision]:
    """One tool round as the engine feeds it: Thought, Action, Action Input, Observation."""
    return [
        fin.observe(block(T.THOUGHT, "I should use a tool.")),
        fin.observe(block(T.ACTION, tool)),
        fin.observe(block(T.ACTION_INPUT, raw_input)),
        fin.observe(block(T.OBSERVATION, observation)),
    ]


def verdicts(decisions: list[Decision]) -> list[Verdict]:
    return [d.verdict for d in decisions]


C, INJ, S, F = Verdict.CONTINUE, Verdict.INJECT, Verdict.STOP, Verdict.FORCE_FINAL


# --- STOP ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [T.FINAL_ANSWER, T.ANSWER, T.RESPONSE, T.CONCLUSION])
def test_stops_on_each_closing_type(kind: ReActType) -> None:
    fin = ReActFinalizer()
    assert fin.observe(block(T.THOUGHT, "I know.")).verdict is C
    decision = fin.observe(block(kind, "42"))
    assert decision.verdict is S
    assert decision.reason == kind.value
    assert decision.thought is None
    assert fin.stopped


def test_closing_types_are_the_four_of_the_seed() -> None:
    assert {T.FINAL_ANSWER, T.ANSWER, T.RESPONSE, T.CONCLUSION} == CLOSING_TYPES


def test_stops_even_on_an_empty_answer() -> None:
    # Judging the answer's quality is the agent's business, not the Finalizer's.
    assert ReActFinalizer().observe(block(T.ANSWER, "")).verdict is S


def test_nothing_after_stop() -> None:
    fin = ReActFinalizer(max_injections=1)
    assert fin.observe(block(T.ANSWER, "done")).verdict is S
    # Anomalies after the answer are not judged, and a second answer does not stop twice.
    assert fin.observe(block(T.OBSERVATION, "")).verdict is C
    assert verdicts(tool_step(fin, "s", "{}", "")) == [C, C, C, C]
    assert verdicts(tool_step(fin, "s", "{}", "")) == [C, C, C, C]
    assert fin.observe(block(T.FINAL_ANSWER, "again")).verdict is C
    assert fin.injections == 0


@pytest.mark.parametrize(
    "kind", [T.THOUGHT, T.ACTION, T.ACTION_INPUT, T.TOOL_CALL, T.TOOL_RESULT, T.UNKNOWN]
)
def test_non_closing_blocks_do_not_stop(kind: ReActType) -> None:
    fin = ReActFinalizer()
    assert fin.observe(block(kind, "x")).verdict is C
    assert not fin.stopped


# --- CONTINUE -------------------------------------------------------------------------


def test_healthy_reasoning_continues() -> None:
    fin = ReActFinalizer()
    assert verdicts(tool_step(fin, "search", '{"q": "a"}', "result a")) == [C, C, C, C]
    assert verdicts(tool_step(fin, "search", '{"q": "b"}', "result b")) == [C, C, C, C]
    assert verdicts(tool_step(fin, "calculate", '{"q": "a"}', "42")) == [C, C, C, C]
    assert fin.injections == 0
    assert fin.observe(block(T.ANSWER, "42")).verdict is S


def test_action_input_without_an_action_is_ignored() -> None:
    fin = ReActFinalizer()
    assert fin.observe(block(T.ACTION_INPUT, "{}")).verdict is C
    assert fin.observe(block(T.ACTION_INPUT, "{}")).verdict is C


# --- INJECT: empty observation --------------------------------------------------------


@pytest.mark.parametrize("observation", ["", "   \n", EMPTY_RESULT_TEXT])
def test_empty_observation_injects_a_thought(observation: str) -> None:
    fin = ReActFinalizer(language="en")
    decisions = tool_step(fin, "search", '{"q": "x"}', observation)
    assert verdicts(decisions) == [C, C, C, INJ]
    assert decisions[-1].reason == "empty_observation"
    assert decisions[-1].thought == INJECTED_THOUGHTS["empty_observation"]["en"]
    assert fin.injections == 1


def test_observation_with_content_is_not_empty() -> None:
    fin = ReActFinalizer()
    assert fin.observe(block(T.OBSERVATION, "0")).verdict is C
    assert fin.observe(block(T.OBSERVATION, "Error: the tool failed")).verdict is C


# --- INJECT: repeated action ------------------------------------------------------------


def test_repeated_identical_action_injects() -> None:
    fin = ReActFinalizer(language="en")
    tool_step(fin, "search", '{"query": "weather", "city": "Paris"}', "rain")
    # Same call: keys in another order, other whitespace.
    decisions = tool_step(fin, "search", '{ "city":"Paris",\n  "query":   "weather" }', "rain")
    # Judged when its Observation arrives: only an action that really ran counts.
    assert verdicts(decisions) == [C, C, C, INJ]
    assert decisions[3].reason == "repeated_action"
    assert decisions[3].thought == INJECTED_THOUGHTS["repeated_action"]["en"].format(tool="search")
    assert "search" in (decisions[3].thought or "")


def test_action_refused_before_running_is_not_a_call() -> None:
    # A format retry: the engine sends no Observation block for the refused action,
    # so the same action retried correctly is not a repeat.
    fin = ReActFinalizer(language="en")
    assert fin.observe(block(T.ACTION, "search")).verdict is C
    assert fin.observe(block(T.ACTION_INPUT, '{"q": "a"}')).verdict is C
    assert verdicts(tool_step(fin, "search", '{"q": "a"}', "r")) == [C, C, C, C]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ('{"q": "a"}', '{"q": "b"}'),  # other value
        ('{"q": "a"}', '{"q": "a", "n": 2}'),  # other keys
        ('{"q": "a b"}', '{"q": "a  b"}'),  # whitespace inside a string value matters
        ("paris weather", "london weather"),  # non-JSON input
    ],
)
def test_different_inputs_are_not_repeats(first: str, second: str) -> None:
    fin = ReActFinalizer()
    tool_step(fin, "search", first, "r1")
    assert verdicts(tool_step(fin, "search", second, "r2")) == [C, C, C, C]


def test_same_input_to_another_tool_is_not_a_repeat() -> None:
    fin = ReActFinalizer()
    tool_step(fin, "search", '{"q": "a"}', "r1")
    assert verdicts(tool_step(fin, "lookup", '{"q": "a"}', "r2")) == [C, C, C, C]


@pytest.mark.parametrize(
    "second",
    [
        '```json\n{"b": 2, "a": 1}\n```',  # the same JSON in a fence
        '`{"a": 1, "b": 2}`',  # inline backticks
        '\n{\n  "a": 1,\n  "b": 2\n}\n',  # pretty-printed
    ],
)
def test_repeat_detection_sees_through_formatting(second: str) -> None:
    fin = ReActFinalizer()
    tool_step(fin, "search", '{"a": 1, "b": 2}', "r")
    assert verdicts(tool_step(fin, "search", second, "r2"))[3] is INJ


def test_non_json_input_repeats_ignore_whitespace() -> None:
    fin = ReActFinalizer()
    tool_step(fin, "search", "weather in  Paris", "r")
    assert verdicts(tool_step(fin, "search", " weather\tin Paris\n", "r2"))[3] is INJ


def test_tool_name_decoration_does_not_hide_a_repeat() -> None:
    # "Action: `search`" and "**Action**: search" name the same tool.
    fin = ReActFinalizer()
    tool_step(fin, "search", "{}", "r")
    assert verdicts(tool_step(fin, "`search`", "{}", "r2"))[3] is INJ


def test_repeated_inline_action_injects_at_its_observation() -> None:
    # The seed's format: "Action: search[weather]" with no Action Input line.
    fin = ReActFinalizer(language="en")
    first = [
        fin.observe(block(T.ACTION, "search[weather]")),
        fin.observe(block(T.OBSERVATION, "a")),
    ]
    assert verdicts(first) == [C, C]
    assert fin.observe(block(T.ACTION, "search[weather]")).verdict is C
    decision = fin.observe(block(T.OBSERVATION, "b"))
    assert decision.verdict is INJ
    assert decision.reason == "repeated_action"
    assert fin.observe(block(T.ACTION, "search[sun]")).verdict is C
    assert fin.observe(block(T.OBSERVATION, "c")).verdict is C


# --- INJECT: going in circles -----------------------------------------------------------


@pytest.mark.parametrize(
    "observations",
    [["X", "Y", "X", "Y"], ["X", "X", "X", "Y"], ["X", "X", "Y", "Y"]],
)
def test_going_in_circles_injects(observations: list[str]) -> None:
    fin = ReActFinalizer(max_steps=20)
    decisions = [
        tool_step(fin, "search", f'{{"q": {i}}}', obs)[-1] for i, obs in enumerate(observations)
    ]
    assert verdicts(decisions) == [C, C, C, INJ]
    assert decisions[-1].reason == "going_in_circles"
    assert decisions[-1].thought == INJECTED_THOUGHTS["going_in_circles"]["fr"]


def test_new_information_is_not_going_in_circles() -> None:
    fin = ReActFinalizer(max_steps=20)
    observations = ["X", "Y", "Z", "X", "W", "V"]
    decisions = [
        tool_step(fin, "search", f'{{"q": {i}}}', obs)[-1] for i, obs in enumerate(observations)
    ]
    assert verdicts(decisions) == [C] * 6


# --- INJECT: many steps ---------------------------------------------------------------------


def test_many_steps_injects_once_two_steps_before_the_limit() -> None:
    fin = ReActFinalizer(max_steps=8)
    decisions = [tool_step(fin, "search", f'{{"q": {i}}}', f"r{i}")[-1] for i in range(8)]
    assert verdicts(decisions) == [C, C, C, C, C, INJ, C, C]
    assert decisions[5].reason == "many_steps"
    assert decisions[5].thought == INJECTED_THOUGHTS["many_steps"]["fr"].format(
        steps=6, max_steps=8
    )
    assert "6" in (decisions[5].thought or "") and "8" in (decisions[5].thought or "")


def test_many_steps_with_a_small_budget_warns_from_the_second_step() -> None:
    fin = ReActFinalizer(max_steps=3)
    decisions = [tool_step(fin, "search", f'{{"q": {i}}}', f"r{i}")[-1] for i in range(3)]
    assert verdicts(decisions) == [C, INJ, C]


# --- language ------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["fr", "en"])
def test_injected_thoughts_speak_the_users_language(language: str) -> None:
    fin = ReActFinalizer(language=language)  # type: ignore[arg-type]
    thought = tool_step(fin, "search", "{}", "")[-1].thought
    assert thought == INJECTED_THOUGHTS["empty_observation"][language]


def test_french_and_english_thoughts_differ() -> None:
    fr = tool_step(ReActFinalizer(language="fr"), "s", "{}", "")[-1].thought
    en = tool_step(ReActFinalizer(language="en"), "s", "{}", "")[-1].thought
    assert fr is not None and fr.startswith("Je n'ai obtenu aucun résultat")
    assert en is not None and en.startswith("I got no result")


def test_default_language_is_french() -> None:
    thought = tool_step(ReActFinalizer(), "s", "{}", "")[-1].thought
    assert thought == INJECTED_THOUGHTS["empty_observation"]["fr"]


# --- FORCE_FINAL ------------------------------------------------------------------------------


def test_force_final_once_injections_are_used_up() -> None:
    fin = ReActFinalizer(max_injections=2, max_steps=50)
    decisions = [tool_step(fin, "search", f'{{"q": {i}}}', "")[-1] for i in range(4)]
    assert verdicts(decisions) == [INJ, INJ, F, F]
    assert decisions[2].reason == "empty_observation"
    assert decisions[2].thought is None
    assert fin.injections == 2
    # The forced final answer still ends the turn.
    assert fin.observe(block(T.FINAL_ANSWER, "best effort")).verdict is S


def test_force_final_counts_every_kind_of_injection() -> None:
    fin = ReActFinalizer(max_injections=1, max_steps=50)
    assert tool_step(fin, "s", "{}", "")[-1].verdict is INJ  # empty observation
    decision = tool_step(fin, "s", "{}", "r")[3]  # repeated action, judged at its result
    assert decision.verdict is F
    assert decision.reason == "repeated_action"


def test_zero_injections_forces_final_at_the_first_anomaly() -> None:
    fin = ReActFinalizer(max_injections=0)
    assert tool_step(fin, "s", "{}", "")[-1].verdict is F


# --- with the parser ------------------------------------------------------------------------


def test_seed_example_flow_stops_at_the_final_answer() -> None:
    text = (
        "Thought: I need to search.\nAction: search[weather]\n"
        "Observation: It's raining.\nFinal Answer: Bring an umbrella.\n"
    )
    parser = ReActStreamParser()
    fin = ReActFinalizer(language="en")
    decisions: list[tuple[ReActType, Verdict]] = []
    for chunk in text.split(" "):  # word by word, as a stream
        for b in parser.feed(chunk + " "):
            decisions.append((b.type, fin.observe(b).verdict))
    for b in parser.flush():
        decisions.append((b.type, fin.observe(b).verdict))
    assert decisions == [
        (T.THOUGHT, C),
        (T.ACTION, C),
        (T.OBSERVATION, C),
        (T.FINAL_ANSWER, S),
    ]
