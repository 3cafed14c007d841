"""The compact prompt profile for small in-process models, on scripted models.

What the embedded 1.5B model needed (measured on the answer benchmark, see
``engine/compact.py``): one narrow intent question first, then a step that
sees either the documents found for the question (and no tool) or the few
tools the intent calls for; a grammar on every step; after a tool's result,
an Answer. These tests pin that plumbing; ``bench/answers.py`` measures the
real model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.react.types import ActionReasoningStep, ObservationReasoningStep
from llama_index.core.llms import ChatMessage, MessageRole

from engine import ReActEngine, StopReason
from engine.budget import TokenBudget, estimate_tokens, fit_prompt
from engine.compact import (
    CompactReActFormatter,
    compact_header,
    documents_prompt_start,
    react_grammar,
    tool_line,
)
from engine.intent import Intent, choose_date_tool, classify_intent, intent_messages, plausible
from engine.prompts import Language
from engine.tool_calls import drop_invented_numbers
from engine.tools.general import GeneralToolKit
from models.errors import ContextOverflowError
from models.inprocess import is_in_process
from tests.fakes import ScriptedLLM, ScriptedLocalLLM
from tests.test_engine_corpus import corpus_config
from tests.test_theme_rag import THEME_PROMPT, make_theme, minilm  # noqa: F401 - fixture

GENERAL = {t.metadata.get_name(): t for t in GeneralToolKit().tools()}


def engine_with(llm: Any, embed_model: Any = None, **config: Any) -> ReActEngine:
    return ReActEngine(config=corpus_config(**config), llm=llm, embed_model=embed_model)


async def consume(engine: ReActEngine, prompt: str) -> str:
    return "".join([delta async for delta in engine.stream(prompt)])


# --- which profile ----------------------------------------------------------------------------


def test_compact_is_the_default_for_an_in_process_model_only() -> None:
    local = engine_with(ScriptedLocalLLM([]))
    local.start(language="fr")
    remote = engine_with(ScriptedLLM([]))
    remote.start(language="fr")
    assert is_in_process(local._llm) and local._compact
    assert not is_in_process(remote._llm) and not remote._compact
    forced = engine_with(ScriptedLLM([]), prompt_profile="compact")
    forced.start(language="fr")
    full = engine_with(ScriptedLocalLLM([]), prompt_profile="full")
    full.start(language="fr")
    assert forced._compact and not full._compact


# --- intent --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "question", "kept"),
    [
        # Seen on the eval set: "Combien de chunks ... renvoie-t-il ?" called a calculation.
        (Intent.CALCULATION, "Combien de chunks search_project_docs renvoie-t-il ?", Intent.OTHER),
        (Intent.CALCULATION, "Combien font 15 % de 2 340 € ?", Intent.CALCULATION),
        (Intent.DATE, "Quelle est la procédure de congé ?", Intent.OTHER),
        (Intent.DATE, "Quelle date serons-nous demain ?", Intent.DATE),
        (Intent.DATE, "How many days between 2024-01-01 and 2024-03-01?", Intent.DATE),
        (Intent.OTHER, "Combien font 2 + 2 ?", Intent.OTHER),
    ],
)
def test_a_computation_needs_something_to_compute_with(
    said: Intent, question: str, kept: Intent
) -> None:
    assert plausible(said, question) is kept


def test_the_intent_prompt_keeps_its_stable_part_first() -> None:
    one, two = intent_messages("Question A ?"), intent_messages("Question B  with   spaces")
    assert one[:-1] == two[:-1]
    assert two[-1].content == "Question B with spaces"


def test_a_failed_or_odd_classification_falls_back_to_the_documents() -> None:
    assert classify_intent(ScriptedLLM([]), "Combien font 2 + 2 ?") is Intent.OTHER
    odd = ScriptedLocalLLM([], side_script=["maybe"])
    assert classify_intent(odd, "Combien font 2 + 2 ?") is Intent.OTHER
    good = ScriptedLocalLLM([], side_script=["calculation"])
    assert classify_intent(good, "Combien font 2 + 2 ?") is Intent.CALCULATION


def test_a_failed_or_odd_date_tool_choice_offers_every_date_tool() -> None:
    assert choose_date_tool(ScriptedLLM([]), "Quel jour était le 1er mai 2025 ?") is None
    odd = ScriptedLocalLLM([], side_script=["calculate"])
    assert choose_date_tool(odd, "Quel jour était le 1er mai 2025 ?") is None
    good = ScriptedLocalLLM([], side_script=["date_diff"])
    assert choose_date_tool(good, "Combien de jours entre le 1er et le 9 mai ?") == "date_diff"


# --- the steps -----------------------------------------------------------------------------------


async def test_a_calculation_gets_the_calculator_alone_then_must_answer() -> None:
    llm = ScriptedLocalLLM(
        [
            "Thought: a calculation.\nAction: calculate\n"
            'Action Input: {"expression": "2340*15/100"}',
            "Answer: 15 % de 2 340 € font 351 €.",
        ],
        side_script=["calculation"],
    )
    engine = engine_with(llm)
    engine.start(language="fr")
    await consume(engine, "Combien font 15 % de 2 340 € ?")
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.ANSWERED
    assert outcome.route == "calculation"
    assert [c.name for c in outcome.tool_calls] == ["calculate"]
    assert "351" in outcome.tool_calls[0].output
    first, second = llm.call_kwargs
    assert '"calculate"' in first["grammar"] and '"date_add"' not in first["grammar"]
    system = llm.calls[0][0].content or ""
    assert "- calculate:" in system and "date_add" not in system
    # Before any tool result, an Action only (seen: the 1.5B model answered 420 for
    # 12.5 % of 3,480 from its head); after it, an Answer only (seen: it called again).
    assert "( action0 )" in first["grammar"] and '"Answer: "' in first["grammar"]
    assert "( answer" not in first["grammar"]
    assert second["grammar"].startswith("root ::= answer")
    assert "\nAction" in second["stop"]
    assert outcome.usage.model_calls == 2 and outcome.usage.prompt_tokens > 0


async def add_days_turn(action_input: str) -> tuple[ScriptedLocalLLM, Any]:
    """A French "45 days after" turn whose model calls date_add with ``action_input``."""
    llm = ScriptedLocalLLM(
        [
            f"Thought: add days.\nAction: date_add\nAction Input: {action_input}",
            "Answer: 2025-03-06.",
        ],
        side_script=["date"],
    )
    engine = engine_with(llm)
    engine.start(language="fr")
    await consume(engine, "Quelle date sera 45 jours après le 2025-01-20 ?")
    return llm, engine.last_outcome


async def test_a_date_question_gets_the_date_tools() -> None:
    llm, outcome = await add_days_turn('{"date": "2025-01-20", "days": 45}')
    assert outcome is not None and outcome.route == "date"
    assert "2025-03-06" in outcome.tool_calls[0].output
    grammar = llm.call_kwargs[0]["grammar"]
    assert all(f'"{name}"' in grammar for name in ("now", "date_add", "date_diff"))
    assert '"calculate"' not in grammar


async def test_an_invented_extra_unit_is_left_out_of_the_date_call() -> None:
    # Seen with the 1.5B model: "45 jours" became days 45 *and* months 3 (2025-06-04).
    _, outcome = await add_days_turn('{"date": "2025-01-20", "days": 45, "months": 3}')
    assert outcome is not None
    call = outcome.tool_calls[0]
    assert call.kwargs == {"date": "2025-01-20", "days": 45}
    assert "2025-03-06" in call.output


@pytest.mark.parametrize(
    ("question", "arguments", "kept"),
    [
        # Every number the question writes is kept, digits or words.
        ("Dans 2 ans et 3 mois ?", {"date": "d", "years": 2, "months": 3}, {"years", "months"}),
        ("Dans deux semaines ?", {"date": "d", "weeks": 2, "days": 1}, {"weeks"}),
        # No unit written as such: the model converted ("deux semaines" as 14 days).
        ("Dans deux semaines ?", {"date": "d", "days": 14}, {"days"}),
        # A zero is the default: nothing to drop.
        ("45 days after 2025-01-20?", {"date": "d", "days": 45, "months": 0}, {"days", "months"}),
        ("45 days after 2025-01-20?", {"date": "d", "days": 45, "weeks": 6}, {"days"}),
    ],
)
def test_only_numbers_the_user_did_not_write_are_dropped(
    question: str, arguments: dict[str, Any], kept: set[str]
) -> None:
    result = drop_invented_numbers(arguments, GENERAL["date_add"], question)
    assert set(result) == {"date", *kept}
    assert all(result[k] == arguments[k] for k in result)


async def test_a_document_question_is_answered_from_the_search_in_one_step(
    _isolated_data_dir: Path,
    minilm: Any,  # noqa: F811 - fixture
) -> None:
    make_theme(_isolated_data_dir, minilm, search_first=True)
    llm = ScriptedLocalLLM(["Answer: Two days per week [Source 1]."], side_script=["other"])
    engine = engine_with(llm, minilm)
    engine.start(theme="hr")
    raw = await consume(engine, "How many days per week can I work from home?")
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.ANSWERED
    assert outcome.route == "documents" and outcome.steps == 1
    assert outcome.sources and "Action: search_documents" in raw
    messages = llm.calls[0]
    # The passages sit with the question, without the delimiters a small model copies.
    last = messages[-1]
    assert last.role == MessageRole.USER
    assert "[Source 1:" in (last.content or "")
    assert (last.content or "").endswith("Question: How many days per week can I work from home?")
    assert "[End of source" not in (last.content or "")
    # Laid out as a focused retrieval call: instruction, passages in rank order, question.
    assert (last.content or "").startswith("Answer the question from the sources below")
    assert (last.content or "").index("[Source 1:") < (last.content or "").index("[Source 2:")
    # No header, no identity, no format rules: only the admin's theme prompt before it.
    assert [m.role for m in messages] == [MessageRole.SYSTEM, MessageRole.USER]
    assert messages[0].content == THEME_PROMPT
    assert llm.call_kwargs[0]["grammar"].startswith("root ::= answer")


@pytest.mark.parametrize(
    ("theme_prompt", "detail", "language", "roles", "instruction"),
    [
        ("", "standard", "fr", ["user"], "Réponds à la question à partir des sources"),
        ("Tu es l'assistant RH.", "standard", "fr", ["system", "user"], "Réponds à la"),
        ("", "concise", "fr", ["user"], "en citant [Source n]. Réponds en une ou deux phrases."),
        ("", "detailed", "en", ["user"], "citing [Source n]. Give a detailed answer"),
    ],
)
def test_a_documents_step_is_laid_out_as_a_focused_call(
    theme_prompt: str, detail: str, language: Language, roles: list[str], instruction: str
) -> None:
    formatter = CompactReActFormatter(
        header=compact_header(language, detail, theme_prompt),
        documents_first=True,
        language=language,
        theme_prompt=theme_prompt,
        detail=detail,
    )
    search = [
        ActionReasoningStep(thought="t", action="search_documents", action_input={"query": "q"}),
        ObservationReasoningStep(observation="Found:\n[Source 1: a.md]\nTwo days."),
    ]
    history = [ChatMessage(role=MessageRole.USER, content="Combien de jours ?")]
    messages = formatter.format([], history, search)
    assert [m.role.value for m in messages] == roles
    if theme_prompt:
        assert messages[0].content == theme_prompt
    content = messages[-1].content or ""
    assert instruction in content.split("\n")[0]
    assert content.endswith("Combien de jours ?") and "[Source 1: a.md]\nTwo days." in content
    # Warm-up prefills the same start.
    start = documents_prompt_start(language, detail, theme_prompt)
    assert [m.role.value for m in start] == roles
    assert content.startswith(start[-1].content or "")


async def test_a_general_question_without_a_theme_is_answered_directly() -> None:
    llm = ScriptedLocalLLM(["Answer: Rome."], side_script=["other"])
    engine = engine_with(llm)
    engine.start(language="fr")
    await consume(engine, "Quelle est la capitale de l'Italie ?")
    outcome = engine.last_outcome
    assert outcome is not None and outcome.route == "direct" and outcome.answer == "Rome."
    assert "Answer directly" in (llm.calls[0][0].content or "")


def test_the_header_is_the_same_for_every_step_of_a_session() -> None:
    prompt = "Tu es l'assistant RH."
    header = compact_header("fr", "standard", prompt)
    formatter = CompactReActFormatter(header=header, documents_first=True, theme_prompt=prompt)
    question = [ChatMessage(role=MessageRole.USER, content="Combien font 2 + 2 ?")]
    with_tools = formatter.format([GENERAL["calculate"]], question, [])
    direct = formatter.format([], question, [])
    search = [
        ActionReasoningStep(thought="t", action="search_documents", action_input={"query": "q"}),
        ObservationReasoningStep(observation="[Source 1: a.md]\ntext\n[End of source 1]"),
    ]
    with_documents = formatter.format([], question, search)
    assert (with_tools[0].content or "").startswith(header)
    assert (direct[0].content or "").startswith(header)
    # A documents step keeps the admin's words only (the focused-call layout).
    assert with_documents[0].content == prompt


def test_a_tool_line_is_its_summary_and_its_example() -> None:
    line = tool_line(GENERAL["calculate"])
    assert line.startswith("- calculate: Evaluate an arithmetic expression")
    assert line.endswith('Input: {"expression": "2 * (3 + 4)"}')


async def test_a_date_question_gets_the_one_date_tool_it_needs() -> None:
    llm = ScriptedLocalLLM(
        [
            "Thought: the weekday is Thursday.\nAction: parse_date\n"
            'Action Input: {"text": "14 juillet 1789"}',
            "Answer: Le 14 juillet 1789 était un mardi.",
        ],
        side_script=["date", "parse_date"],
    )
    engine = engine_with(llm)
    engine.start(language="fr")
    await consume(engine, "Quel jour de la semaine était le 14 juillet 1789 ?")
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.ANSWERED
    grammar = llm.call_kwargs[0]["grammar"]
    assert '"parse_date"' in grammar and '"date_diff"' not in grammar
    assert "- parse_date:" in (llm.calls[0][0].content or "")
    assert "- date_diff:" not in (llm.calls[0][0].content or "")
    # The answer step sees the tool's result, not the Thought's guess before it.
    answer_prompt = "\n".join(m.content or "" for m in llm.calls[1])
    assert "(Tuesday)" in answer_prompt and "Thursday" not in answer_prompt


async def test_a_document_question_may_answer_without_a_tool() -> None:
    llm = ScriptedLocalLLM(["Answer: Rome."], side_script=["other"])
    engine = engine_with(llm)
    engine.start(language="fr")
    await consume(engine, "Quelle est la capitale de l'Italie ?")
    assert "action" not in llm.call_kwargs[0]["grammar"]


async def test_until_a_tool_succeeds_a_computation_may_only_act() -> None:
    llm = ScriptedLocalLLM(
        [
            'Thought: compute.\nAction: calculate\nAction Input: {"expression": "2 +"}',
            'Thought: again.\nAction: calculate\nAction Input: {"expression": "2 + 2"}',
            "Answer: 4.",
        ],
        side_script=["calculation"],
    )
    engine = engine_with(llm)
    engine.start(language="fr")
    await consume(engine, "Combien font 2 + 2 ?")
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.ANSWERED
    first, second, third = (kw["grammar"] for kw in llm.call_kwargs)
    # Until a tool has answered without error, the model may only act again.
    assert "( action0 )" in first and "( action0 )" in second
    assert third.startswith("root ::= answer")


def test_every_grammar_compiles_in_llama_cpp() -> None:
    from llama_cpp import LlamaGrammar

    tools = list(GENERAL.values())
    for subset in ([], tools[:1], tools):
        LlamaGrammar.from_string(react_grammar(subset), verbose=False)
        LlamaGrammar.from_string(react_grammar(subset, require_action=True), verbose=False)


def test_action_inputs_are_bound_to_the_tools_arguments() -> None:
    grammar = react_grammar([GENERAL["date_add"]])
    assert '"\\"date\\"" ws ":" ws string' in grammar
    assert '"\\"days\\"" ws ":" ws number' in grammar
    # Seen: {"expression": "15/100 * 2340", "precision": 2, "rounding_mode": ...} until
    # the output limit. Only the tool's own keys exist in the grammar.
    assert "precision" not in react_grammar([GENERAL["calculate"]])


# --- token budget ----------------------------------------------------------------------------


def _render(history: list[ChatMessage], steps: list[Any]) -> list[ChatMessage]:
    system = ChatMessage(role=MessageRole.SYSTEM, content="s" * 400)
    scratch = [
        ChatMessage(role=MessageRole.USER, content=s.observation)
        for s in steps
        if isinstance(s, ObservationReasoningStep)
    ]
    return [system, *history, *scratch]


def _count(messages: Any) -> int:
    return sum(len(m.content or "") for m in messages) // 4


def test_the_budget_shortens_observations_first_then_history_then_the_answer() -> None:
    history = [
        ChatMessage(role=MessageRole.USER, content="q" * 2000),
        ChatMessage(role=MessageRole.ASSISTANT, content="a" * 2000),
        ChatMessage(role=MessageRole.USER, content="question"),
    ]
    steps = [ObservationReasoningStep(observation="o" * 8000)]
    fitted = fit_prompt(history, steps, _render, _count, TokenBudget(window=1700, max_output=400))
    assert fitted.trimmed == ["observations"]
    assert fitted.prompt_tokens + 400 <= 1700 - 16
    tighter = fit_prompt(history, steps, _render, _count, TokenBudget(window=900, max_output=400))
    assert tighter.trimmed[:2] == ["observations", "history"]
    assert tighter.messages[-2].content == "question"  # the question always stays
    shorter = fit_prompt(
        history[-1:], steps, _render, _count, TokenBudget(window=560, max_output=400)
    )
    assert shorter.trimmed[-1] == "answer length" and 256 <= shorter.max_output < 400
    with pytest.raises(ContextOverflowError, match="context window holds 300"):
        fit_prompt(history[-1:], steps, _render, _count, TokenBudget(window=300, max_output=400))


def test_a_remote_model_is_budgeted_with_an_over_estimate() -> None:
    text = "Combien de jours de congé pour un mariage ? " * 20
    assert estimate_tokens([ChatMessage(role=MessageRole.USER, content=text)]) > len(text) / 4


async def test_a_question_too_long_for_the_window_is_a_context_overflow_not_an_outage() -> None:
    # Seen with the 1.5B model: "Requested tokens (4244) exceed context window of 4096"
    # reported as "le modèle de langage ne répond pas".
    llm = ScriptedLocalLLM([], side_script=["other"], window=2048)
    engine = engine_with(llm)
    engine.start(language="fr")
    await consume(engine, "Résume ce texte : " + "mot " * 4000)
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.CONTEXT_OVERFLOW
    assert "fenêtre du modèle" in outcome.answer
    assert llm.calls == []  # refused before anything was sent to the model


async def test_a_long_history_is_trimmed_so_the_question_still_fits() -> None:
    llm = ScriptedLocalLLM(["Answer: Rome."], side_script=["other"], window=900)
    engine = engine_with(llm)
    engine.start(language="fr")
    engine.set_history(
        [
            {"role": "user", "content": "Parle-moi de Paris."},
            {"role": "assistant", "content": "Paris " * 900},
        ]
    )
    await consume(engine, "Quelle est la capitale de l'Italie ?")
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.ANSWERED
    assert all("Paris Paris" not in (m.content or "") for m in llm.calls[0])


async def test_a_remote_model_keeps_its_output_setting_unless_trimmed() -> None:
    llm = ScriptedLLM(
        ['Thought: x\nAction: calculate\nAction Input: {"expression": "2+2"}', "Answer: 4"]
    )
    seen: list[dict[str, Any]] = []
    original = llm.astream_chat

    async def spy(messages: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return await original(messages, **kwargs)

    object.__setattr__(llm, "astream_chat", spy)
    engine = engine_with(llm, router_top_k=50)
    engine.start(language="fr")
    await consume(engine, "Combien font 2 + 2 ?")
    assert seen == [{}, {}]


# --- empty replies ---------------------------------------------------------------------------


async def test_an_empty_reply_is_retried_like_a_format_error() -> None:
    # Issue 10/11: a stream with no chunk ended the turn as "the model is not answering".
    llm = ScriptedLLM([[], "Thought: ok\nAnswer: Bonjour."])
    engine = engine_with(llm, router_top_k=50)
    engine.start(language="fr")
    await consume(engine, "Bonjour")
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.ANSWERED
    assert outcome.answer == "Bonjour." and outcome.steps == 2
    assert "empty" in (llm.calls[1][-1].content or "")


def test_warm_up_reads_the_stable_prompts_before_the_first_question(
    _isolated_data_dir: Path,
    minilm: Any,  # noqa: F811 - fixture
) -> None:
    make_theme(_isolated_data_dir, minilm, search_first=True)
    llm = ScriptedLocalLLM([])
    engine = engine_with(llm, minilm)
    engine.start(theme="hr")
    engine.warm_up()
    # How a documents step starts: the theme's prompt, then the instruction before the passages.
    system, instruction = llm.prefilled[0]
    assert system.role == MessageRole.SYSTEM and system.content == THEME_PROMPT
    assert instruction.role == MessageRole.USER
    assert (instruction.content or "").startswith("Answer the question from the sources below")
    assert len(llm.side_calls) == 1  # the intent classifier's instructions
