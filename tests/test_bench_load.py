"""The load benchmark's own judgement: what its scripted model answers, and what it calls a
leak between sessions (a checker that cannot fail would report isolation it never saw)."""

from __future__ import annotations

from llama_index.core.llms import ChatMessage, MessageRole

from bench.load import _isolation
from bench.paced_llm import answer_for

FACTS = ["FAIT-ALPHA", "FAIT-BETA"]


def _page(session: int, turns: int, fact: str) -> str:
    return "\n".join(
        f"Question S{session}Q{t}\nDEBUT-S{session}Q{t} {fact} mot FIN-S{session}Q{t}."
        for t in range(turns)
    )


def test_a_clean_page_has_no_problem() -> None:
    assert _isolation(_page(3, 2, "FAIT-BETA"), 3, [0, 1], "FAIT-BETA", FACTS) == []


def test_another_sessions_question_is_a_leak() -> None:
    text = _page(3, 2, "FAIT-BETA") + "\nQuestion S5Q0"
    assert _isolation(text, 3, [0, 1], "FAIT-BETA", FACTS) == [
        "S3: shows sessions ['5']'s questions"
    ]


def test_another_themes_fact_and_a_missing_answer_are_reported() -> None:
    text = _page(1, 1, "FAIT-ALPHA FAIT-BETA")
    problems = _isolation(text, 1, [0, 1], "FAIT-ALPHA", FACTS)
    assert "S1: shows another theme's fact FAIT-BETA" in problems
    assert "S1: its answer 1 is missing" in problems


def test_the_model_answers_the_current_question_with_the_facts_it_was_shown() -> None:
    messages = [
        ChatMessage(role=MessageRole.SYSTEM, content="Réponds."),
        ChatMessage(role=MessageRole.USER, content="Question S2Q0 ?"),
        ChatMessage(role=MessageRole.ASSISTANT, content="DEBUT-S2Q0 AUCUN FIN-S2Q0."),
        ChatMessage(role=MessageRole.USER, content="Question S2Q1 ?"),
        ChatMessage(role=MessageRole.USER, content="Observation: le code est FAIT-BETA."),
    ]
    answer = answer_for(messages)
    assert answer.startswith("Thought: ")
    assert "Answer: DEBUT-S2Q1 FAIT-BETA " in answer
    assert answer.endswith("FIN-S2Q1.")


def test_the_report_rows_of_a_load_run_and_a_zero_target_without_ratio() -> None:
    from bench.report import _load, markdown

    run = {
        "backend": "embedded",
        "sessions": 8,
        "isolation_problems": ["S1: shows sessions ['2']'s questions"],
        "interrupted_turns": 0,
        "questions_dropped": [],
        "rss_per_added_session_mb": 12.0,
        "first_token_p95_s": 4.0,
        "targets": {"rss_per_added_session_mb_max": 50, "first_token_p95_s_max": 3.0},
    }
    rows = {row.metric: row for row in _load({"runs": [run]})}
    assert not rows["isolation problems"].met and rows["turns interrupted"].met
    assert rows["RSS per added session (MB)"].met and not rows["first token p95 (s)"].met
    table = markdown(list(rows.values()), {}, {})
    assert "| load (embedded, 8 sessions) | isolation problems | 1 | ≤ 0 | — | **no** |" in table
