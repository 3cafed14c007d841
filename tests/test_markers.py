"""Marker recognition: ``match_marker``, ``is_fence`` and ``classify_partial_line``.

The three must agree with each other: the stream parser decides on complete
lines (``match_marker``) while the step shaper decides on line starts
(``classify_partial_line``), and a line start classified TEXT or MARKER must
never turn out otherwise once the line is complete.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.markers import PartialLine, classify_partial_line, is_fence, match_marker
from engine.types import ReActType

T = ReActType

# (line, expected (type, rest)); each row mirrors a variant seen in real model output.
MARKER_LINES: list[tuple[str, tuple[ReActType, str]]] = [
    ("Thought: I need the weather.", (T.THOUGHT, "I need the weather.")),
    ("thought: lower case", (T.THOUGHT, "lower case")),  # small models
    ("THOUGHT: upper case", (T.THOUGHT, "upper case")),
    ("**Thought:** bold with colon inside", (T.THOUGHT, "bold with colon inside")),  # Mistral
    ("**Thought**: bold with colon outside", (T.THOUGHT, "bold with colon outside")),
    ("*Thought*: italic", (T.THOUGHT, "italic")),
    ("__Action__: search", (T.ACTION, "search")),
    ("  Thought: indented", (T.THOUGHT, "indented")),
    ("> Thought: quoted", (T.THOUGHT, "quoted")),
    ("Thought：full-width colon", (T.THOUGHT, "full-width colon")),  # CJK-trained models
    ("Thought   : spaces before the colon", (T.THOUGHT, "spaces before the colon")),
    ("Thought:", (T.THOUGHT, "")),
    ("Thought: x\r", (T.THOUGHT, "x")),  # CRLF line ending
    ("Pensée : je cherche", (T.THOUGHT, "je cherche")),  # French models
    ("Pensee: sans accent", (T.THOUGHT, "sans accent")),
    ("Réflexion : hmm", (T.THOUGHT, "hmm")),
    ("Raisonnement : donc", (T.THOUGHT, "donc")),
    ("Action: search", (T.ACTION, "search")),
    ("**Action**: search", (T.ACTION, "search")),
    ("Action Input: {}", (T.ACTION_INPUT, "{}")),
    ('action input: {"q": 1}', (T.ACTION_INPUT, '{"q": 1}')),
    ("Action_Input: {}", (T.ACTION_INPUT, "{}")),
    ("Action-Input: {}", (T.ACTION_INPUT, "{}")),
    ("**Action Input:** {}", (T.ACTION_INPUT, "{}")),
    ("Action Input:", (T.ACTION_INPUT, "")),
    ("Entrée de l'action : {}", (T.ACTION_INPUT, "{}")),
    ("Observation: 42", (T.OBSERVATION, "42")),
    ("Observation:", (T.OBSERVATION, "")),
    ("Answer: 42", (T.ANSWER, "42")),
    ("### Answer", (T.ANSWER, "")),  # markdown heading, no colon
    ("### Answer: 42", (T.ANSWER, "42")),
    ("### **Answer**", (T.ANSWER, "")),
    ("### Answer\r", (T.ANSWER, "")),  # heading with CRLF
    ("Réponse : oui", (T.ANSWER, "oui")),
    ("Reponse: oui", (T.ANSWER, "oui")),
    ("RÉPONSE : majuscules", (T.ANSWER, "majuscules")),
    ("Final Answer: 42", (T.FINAL_ANSWER, "42")),  # classic LangChain format
    ("## Final Answer", (T.FINAL_ANSWER, "")),
    ("Final Response: 42", (T.FINAL_ANSWER, "42")),
    ("## Réponse finale", (T.FINAL_ANSWER, "")),
    ("Réponse finale : 42", (T.FINAL_ANSWER, "42")),
    ("Response: 42", (T.RESPONSE, "42")),
    ("Conclusion: done", (T.CONCLUSION, "done")),
    ("Tool call: search", (T.TOOL_CALL, "search")),
    ("Tool result: 42", (T.TOOL_RESULT, "42")),
]


@pytest.mark.parametrize(("line", "expected"), MARKER_LINES)
def test_match_marker_recognises_variants(line: str, expected: tuple[ReActType, str]) -> None:
    assert match_marker(line) == expected


NOT_MARKERS = [
    "The answer: 42",  # mid-line "answer:" in prose
    "In conclusion: we are done",
    "Actionable items: buy milk",  # a word that starts with a marker word
    "Observations show a trend",
    "Thoughts: many",
    "Answers: see below",
    "Réponses : plusieurs",
    "Thoughtful: yes",
    "Thought",  # bare word, neither a colon nor a heading
    "Answer",
    "### Answers to the FAQ",
    "#### Thought process",
    "####### Answer",  # seven hashes is not a markdown heading
    "- Thought: a list item",
    "1. Answer: a numbered item",
    "`Thought: x`",
    "Thought - no colon",
    "",
    "   ",
    "Reſponse: look-alike long s",  # matched by IGNORECASE, not a key: no KeyError
    "Observatıon: dotless i",
    "ACTİON: dotted capital I",
]


@pytest.mark.parametrize("line", NOT_MARKERS)
def test_match_marker_rejects_non_markers(line: str) -> None:
    assert match_marker(line) is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("```", True),
        ("```json", True),
        ("```python", True),
        ("~~~", True),
        ("  ```  ", True),
        ("```\r", True),  # CRLF
        ("```c++", True),
        ("``", False),
        ("````", False),
        ("``` json", False),
        ("```python title='x'", False),
        ("code ```", False),
        ("", False),
    ],
)
def test_is_fence(line: str, expected: bool) -> None:
    assert is_fence(line) is expected


@pytest.mark.parametrize(
    ("partial", "expected"),
    [
        # A complete marker prefix: the line is a marker whatever follows.
        ("Action:", PartialLine.MARKER),
        ("Action: sea", PartialLine.MARKER),
        ("**Thought:**", PartialLine.MARKER),
        ("Réponse :", PartialLine.MARKER),
        ("Thought：", PartialLine.MARKER),
        ("Action Input: {", PartialLine.MARKER),
        ("Thought: x\r", PartialLine.MARKER),
        # Could still become a marker (or a fence).
        ("", PartialLine.MAYBE),
        ("  ", PartialLine.MAYBE),
        ("#", PartialLine.MAYBE),
        ("### ", PartialLine.MAYBE),
        ("**", PartialLine.MAYBE),
        ("Act", PartialLine.MAYBE),
        ("Action", PartialLine.MAYBE),
        ("Action ", PartialLine.MAYBE),
        ("Action I", PartialLine.MAYBE),
        ("**Obs", PartialLine.MAYBE),
        ("Final Ans", PartialLine.MAYBE),
        ("Réponse fin", PartialLine.MAYBE),
        ("RÉPON", PartialLine.MAYBE),
        ("Entrée de l'", PartialLine.MAYBE),
        ("Thought**", PartialLine.MAYBE),
        ("### Answer", PartialLine.MAYBE),  # heading alone, or "### Answer: ..."
        ("Thought" + " " * 60, PartialLine.MAYBE),  # unbounded spaces before the colon
        ("Obs\r", PartialLine.MAYBE),  # "\r" may be half of "\r\n"
        ("### Answer\r", PartialLine.MAYBE),
        ("`", PartialLine.MAYBE),
        ("```", PartialLine.MAYBE),
        ("```js", PartialLine.MAYBE),
        ("``` ", PartialLine.MAYBE),  # "``` " + newline is a fence line
        ("~~", PartialLine.MAYBE),
        # Can no longer be a marker or a fence.
        ("The answer", PartialLine.TEXT),
        ("Hello", PartialLine.TEXT),
        ("Actionable", PartialLine.TEXT),
        ("Observations", PartialLine.TEXT),
        ("Answers", PartialLine.TEXT),
        ("Thought x", PartialLine.TEXT),
        ("### Answers to", PartialLine.TEXT),
        ("- Thought", PartialLine.TEXT),
        ("```python title", PartialLine.TEXT),
        ("x```", PartialLine.TEXT),
        ("Reſp", PartialLine.TEXT),
        ("hello\r", PartialLine.TEXT),
    ],
)
def test_classify_partial_line(partial: str, expected: PartialLine) -> None:
    assert classify_partial_line(partial) is expected


# --- soundness of classify_partial_line against match_marker/is_fence ---------

_WORDS = [
    "Thought",
    "thought",
    "Action",
    "Action Input",
    "action_input",
    "Observation",
    "Answer",
    "Final Answer",
    "Réponse finale",
    "Réponse",
    "RÉPONSE",
    "Pensée",
    "Conclusion",
    "Response",
    "Entrée de l'action",
    "Reſponse",  # look-alikes that IGNORECASE matches
    "Observatıon",
]
_STRUCTURED_LINES = st.tuples(
    st.sampled_from(["", " ", "\t", "#", "### ", "**", "> ", "_", "####### ", "- ", "`"]),
    st.sampled_from(_WORDS),
    st.sampled_from(["", "*", "**", " ", "s", "able", " x"]),
    st.sampled_from(["", ":", " :", "：", " " * 45 + ":", "\r"]),
    st.sampled_from(["", " x", " ```json", "\r", " \r", "**", " **x**"]),
).map("".join)
_FENCE_LIKE_LINES = st.tuples(
    st.sampled_from(["", " ", "\t"]),
    st.sampled_from(["`", "``", "```", "````", "~~", "~~~"]),
    st.sampled_from(["", "json", "c++", " json", "py thon"]),
    st.sampled_from(["", " ", "  ", "\t", "\r", " \r", " x"]),
).map("".join)
_PIECES = st.sampled_from(
    [*_WORDS, ":", "：", " ", "  ", "\t", "*", "**", "_", "#", "### ", ">", "`", "```", "~~~"]
    + ["json", "able", "s", "x", "é", "\r", "-", "1."]
)
_LINES = st.one_of(
    _STRUCTURED_LINES, _FENCE_LIKE_LINES, st.lists(_PIECES, min_size=1, max_size=8).map("".join)
)


@settings(max_examples=400, deadline=None)
@given(_LINES)
def test_partial_classification_never_contradicts_the_complete_line(line: str) -> None:
    full = match_marker(line)
    for cut in range(len(line) + 1):
        state = classify_partial_line(line[:cut])
        if state is PartialLine.TEXT:
            assert full is None, (line[:cut], line)
            assert not is_fence(line), (line[:cut], line)
        elif state is PartialLine.MARKER:
            assert full is not None, (line[:cut], line)
            start = match_marker(line[:cut])
            assert start is not None and start[0] is full[0], (line[:cut], line)


def test_complete_marker_line_is_classified_marker_or_maybe() -> None:
    # A complete line that is a marker is never classified TEXT as a partial.
    for line, _ in MARKER_LINES:
        assert classify_partial_line(line) is not PartialLine.TEXT, line
