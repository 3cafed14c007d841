"""ReActStreamParser: segmentation of a raw ReAct stream into typed blocks.

The property tests check the invariant of the parser's docstring: whatever the
chunking of the input, ``feed()``* + ``flush()`` give the blocks that feeding
the whole text at once gives, and each block is returned exactly once. The
example tests pin one quirk of real model output each.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.stream_parser import ReActStreamParser
from engine.types import ReActBlock, ReActType

T = ReActType


def parse(text: str) -> list[tuple[ReActType, str]]:
    parser = ReActStreamParser()
    parser.feed(text)
    parser.flush()
    return [(b.type, b.content) for b in parser.blocks]


def parse_chunked(chunks: list[str]) -> tuple[list[ReActBlock], ReActStreamParser]:
    """Feed ``chunks`` one by one; return the blocks returned by the calls, in order."""
    parser = ReActStreamParser()
    returned: list[ReActBlock] = []
    for chunk in chunks:
        returned.extend(parser.feed(chunk))
        _ = parser.current  # the live view must never raise mid-stream
    returned.extend(parser.flush())
    return returned, parser


def split_at(text: str, cuts: list[int]) -> list[str]:
    points = [0, *sorted(set(cuts)), len(text)]
    return [text[a:b] for a, b in zip(points, points[1:], strict=False)]


# --- corpus of realistic outputs ---------------------------------------------

CORPUS = [
    # llama-index's own ReAct format, tool step.
    'Thought: I need to use a tool.\nAction: search\nAction Input: {"query": "weather"}\n',
    # The seed's example flow, engine-written Observation included.
    "Thought: I need to search.\nAction: search[weather]\nObservation: It's raining.\n"
    "Final Answer: Bring an umbrella.",
    # French model, spaces before colons, accents.
    "Pensée : je dois chercher.\nAction : recherche\nEntrée de l'action : "
    '{"q": "météo"}\nObservation : il pleut\nRéponse : Prenez un parapluie ☔.',
    # Mistral-style bold markers and headings.
    "**Thought:** I can answer.\n\n### Answer\nThe capital is **Paris**.\n",
    '**Thought**: hmm\n**Action**: calculate\n**Action Input**: {"expression": "2*3"}',
    "## Réponse finale\nVoici la réponse.\n\nConclusion: c'est tout.",
    # The whole protocol wrapped in a code fence.
    '```\nThought: x\nAction: calc\nAction Input: {"e": "1+1"}\n```\n',
    "```text\nThought: t\nAnswer: a\n```",
    "~~~\nThought: t\n~~~\n",
    # ```json fence around the Action Input.
    'Thought: t\nAction: s\nAction Input:\n```json\n{\n  "q": 1\n}\n```\n',
    'Action: s\nAction Input: ```json\n{"q": 1}\n```\nObservation: ok\nAnswer: done',
    # A code block inside the answer, with marker-looking lines.
    "Thought: I can answer.\nAnswer: Use this format:\n```\nThought: ...\nAction: ...\n"
    "Observation: ...\n```\nThat's it.",
    "Answer: example\n```python\nprint('Action: x')\n```\n```\nAnswer: nested\n```\nend",
    # CRLF line endings (Windows-hosted servers).
    "Thought: crlf\r\nAction: s\r\nAction Input: {}\r\nObservation: \r\nAnswer: ok\r\n",
    "```\r\nThought: t\r\nAnswer: a\r\n```\r\n",
    # Empty lines everywhere.
    "\n\nThought: a\n\n\nAction: b\n\nAction Input: {}\n\n",
    # No marker at all: a plain answer.
    "Bonjour ! Comment puis-je vous aider ?",
    "Line one\nline two\n\nThe answer: 42 is in the middle of a line.",
    # Preamble, then markers.
    "Sure, let me check.\nAction: search\nAction Input: {}",
    # Protocol after the answer, and closing markers inside it.
    "Answer: yes\nConclusion: still the answer\nThought: new block\nAnswer: again",
    # Unicode, emoji, full-width colon.
    "Thought：日本語のテキスト 🎌\nAnswer: 東京 ✓",
    # Empty Observation block between two thoughts.
    "Thought: a\nObservation:\nThought: b\nAnswer: c",
    # Tool-call style.
    'Tool call: search\nTool result: {"hits": 0}\nResponse: nothing found',
    "",
    "\n",
    "```",
    "Thought: unterminated fence\n```\nAction: x",
]


@st.composite
def chunkings(draw: st.DrawFn, text: str) -> list[str]:
    """A chunking of ``text``: 1-char pieces, random cuts, or cuts inside every "\\r\\n"."""
    if not text:
        return [text]
    mode = draw(st.sampled_from(["chars", "random", "crlf"]))
    if mode == "chars":
        return list(text)
    cuts = draw(st.lists(st.integers(1, len(text) - 1) if len(text) > 1 else st.just(0)))
    if mode == "crlf":
        cuts += [i + 1 for i, ch in enumerate(text) if ch == "\r"]
    return split_at(text, cuts)


def assert_chunking_invariant(text: str, chunks: list[str]) -> None:
    assert "".join(chunks) == text
    whole = ReActStreamParser()
    whole_returned = whole.feed(text) + whole.flush()
    returned, parser = parse_chunked(chunks)
    assert parser.blocks == whole.blocks
    # Every block returned exactly once, in order: nothing lost, nothing twice.
    assert returned == parser.blocks
    assert whole_returned == whole.blocks


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_chunking_gives_the_same_blocks_on_the_corpus(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(CORPUS))
    chunks = data.draw(chunkings(text))
    assert_chunking_invariant(text, chunks)


def test_every_corpus_text_fed_one_char_at_a_time() -> None:
    # Deterministic backstop for the property test: every text, 1-char chunks.
    for text in CORPUS:
        assert_chunking_invariant(text, list(text))


_MARKER_WORDS = [
    "Thought",
    "Action",
    "Action Input",
    "Observation",
    "Answer",
    "Final Answer",
    "Response",
    "Conclusion",
    "Pensée",
    "Réponse",
    "Réponse finale",
    "thought",
    "ANSWER",
]


@st.composite
def marker_lines(draw: st.DrawFn) -> str:
    word = draw(st.sampled_from(_MARKER_WORDS))
    style = draw(
        st.sampled_from(
            ["{w}:", "**{w}:**", "**{w}**:", "### {w}", "{w} :", "## {w}:", "{w}" + " " * 45 + ":"]
        )
    )
    rest = draw(st.sampled_from(["", " x", " some text", " {}", ' {"a": 1}', " ```json"]))
    return style.format(w=word) + rest


_TEXT_LINES = st.one_of(
    st.sampled_from(
        [
            "",
            "plain text",
            "The answer: 42",
            "Actionable items: none",
            "Observations show rain",
            "```",
            "```json",
            "``` ",
            "~~~",
            "Reſponse: look-alike",
            '{"q": 1}',
            "  indented",
            "Ré sumé — ✓",
            "Act",
            "###",
            "**",
        ]
    ),
    st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=12),
)


@st.composite
def generated_texts(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.one_of(marker_lines(), _TEXT_LINES), max_size=12))
    text = "\n".join(lines)
    if draw(st.booleans()):
        text += "\n"
    return text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_chunking_gives_the_same_blocks_on_generated_texts(data: st.DataObject) -> None:
    text = data.draw(generated_texts())
    if data.draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    chunks = data.draw(chunkings(text))
    assert_chunking_invariant(text, chunks)


@settings(max_examples=150, deadline=None)
@given(generated_texts())
def test_crlf_gives_the_same_blocks_as_lf_and_blocks_are_clean(text: str) -> None:
    blocks = parse(text)
    assert parse(text.replace("\n", "\r\n")) == blocks
    for kind, content in blocks:
        assert kind is not T.UNKNOWN  # UNKNOWN is for the live view only
        assert content == content.strip()


# --- marker variants -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Any case (small models shout or whisper the markers).
        ("THOUGHT: a\nanswer: b", [(T.THOUGHT, "a"), (T.ANSWER, "b")]),
        # Mistral: bold markers, colon inside or outside the bold.
        ("**Thought:** a\n**Answer**: b", [(T.THOUGHT, "a"), (T.ANSWER, "b")]),
        # Markdown heading without colon, content on the next lines.
        (
            "Thought: a\n### Answer\nline 1\nline 2",
            [(T.THOUGHT, "a"), (T.ANSWER, "line 1\nline 2")],
        ),
        ("## Réponse finale\nOui.", [(T.FINAL_ANSWER, "Oui.")]),
        # French models, with the French typographic space before the colon.
        ("Pensée : je sais.\nRéponse : Paris.", [(T.THOUGHT, "je sais."), (T.ANSWER, "Paris.")]),
        ("Final Answer: 42", [(T.FINAL_ANSWER, "42")]),
        ("Response: 42", [(T.RESPONSE, "42")]),
        ("Conclusion: 42", [(T.CONCLUSION, "42")]),
        # Action Input spellings.
        (
            "Action: s\nAction_Input: {}\nAction: t\naction-input: []\nAction: u\n"
            "**Action Input:** {}\nAction: v\nEntrée de l'action : {}",
            [
                (T.ACTION, "s"),
                (T.ACTION_INPUT, "{}"),
                (T.ACTION, "t"),
                (T.ACTION_INPUT, "[]"),
                (T.ACTION, "u"),
                (T.ACTION_INPUT, "{}"),
                (T.ACTION, "v"),
                (T.ACTION_INPUT, "{}"),
            ],
        ),
        # Multi-line Action Input (pretty-printed JSON).
        (
            'Action: s\nAction Input: {\n  "q": 1\n}',
            [(T.ACTION, "s"), (T.ACTION_INPUT, '{\n  "q": 1\n}')],
        ),
    ],
)
def test_marker_variants(text: str, expected: list[tuple[ReActType, str]]) -> None:
    assert parse(text) == expected


def test_text_before_the_first_marker_is_a_thought() -> None:
    # Models often start with a sentence before "Action:" without "Thought:".
    assert parse("Let me look that up.\nAction: search\nAction Input: {}") == [
        (T.THOUGHT, "Let me look that up."),
        (T.ACTION, "search"),
        (T.ACTION_INPUT, "{}"),
    ]


def test_text_before_a_closing_marker_is_a_thought_too() -> None:
    assert parse("Easy one.\nAnswer: 4") == [(T.THOUGHT, "Easy one."), (T.ANSWER, "4")]


def test_plain_text_without_markers_is_an_answer() -> None:
    # Chatty models skip the protocol entirely when they can answer directly.
    assert parse("Bonjour !\n\nJe vais bien, merci.") == [
        (T.ANSWER, "Bonjour !\n\nJe vais bien, merci.")
    ]


def test_empty_stream_gives_no_block() -> None:
    assert parse("") == []
    assert parse("\n\n  \n") == []


def test_whole_output_wrapped_in_fences() -> None:
    # Some models put the whole ReAct step in a code block.
    expected = [(T.THOUGHT, "t"), (T.ACTION, "s"), (T.ACTION_INPUT, "{}")]
    assert parse("```\nThought: t\nAction: s\nAction Input: {}\n```") == expected
    assert parse("```text\n\nThought: t\nAction: s\nAction Input: {}\n\n```\n") == expected
    assert parse("~~~\nThought: t\nAction: s\nAction Input: {}\n~~~") == expected
    assert parse("```\nThought: t\nAnswer: a\n```") == [(T.THOUGHT, "t"), (T.ANSWER, "a")]


def test_json_fence_around_the_action_input_stays_in_the_input() -> None:
    # "Action Input:" then a ```json block: the agent's parser strips the fence.
    text = 'Action: s\nAction Input:\n```json\n{"q": 1}\n```\nObservation: r'
    assert parse(text) == [
        (T.ACTION, "s"),
        (T.ACTION_INPUT, '```json\n{"q": 1}\n```'),
        (T.OBSERVATION, "r"),
    ]


def test_fence_opened_on_the_marker_line_is_a_code_block() -> None:
    # "Action Input: ```json" on one line; the closing fence is not scaffolding,
    # so a later answer's code block followed by the end is kept whole.
    text = (
        'Action: s\nAction Input: ```json\n{"q": 1}\n```\nObservation: r\n'
        "Answer: see\n```\nx = 1\n```"
    )
    assert parse(text) == [
        (T.ACTION, "s"),
        (T.ACTION_INPUT, '```json\n{"q": 1}\n```'),
        (T.OBSERVATION, "r"),
        (T.ANSWER, "see\n```\nx = 1\n```"),
    ]
    assert parse("Answer: ```python\nprint(1)\n```\nThought: after") == [
        (T.ANSWER, "```python\nprint(1)\n```"),
        (T.THOUGHT, "after"),
    ]


def test_code_block_inside_an_answer_is_not_split() -> None:
    # The model explains the ReAct format to the user in its answer.
    text = "Answer: The format is:\n```\nThought: ...\nAction: ...\nObservation: ...\n```\nDone."
    assert parse(text) == [
        (T.ANSWER, "The format is:\n```\nThought: ...\nAction: ...\nObservation: ...\n```\nDone.")
    ]


def test_code_block_inside_a_thought_is_kept() -> None:
    text = "Thought: I will compute\n```python\nx = 1\n```\nAnswer: 1"
    assert parse(text) == [(T.THOUGHT, "I will compute\n```python\nx = 1\n```"), (T.ANSWER, "1")]


def test_conclusion_line_inside_an_answer_stays_in_the_answer() -> None:
    # Answers often end with "Conclusion: ..." or "Réponse : ..." as prose.
    assert parse("Answer: Paris.\nConclusion: c'est la capitale.\nFinal Answer: Paris") == [
        (T.ANSWER, "Paris.\nConclusion: c'est la capitale.\nFinal Answer: Paris")
    ]


def test_thought_after_an_answer_starts_a_new_block() -> None:
    # Without stop sequences the model goes on after answering.
    assert parse("Answer: a\nThought: more\nAction: s") == [
        (T.ANSWER, "a"),
        (T.THOUGHT, "more"),
        (T.ACTION, "s"),
    ]


def test_empty_observation_block_is_kept() -> None:
    # A tool that returned nothing: the Finalizer must see the empty observation.
    assert parse("Action: s\nAction Input: {}\nObservation:\nThought: nothing") == [
        (T.ACTION, "s"),
        (T.ACTION_INPUT, "{}"),
        (T.OBSERVATION, ""),
        (T.THOUGHT, "nothing"),
    ]


def test_crlf_line_endings() -> None:
    assert parse("Thought: a\r\n### Answer\r\nb\r\nc\r\n") == [(T.THOUGHT, "a"), (T.ANSWER, "b\nc")]


def test_marker_split_across_chunks() -> None:
    returned, parser = parse_chunked(["Thought: a\nAct", "ion", ": s\nAction In", "put: {}"])
    assert [(b.type, b.content) for b in returned] == [
        (T.THOUGHT, "a"),
        (T.ACTION, "s"),
        (T.ACTION_INPUT, "{}"),
    ]


def test_feed_returns_a_block_when_the_next_marker_line_completes() -> None:
    parser = ReActStreamParser()
    assert parser.feed("Thought: a\n") == []
    assert parser.feed("Action: s") == []  # line not complete yet
    assert parser.feed("\n") == [ReActBlock(T.THOUGHT, "a")]
    assert parser.flush() == [ReActBlock(T.ACTION, "s")]


# --- has_final_answer / get_final_answer ------------------------------------------


def test_final_answer_accessors() -> None:
    parser = ReActStreamParser()
    parser.feed("Thought: a\nAction: s\n")
    assert not parser.has_final_answer()
    assert parser.get_final_answer() is None
    parser.feed("Observation: r\nAnswer: first\nThought: x\nConclusion: second\n")
    parser.flush()
    assert parser.has_final_answer()
    assert parser.get_final_answer() == "second"  # the last closing block


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Final Answer: x", "x"),
        ("Answer: x", "x"),
        ("Response: x", "x"),
        ("Conclusion: x", "x"),
        ("plain x", "plain x"),
    ],
)
def test_every_closing_type_counts_as_final(text: str, answer: str) -> None:
    parser = ReActStreamParser()
    parser.feed(text)
    parser.flush()
    assert parser.has_final_answer()
    assert parser.get_final_answer() == answer


def test_final_answer_not_seen_until_its_block_is_complete() -> None:
    parser = ReActStreamParser()
    parser.feed("Thought: a\nAnswer: b")
    assert not parser.has_final_answer()  # the answer may still grow
    parser.flush()
    assert parser.get_final_answer() == "b"


# --- current: the live view -----------------------------------------------------


def test_current_is_none_before_anything_and_unknown_while_undecided() -> None:
    parser = ReActStreamParser()
    assert parser.current is None
    parser.feed("Some text")
    # Preamble: a thought if a marker follows, else the answer; not known yet.
    assert parser.current == ReActBlock(T.UNKNOWN, "Some text")
    parser.feed(" more\nAction: s\n")
    assert parser.current == ReActBlock(T.ACTION, "s")


def test_current_hides_a_partial_marker() -> None:
    parser = ReActStreamParser()
    parser.feed("Thought: a\nAct")
    assert parser.current == ReActBlock(T.THOUGHT, "a")  # "Act" not shown
    parser.feed("ion: sea")
    # A partial line that already is a marker shows its new block at once.
    assert parser.current == ReActBlock(T.ACTION, "sea")
    parser.feed("rch\nAction Input: {")
    assert parser.current == ReActBlock(T.ACTION_INPUT, "{")


def test_current_shows_text_as_it_streams() -> None:
    parser = ReActStreamParser()
    parser.feed("Thought: I am thinking about")
    assert parser.current == ReActBlock(T.THOUGHT, "I am thinking about")
    parser.feed(" it\nsecond line, partial")
    assert parser.current == ReActBlock(T.THOUGHT, "I am thinking about it\nsecond line, partial")


def test_current_hides_a_fence_until_it_is_known_to_be_scaffolding_or_code() -> None:
    parser = ReActStreamParser()
    parser.feed("```\n")
    assert parser.current is None  # may be scaffolding around the protocol
    parser.feed("Thought: t\n")
    assert parser.current == ReActBlock(T.THOUGHT, "t")
    parser2 = ReActStreamParser()
    parser2.feed("Answer: code:\n```\n")
    assert parser2.current == ReActBlock(T.ANSWER, "code:")
    parser2.feed("x = 1")
    assert parser2.current == ReActBlock(T.ANSWER, "code:\n```\nx = 1")


def test_current_keeps_closing_marker_lines_inside_an_answer() -> None:
    parser = ReActStreamParser()
    parser.feed("Answer: yes\nConclusion: still")
    assert parser.current == ReActBlock(T.ANSWER, "yes\nConclusion: still")


def test_current_inside_a_code_block_shows_marker_looking_text() -> None:
    parser = ReActStreamParser()
    parser.feed("Answer: x\n```\nline\nThought: in code")
    assert parser.current == ReActBlock(T.ANSWER, "x\n```\nline\nThought: in code")


def test_current_is_none_after_flush() -> None:
    parser = ReActStreamParser()
    parser.feed("Answer: x")
    parser.flush()
    assert parser.current is None


def test_feed_after_flush_raises() -> None:
    parser = ReActStreamParser()
    parser.feed("Answer: x")
    assert parser.flush() == [ReActBlock(T.ANSWER, "x")]
    assert parser.flush() == []  # idempotent
    with pytest.raises(RuntimeError):
        parser.feed("more")


def test_blocks_returns_a_copy() -> None:
    parser = ReActStreamParser()
    parser.feed("Answer: x")
    parser.flush()
    parser.blocks.clear()
    assert parser.blocks == [ReActBlock(T.ANSWER, "x")]
