"""StepShaper: what of one LLM call reaches the raw stream and the agent.

It must cut what the model cannot be believed for (a fabricated Observation, a
protocol line after its answer, an answer before the tool ran), protect code
blocks inside answers, give a marker-less step after an Observation its marker,
and forward text as soon as its line can no longer be a marker; all of it the
same whatever the chunking of the model's stream.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.markers import is_fence
from engine.step_stream import StepShaper
from engine.stream_parser import ReActStreamParser
from engine.types import ReActType
from tests.test_stream_parser import CORPUS, chunkings, generated_texts, parse

T = ReActType


def shape(chunks: list[str], *, needs_leading_marker: bool = False) -> tuple[str, StepShaper]:
    """Feed ``chunks``, finish; return everything forwarded and the shaper."""
    shaper = StepShaper(needs_leading_marker=needs_leading_marker)
    out = [shaper.feed(chunk) for chunk in chunks]
    out.append(shaper.finish())
    return "".join(out), shaper


# --- cuts ---------------------------------------------------------------------------

STEP = 'Thought: I will search.\nAction: search\nAction Input: {"q": "x"}\n'


@pytest.mark.parametrize(
    "fabricated",
    [
        "Observation: It is sunny.\nAnswer: Sunny.",  # no stop sequence on the server
        "**Observation:** It is sunny.",
        "### Observation\nIt is sunny.",
        "Observation :\n",
        "observation: lower case",
    ],
)
def test_fabricated_observation_is_cut(fabricated: str) -> None:
    text = STEP + fabricated
    for chunks in ([text], list(text), [STEP + fabricated[:3], fabricated[3:]]):
        forwarded, shaper = shape(chunks)
        assert forwarded == STEP
        assert shaper.kept_text == STEP
        assert shaper.cut
        assert shaper.cut_reason == "fabricated_observation"


def test_fabricated_observation_with_crlf_heading_is_cut() -> None:
    # "### Observation\r\n": the heading is only a marker once "\r" is ignored.
    step = STEP.replace("\n", "\r\n")
    forwarded, shaper = shape([step + "### Observation\r", "\nsunny\r\n"])
    assert forwarded == step
    assert shaper.cut_reason == "fabricated_observation"


def test_protocol_line_after_an_answer_is_cut() -> None:
    # The model answers, then starts another round of reasoning.
    text = "Thought: easy.\nAnswer: 4\nThought: let me double-check\nAction: calc"
    forwarded, shaper = shape(list(text))
    assert forwarded == "Thought: easy.\nAnswer: 4\n"
    assert shaper.cut_reason == "text_after_answer"


def test_closing_marker_lines_after_an_answer_are_kept() -> None:
    # "Conclusion:" inside an answer is prose, as the parser reads it.
    text = "Answer: Paris.\nConclusion: it is the capital.\nFinal Answer: Paris"
    forwarded, shaper = shape([text])
    assert forwarded == text
    assert not shaper.cut
    assert shaper.cut_reason is None


def test_answer_written_before_the_tool_ran_is_cut() -> None:
    # The model calls a tool and answers in the same breath; the agent runs the
    # tool, so the raw stream must not show (nor the Finalizer stop on) the answer.
    forwarded, shaper = shape([STEP + "Answer: it is sunny"])
    assert forwarded == STEP
    assert shaper.cut_reason == "answer_after_action"


def test_code_fence_inside_an_answer_protects_marker_looking_lines() -> None:
    answer = (
        "Answer: The format is:\n```\nThought: ...\nAction: ...\nObservation: ...\n```\nDone.\n"
    )
    forwarded, shaper = shape(list(answer + "Thought: again"))
    assert forwarded == answer  # the code block passes, the line after it is cut
    assert shaper.cut_reason == "text_after_answer"


def test_fence_opened_on_the_answer_line_protects_its_content() -> None:
    text = "Answer: ```text\nObservation: an example\n```\n"
    for chunks in ([text], list(text), ["Answer: `", "``text\nObs", "ervation: an example\n```\n"]):
        forwarded, shaper = shape(chunks)
        assert forwarded == text
        assert not shaper.cut


def test_protocol_after_a_fenced_answer_is_cut() -> None:
    # The whole step wrapped in ``` and the model goes on after the closing fence:
    # that fence is scaffolding (the parser reads the Thought as a new block).
    text = "```\nThought: t\nAnswer: a\n```\nThought: more\nObservation: fake"
    forwarded, shaper = shape(list(text))
    assert forwarded == "```\nThought: t\nAnswer: a\n"
    assert shaper.cut_reason == "text_after_answer"
    assert parse(forwarded) == [(T.THOUGHT, "t"), (T.ANSWER, "a")]


def test_fenced_json_action_input_is_kept_and_the_observation_after_it_cut() -> None:
    step = 'Thought: t\nAction: s\nAction Input:\n```json\n{"q": 1}\n```\n'
    forwarded, shaper = shape(list(step + "Observation: fake"))
    assert forwarded == step
    assert shaper.cut_reason == "fabricated_observation"


def test_observation_line_inside_a_code_block_of_a_thought_is_code() -> None:
    # Same reading as the parser: a fence followed by text opens a code block.
    text = "Thought: the tool prints\n```\nresult\nObservation: 1\n```\nAction: s\n"
    forwarded, shaper = shape(list(text))
    assert forwarded == text
    assert not shaper.cut


def test_fence_directly_before_an_observation_is_scaffolding_and_it_is_cut() -> None:
    forwarded, shaper = shape(list("Thought: t\n```\nObservation: fake\n```"))
    assert forwarded == "Thought: t\n"  # the held fence goes with the cut line
    assert shaper.cut_reason == "fabricated_observation"


def test_feed_and_finish_after_a_cut_forward_nothing() -> None:
    shaper = StepShaper()
    assert shaper.feed("Observation: fake\n") == ""
    assert shaper.cut
    assert shaper.feed("Answer: more") == ""
    assert shaper.finish() == ""
    assert shaper.kept_text == ""


# --- incremental forwarding ----------------------------------------------------------


def test_text_is_forwarded_as_soon_as_it_cannot_be_a_marker() -> None:
    shaper = StepShaper()
    assert shaper.feed("Thought: I am") == "Thought: I am"
    assert shaper.feed(" thinking\nAct") == " thinking\n"  # "Act" may become "Action:"
    assert shaper.feed("ion: s") == "Action: s"
    assert shaper.feed("\nThe") == "\nThe"  # "The" cannot start a marker
    assert shaper.feed(" end") == " end"
    assert shaper.finish() == ""
    assert shaper.kept_text == "Thought: I am thinking\nAction: s\nThe end"


def test_answer_line_is_held_until_its_first_character_shows_it_is_no_fence() -> None:
    # "Answer: ```python" would open a code block: decide once that is known.
    shaper = StepShaper()
    assert shaper.feed("Answer:") == ""
    assert shaper.feed(" Paris") == "Answer: Paris"


def test_undecided_line_is_released_at_finish() -> None:
    shaper = StepShaper()
    assert shaper.feed("Thought: x\n### Ans") == "Thought: x\n"
    assert shaper.finish() == "### Ans"


# --- needs_leading_marker: the step after an Observation ------------------------------


def test_step_starting_with_a_marker_streams_immediately() -> None:
    shaper = StepShaper(needs_leading_marker=True)
    assert shaper.feed("\n") == ""
    assert shaper.feed("Tho") == ""  # may still be a marker
    assert shaper.feed("ught: I now know") == "Thought: I now know"
    assert shaper.feed(" the answer.\n") == " the answer.\n"
    assert shaper.finish() == ""


def test_step_without_any_marker_becomes_an_answer_at_finish() -> None:
    # After an Observation, small models often just write the answer.
    shaper = StepShaper(needs_leading_marker=True)
    assert shaper.feed("The capital") == ""
    assert shaper.feed(" is Paris.\n") == ""  # held: the marker is only known at the end
    assert shaper.finish() == "Answer: The capital is Paris."
    assert shaper.kept_text == "Answer: The capital is Paris."


def test_step_with_a_preamble_then_markers_becomes_a_thought() -> None:
    text = "I should check.\nAction: search\nAction Input: {}"
    forwarded, shaper = shape(list(text), needs_leading_marker=True)
    assert forwarded == "Thought: I should check.\nAction: search\nAction Input: {}"
    assert parse(forwarded) == [
        (T.THOUGHT, "I should check."),
        (T.ACTION, "search"),
        (T.ACTION_INPUT, "{}"),
    ]


def test_held_step_is_still_cut_at_a_fabricated_observation() -> None:
    text = "I should check.\nAction: s\nAction Input: {}\nObservation: fake\nAnswer: fake"
    forwarded, shaper = shape([text], needs_leading_marker=True)
    assert forwarded == "Thought: I should check.\nAction: s\nAction Input: {}\n"
    assert shaper.cut_reason == "fabricated_observation"


def test_fenced_step_after_an_observation_streams_without_a_prefix() -> None:
    # The whole step wrapped in a fence: the fence is scaffolding, the step
    # does start with a marker.
    shaper = StepShaper(needs_leading_marker=True)
    assert shaper.feed("```\n") == ""
    assert shaper.feed("Thought: t\n") == "```\nThought: t\n"
    assert shaper.feed("Answer: a\n```") == "Answer: a\n"  # "```" may go on: "```json"
    assert shaper.finish() == "```"


def test_two_fences_before_the_first_marker_are_code_not_scaffolding() -> None:
    # The parser reads "```" + "```" as an empty code block: the step does not
    # start with a marker and would be glued to the Observation without one.
    forwarded, _ = shape(["```\n```\nThought: x\nAnswer: y"], needs_leading_marker=True)
    assert forwarded == "Thought:\n```\n```\nThought: x\nAnswer: y"
    assert parse("Observation: r\n" + forwarded)[0] == (T.OBSERVATION, "r")


def test_marker_less_step_starting_with_a_code_block_keeps_its_fence() -> None:
    text = "```python\nprint(1)\n```"
    forwarded, _ = shape([text], needs_leading_marker=True)
    assert forwarded == "Answer:\n```python\nprint(1)\n```"
    assert parse(forwarded) == [(T.ANSWER, "```python\nprint(1)\n```")]


def test_stream_ending_on_an_undecided_marker_line_gets_no_prefix() -> None:
    forwarded, _ = shape(["### Final Answer"], needs_leading_marker=True)
    assert forwarded == "### Final Answer"


@pytest.mark.parametrize("text", ["", "\n\n", "  \n"])
def test_blank_step_forwards_nothing(text: str) -> None:
    forwarded, shaper = shape([text], needs_leading_marker=True)
    assert forwarded == ""
    assert shaper.kept_text == ""


def test_without_needs_leading_marker_plain_text_is_forwarded_as_is() -> None:
    shaper = StepShaper()
    assert shaper.feed("Bonjour") == "Bonjour"
    assert shaper.finish() == ""


# --- properties ------------------------------------------------------------------------

_SHAPER_CORPUS = [
    *CORPUS,
    STEP + "Observation: fake\nAnswer: fake",
    STEP + "Answer: too early",
    "Answer: ok\n```\nObservation: in code\n```\nThought: after",
    "Answer: ```text\nThought: in code\n```\nAction: after",
    "Let me see.\nAction: s\nAction Input: {}\n### Observation\r\nfake",
    "Here it is:\n```python\nx = 1\n```",
    "\r\n\r\nThought: crlf\r\nAnswer: a\r\n",
    "```\nThought: t\nAnswer: a\n```\nThought: more\nObservation: fake",
    "```\n\u3000x\n```\nThought: a line starting with unicode whitespace after a fence",
    "```\n```\nThought: two fences in a row are a code block, not scaffolding",
]


@st.composite
def shaper_inputs(draw: st.DrawFn) -> str:
    text = draw(st.one_of(st.sampled_from(_SHAPER_CORPUS), generated_texts()))
    if draw(st.booleans()):
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    return text


def assert_shaping_is_chunking_independent(text: str, chunks: list[str], needs: bool) -> None:
    whole, whole_shaper = shape([text], needs_leading_marker=needs)
    forwarded, shaper = shape(chunks, needs_leading_marker=needs)
    assert forwarded == whole
    assert shaper.kept_text == forwarded
    assert whole_shaper.kept_text == whole
    assert (shaper.cut, shaper.cut_reason) == (whole_shaper.cut, whole_shaper.cut_reason)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_forwarded_text_is_the_same_for_every_chunking(data: st.DataObject) -> None:
    text = data.draw(shaper_inputs())
    chunks = data.draw(chunkings(text))
    needs = data.draw(st.booleans())
    assert_shaping_is_chunking_independent(text, chunks, needs)


def test_every_shaper_corpus_text_fed_one_char_at_a_time() -> None:
    for text in _SHAPER_CORPUS:
        for needs in (False, True):
            assert_shaping_is_chunking_independent(text, list(text), needs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_shaper_holds_back_at_most_the_current_line(data: st.DataObject) -> None:
    # Without needs_leading_marker nothing is rewritten: forwarded text is a
    # prefix of what was fed, short of at most the unfinished last line and,
    # before it, a fence line (scaffolding or code?) and blank lines.
    text = data.draw(shaper_inputs())
    chunks = data.draw(chunkings(text))
    shaper = StepShaper()
    fed = forwarded = ""
    for chunk in chunks:
        fed += chunk
        forwarded += shaper.feed(chunk)
        assert fed.startswith(forwarded)
        if not shaper.cut:
            *held_lines, _ = fed[len(forwarded) :].split("\n")
            if held_lines:
                assert is_fence(held_lines[0]), held_lines
                assert all(not line.strip() for line in held_lines[1:]), held_lines
    forwarded += shaper.finish()
    assert text.startswith(forwarded)
    if not shaper.cut:
        assert forwarded == text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shaper_inputs(), st.booleans())
def test_what_the_shaper_keeps_parses_into_a_believable_step(text: str, needs: bool) -> None:
    # The engine's parser reads the forwarded text: it must find no invented
    # Observation, no protocol after the answer, and no answer after an action.
    forwarded, _ = shape([text], needs_leading_marker=needs)
    kinds = [kind for kind, _ in parse(forwarded)]
    assert T.OBSERVATION not in kinds
    if any(kind.is_closing for kind in kinds):
        first_closing = next(i for i, kind in enumerate(kinds) if kind.is_closing)
        after = kinds[first_closing + 1 :]
        assert not {T.THOUGHT, T.ACTION, T.ACTION_INPUT} & set(after), kinds
        assert T.ACTION not in kinds[:first_closing], kinds


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shaper_inputs())
def test_step_after_an_observation_is_never_glued_to_it(text: str) -> None:
    # What the engine's raw stream shows: its Observation line, then the step.
    forwarded, _ = shape([text], needs_leading_marker=True)
    parser = ReActStreamParser()
    parser.feed("Observation: tool output\n" + forwarded)
    parser.flush()
    assert parser.blocks[0].type is T.OBSERVATION
    assert parser.blocks[0].content == "tool output"


@settings(max_examples=120, deadline=None)
@given(generated_texts(), st.booleans())
def test_crlf_is_shaped_like_lf(text: str, needs: bool) -> None:
    lf, lf_shaper = shape([text], needs_leading_marker=needs)
    crlf, crlf_shaper = shape([text.replace("\n", "\r\n")], needs_leading_marker=needs)
    # Same text modulo line endings (a marker added at finish may use "\n").
    assert crlf.replace("\r\n", "\n") == lf
    assert (crlf_shaper.cut, crlf_shaper.cut_reason) == (lf_shaper.cut, lf_shaper.cut_reason)
