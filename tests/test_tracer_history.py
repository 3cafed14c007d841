"""The conversation model, its bounded cookie form, theme choice and the cookie key."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from config.settings import AppConfig
from engine.types import ReActBlock, ReActType, Source, StopReason, TurnOutcome
from themes.theme import ThemeRepository
from tracer.conversation import ChatEntry, Conversation, FollowUp, SourceRef, follow_ups
from tracer.cookie_secret import cookie_password
from tracer.history_store import CookieHistoryStore, decode_history, encode_history
from tracer.theme_choice import choose_theme


def outcome(answer: str, stop: StopReason = StopReason.ANSWERED) -> TurnOutcome:
    return TurnOutcome(
        stop_reason=stop,
        answer=answer,
        sources=[Source(file="guide.pdf", page=3, chunk_id="c9", score=0.7, snippet="…")],
    )


def conversation(turns: int, size: int = 40) -> Conversation:
    c = Conversation()
    for i in range(turns):
        # Random text: real conversations compress far less than repeated letters.
        c.add_user(f"question {i} " + os.urandom(size // 2).hex())
        c.add_assistant(outcome(f"réponse {i} " + os.urandom(size // 2).hex()), "", [])
    return c


def test_a_short_conversation_round_trips_with_its_sources_and_stop_reasons() -> None:
    c = conversation(3)
    c.entries[-1].stop_reason = StopReason.MAX_STEPS.value
    value, saved = encode_history(c.entries)
    assert (saved.kept, saved.dropped, saved.truncated) == (6, 0, False)
    back = decode_history(value)
    assert [(e.role, e.content, e.stop_reason, e.id) for e in back] == [
        (e.role, e.content, e.stop_reason, e.id) for e in c.entries
    ]
    assert back[1].sources[0] == SourceRef(file="guide.pdf", page=3, chunk_id="c9", score=0.7)


def test_a_long_conversation_keeps_the_newest_messages_within_the_budget() -> None:
    c = conversation(60, size=200)
    value, saved = encode_history(c.entries, budget=2800)
    assert len(value) <= 2800
    assert saved.kept + saved.dropped == 120 and saved.dropped > 0
    back = decode_history(value)
    assert [e.content for e in back] == [e.content for e in c.entries[-saved.kept :]]


def test_one_huge_message_is_cut_to_fit_rather_than_lost() -> None:
    c = Conversation()
    c.add_user(os.urandom(6000).hex())  # incompressible
    value, saved = encode_history(c.entries, budget=2800)
    assert len(value) <= 2800 and saved.truncated and saved.kept == 1
    back = decode_history(value)
    assert back[0].content.endswith("…") and c.entries[0].content.startswith(back[0].content[:-1])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(max_size=400), max_size=30))
def test_any_conversation_fits_and_decodes(texts: list[str]) -> None:
    c = Conversation()
    for i, t in enumerate(texts):
        (c.add_user if i % 2 == 0 else lambda x: c.add_assistant(outcome(x), x, []))(t)
    value, saved = encode_history(c.entries, budget=2800)
    assert len(value) <= 2800
    assert len(decode_history(value)) == saved.kept


def test_garbage_in_the_cookie_gives_an_empty_conversation() -> None:
    for value in ("", "not base64!!", "eJzLSM3JyQcABiwCFQ==", None):
        assert decode_history(value) == []


def test_the_store_keeps_one_conversation_per_theme() -> None:
    cookies: dict[str, str] = {}
    store = CookieHistoryStore(cookies)
    store.save("hr", conversation(1).entries)
    store.save("it", conversation(2).entries)
    assert len(store.load("hr")) == 2 and len(store.load("it")) == 4
    store.clear("hr")
    assert store.load("hr") == [] and len(store.load("it")) == 4


class BrokenCookies(dict[str, str]):
    def get(self, key: str, default: object = None) -> str:  # type: ignore[override]
        raise ValueError("cannot decrypt")


def test_an_unreadable_cookie_does_not_break_the_page() -> None:
    assert CookieHistoryStore(BrokenCookies()).load("hr") == []


def test_engine_history_marks_a_question_from_the_model() -> None:
    c = Conversation()
    c.add_user("Horaires ?")
    c.add_assistant(outcome("Quel site ?", StopReason.WAITING_FOR_USER), "Quel site ?", [])
    assert c.waiting_for_user
    assert c.engine_history() == [
        {"role": "user", "content": "Horaires ?"},
        {"role": "assistant", "content": "Quel site ?", "stop_reason": "waiting_for_user"},
    ]


def test_retry_takes_back_the_last_question_and_its_answer() -> None:
    c = conversation(2)
    last_question = c.entries[2].content
    assert c.take_back_last_turn() == last_question
    assert len(c.entries) == 2


def test_add_assistant_keeps_the_reasoning_but_not_the_answer_block() -> None:
    c = Conversation()
    c.add_user("q")
    blocks = [ReActBlock(ReActType.THOUGHT, "t"), ReActBlock(ReActType.ANSWER, "a")]
    entry = c.add_assistant(outcome("a"), "a", blocks)
    assert [(r.type, r.content) for r in entry.reasoning] == [("thought", "t")]
    assert c.question_before(entry.id) == "q"


def test_follow_ups_depend_on_the_stop_reason() -> None:
    assert follow_ups(StopReason.ANSWERED) == ()
    assert follow_ups(StopReason.WAITING_FOR_USER) == ()
    assert follow_ups(StopReason.LLM_UNAVAILABLE) == (FollowUp.RETRY,)
    assert FollowUp.ANSWER_NOW in follow_ups(StopReason.MAX_STEPS)


def test_a_cancelled_turn_without_outcome_is_recorded_as_cancelled() -> None:
    c = Conversation()
    c.add_user("q")
    entry = c.add_assistant(None, "", [])
    assert entry.stop is StopReason.CANCELLED


# --- theme choice ----------------------------------------------------------------------
def test_the_url_wins_then_the_cookie_then_the_picker(tmp_path: Path) -> None:
    repo = ThemeRepository(tmp_path)
    assert choose_theme(None, None, repo).problem == "no_themes_at_all"
    repo.create("hr")
    repo.create("it")
    assert choose_theme("it", "hr", repo).name == "it"
    assert choose_theme(None, "hr", repo).name == "hr"
    assert choose_theme(None, "../x", repo).problem == "no_theme"
    assert choose_theme(None, "gone", repo).problem == "no_theme"
    missing = choose_theme("gone", "hr", repo)
    assert (missing.name, missing.problem, missing.requested) == (None, "theme_missing", "gone")
    assert choose_theme("<script>", None, repo).problem == "theme_invalid"


# --- cookie key --------------------------------------------------------------------------
def test_the_configured_cookie_key_wins(tmp_path: Path) -> None:
    config = AppConfig(data_dir=tmp_path, cookie_password="from-config")  # type: ignore[arg-type]
    assert cookie_password(config) == "from-config"
    assert not (tmp_path / ".secrets").exists()


def test_without_configuration_a_private_key_is_made_once(tmp_path: Path) -> None:
    config = AppConfig(data_dir=tmp_path)
    first = cookie_password(config)
    assert len(first) >= 40 and cookie_password(config) == first
    path = tmp_path / ".secrets" / "cookie_password"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert cookie_password(AppConfig(data_dir=tmp_path / "other")) != first


def test_chat_entry_ignores_an_unknown_stop_reason() -> None:
    assert ChatEntry(role="assistant", content="x", stop_reason="bogus").stop is None
