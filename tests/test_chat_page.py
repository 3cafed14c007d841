"""The chat page through Streamlit's AppTest, on a ScriptedLLM and the real MiniLM.

The cookie is replaced by ``CookieHistoryStore`` over a dict (the real
encoding, without a browser); the theme is a real one on disk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from engine.tools.theme_rag import SEARCH_TOOL_NAME
from models.app_settings import AppSettingsManager
from tests.fakes import ScriptedLLM
from tests.test_engine_corpus import act
from tests.test_theme_rag import make_theme, minilm  # noqa: F401 - fixture
from themes.feedback import list_feedback
from tracer.history_store import CookieHistoryStore, decode_conversations
from tracer.render import DisplayMode, escape_markdown

PAGE = str(Path(__file__).resolve().parents[1] / "chatitego.py")
QUESTION = "How many days per week can I work from home?"
SEARCH = act(SEARCH_TOOL_NAME, json.dumps({"query": "work from home days"}))
POLICY = escape_markdown("hr-policy.pdf")  # labels are Markdown: escaped
ANSWER = "Thought: The policy says it.\nAnswer: Up to **two days** per week."


@pytest.fixture
def llm(minilm: Any) -> Iterator[ScriptedLLM]:  # noqa: F811
    scripted = ScriptedLLM(chunk_size=5)
    AppSettingsManager.reset_for_tests()
    AppSettingsManager.load_models(
        llm_loader=lambda config, progress: scripted, embed_loader=lambda config: minilm
    )
    yield scripted
    AppSettingsManager.reset_for_tests()


@pytest.fixture
def theme(_isolated_data_dir: Path, minilm: Any) -> Any:  # noqa: F811
    return make_theme(_isolated_data_dir, minilm)


def open_page(cookies: dict[str, str], theme: str | None = "hr") -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["_history_store"] = CookieHistoryStore(cookies)
    if theme is not None:
        at.query_params["theme"] = theme
    return at.run()


def markdown_text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_a_question_gets_the_reasoning_panel_the_answer_and_its_sources(
    llm: ScriptedLLM, theme: Any
) -> None:
    llm.enqueue(SEARCH, ANSWER)
    cookies: dict[str, str] = {}
    at = open_page(cookies)
    assert not at.exception
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    text = markdown_text(at)
    assert "Up to **two days** per week." in text
    assert QUESTION in text
    # The reasoning of the turn, collapsed, with its decorated blocks.
    assert any("Raisonnement" in e.label for e in at.expander)
    assert ":gray[**Pensée**]" in text and ":blue[**Action**]" in text
    # The sources: file, page and score in an expander holding the chunk.
    labels = [e.label for e in at.expander]
    assert any(POLICY in label and "score" in label for label in labels)
    assert "hr" in decode_conversations(cookies["h"]) and cookies["theme"] == "hr"


def test_the_conversation_comes_back_from_the_cookie_after_a_reload(
    llm: ScriptedLLM, theme: Any
) -> None:
    llm.enqueue(SEARCH, ANSWER)
    cookies: dict[str, str] = {}
    open_page(cookies).chat_input[0].set_value(QUESTION).run()
    reloaded = open_page(cookies, theme=None)  # a new session: only the cookie remains
    assert not reloaded.exception
    assert reloaded.query_params["theme"] == "hr"  # the remembered theme
    text = markdown_text(reloaded)
    assert QUESTION in text and "Up to **two days** per week." in text
    assert any(POLICY in e.label for e in reloaded.expander)


@pytest.mark.parametrize(
    ("mode", "thought", "action"),
    [
        ("everything", True, True),
        ("hide_thoughts", False, True),
        ("tool_calls_only", False, True),
        ("answer_only", False, False),
    ],
)
def test_display_modes_choose_what_the_reasoning_panel_shows(
    llm: ScriptedLLM, theme: Any, mode: str, thought: bool, action: bool
) -> None:
    llm.enqueue(SEARCH, ANSWER)
    at = open_page({})
    at.sidebar.radio[0].set_value(DisplayMode(mode)).run()
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    text = markdown_text(at)
    assert ("**Pensée**" in text) is thought
    assert ("**Action**" in text) is action
    assert "Up to **two days** per week." in text
    # The choice is remembered in the cookie for the next visit.
    assert at.session_state["display_mode"] is DisplayMode(mode)


@pytest.mark.parametrize(
    ("requested", "message"),
    [("nope", "Le thème « nope » n'existe pas."), ("../etc", "n'est pas un nom de thème valide")],
)
def test_an_unknown_or_invalid_theme_in_the_url_shows_the_picker(
    llm: ScriptedLLM, theme: Any, requested: str, message: str
) -> None:
    at = open_page({}, theme=requested)
    assert not at.exception
    assert any(message in e.value for e in at.error)
    assert "Choisissez un thème" in at.info[0].value
    assert not at.chat_input  # no chat before a theme is chosen
    at.button(key="open-hr").click().run()
    assert at.query_params["theme"] == "hr"
    assert at.chat_input


def test_no_theme_anywhere_shows_the_picker_not_an_error(llm: ScriptedLLM, theme: Any) -> None:
    at = open_page({}, theme=None)
    assert not at.exception and not at.error
    assert "Choisissez un thème" in at.info[0].value


XSS_ANSWER = (
    "Thought: done.\n"
    'Answer: <script>alert("x")</script> <img src=x onerror=alert(1)> '
    "![pixel](https://evil.example/p.png) fin."
)


def test_html_and_remote_images_from_the_model_are_shown_as_text(
    llm: ScriptedLLM, theme: Any
) -> None:
    llm.enqueue(
        "Thought: <img src=x onerror=alert(2)>\nAction: calculator\n"
        'Action Input: {"expression": "1+1"}\n',
        XSS_ANSWER,
    )
    at = open_page({})
    at.chat_input[0].set_value("<b>bold?</b>").run()
    assert not at.exception
    text = markdown_text(at)
    assert "<script>" not in text and "<img" not in text and "<b>" not in text
    assert "&lt;script>" in text and "&lt;img src=x onerror=alert(1)>" in text
    assert "![pixel]" not in text and "\\[image\\] [pixel](https://evil.example/p.png)" in text
    assert all(not m.allow_html for m in at.markdown)  # no element opted into raw HTML


def test_max_steps_says_why_and_continue_resumes(llm: ScriptedLLM, theme: Any) -> None:
    # max_steps is 8: the model never concludes, even when asked to (new queries: no loop).
    llm.enqueue(*[act(SEARCH_TOOL_NAME, json.dumps({"query": f"days {i}"})) for i in range(9)])
    at = open_page({})
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    assert "nombre maximal d'étapes" in at.warning[0].value
    labels = [b.label for b in at.button]
    assert {"Continuer", "Répondre avec ce qui est connu", "Réessayer"} <= set(labels)
    llm.enqueue(ANSWER)
    next(b for b in at.button if b.label == "Répondre avec ce qui est connu").click().run()
    assert not at.exception
    assert "Up to **two days** per week." in markdown_text(at)
    # The instruction was sent to the model, after the history of the stopped turn.
    last_call = llm.calls[-1]
    assert "sans utiliser d'autre outil" in str(last_call[-1].content)
    assert not at.warning or "nombre maximal" in at.warning[0].value  # the old turn keeps its note
    assert not [b for b in at.button if b.label == "Continuer"]  # actions only under the last


def test_retry_asks_the_same_question_again(llm: ScriptedLLM, theme: Any) -> None:
    llm.enqueue(ConnectionError("down"), ConnectionError("down"), ConnectionError("down"))
    llm.enqueue(ConnectionError("down"))
    at = open_page({})
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    assert "ne répond pas" in at.warning[0].value
    assert [b.label for b in at.button if b.key and b.key.startswith("follow-")] == ["Réessayer"]
    llm.enqueue(ANSWER)
    next(b for b in at.button if b.label == "Réessayer").click().run()
    assert not at.warning
    assert markdown_text(at).count(QUESTION) == 1  # asked again, not twice in the history
    assert "Up to **two days** per week." in markdown_text(at)


def test_ask_user_shows_the_question_and_the_reply_resumes(llm: ScriptedLLM, theme: Any) -> None:
    ask = act("ask_user", json.dumps({"question": "Quel site : Paris ou Lyon ?"}))
    llm.enqueue(ask)
    at = open_page({})
    at.chat_input[0].set_value("Quels sont les horaires ?").run()
    assert not at.exception
    assert "Quel site : Paris ou Lyon ?" in markdown_text(at)
    assert "précision" in at.info[0].value
    assert at.chat_input[0].placeholder.startswith("Votre réponse")
    llm.enqueue("Thought: Lyon it is.\nAnswer: À Lyon, 8 h – 18 h.")
    at.chat_input[0].set_value("Lyon").run()
    assert not at.exception
    assert "À Lyon, 8 h – 18 h." in markdown_text(at)
    resumed = " ".join(str(m.content) for m in llm.calls[-1])
    assert "Quels sont les horaires ?" in resumed and "Lyon" in resumed


def test_export_buttons_appear_once_there_is_a_conversation(llm: ScriptedLLM, theme: Any) -> None:
    at = open_page({})
    assert not at.sidebar.get("download_button")
    llm.enqueue(SEARCH, ANSWER)
    at.chat_input[0].set_value(QUESTION).run()
    buttons = at.sidebar.get("download_button")
    # The files themselves are built on click (deferred): the browser test downloads them,
    # tests/test_tracer_export.py checks their content.
    assert [b.proto.label for b in buttons] == ["Markdown", "PDF"]


def test_a_thumb_down_goes_to_the_review_list(llm: ScriptedLLM, theme: Any) -> None:
    llm.enqueue(SEARCH, ANSWER)
    at = open_page({})
    at.chat_input[0].set_value(QUESTION).run()
    at.feedback[0].set_value(0).run()  # thumbs: 0 = down
    assert not at.exception
    votes = list_feedback(theme.directory)
    assert [(v.rating, v.question) for v in votes] == [(-1, QUESTION)]
    assert votes[0].sources[0].file == "hr-policy.pdf"
    assert any(step.type == "thought" for step in votes[0].reasoning)


def test_new_conversation_clears_the_page_and_the_cookie(llm: ScriptedLLM, theme: Any) -> None:
    llm.enqueue(SEARCH, ANSWER)
    cookies: dict[str, str] = {}
    at = open_page(cookies)
    at.chat_input[0].set_value(QUESTION).run()
    at.sidebar.button[0].click().run()
    assert not at.exception
    assert QUESTION not in markdown_text(at)
    assert QUESTION not in markdown_text(open_page(cookies))


def test_a_new_index_version_reaches_an_open_conversation(
    llm: ScriptedLLM,
    theme: Any,
    minilm: Any,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    from themes.ingest import ingest_files

    llm.enqueue(SEARCH, ANSWER)
    at = open_page({})
    at.chat_input[0].set_value(QUESTION).run()
    before = at.session_state["engine_key"]
    doc = tmp_path / "canteen.md"
    doc.write_text("# Canteen\n\nThe canteen opens at 11:30 and closes at 14:00.\n", "utf-8")
    ingest_files(theme, [doc], minilm)  # what the RAG Manager does: a new version
    llm.enqueue(
        act(SEARCH_TOOL_NAME, json.dumps({"query": "canteen opening hours"})),
        "Thought: found.\nAnswer: 11:30.",
    )
    at.chat_input[0].set_value("When does the canteen open?").run()
    assert not at.exception
    after = at.session_state["engine_key"]
    assert before[1] != after[1] and after[1] == theme.storage.current_version_name()
    labels = [e.label for e in at.expander]
    assert any(escape_markdown("canteen.md") in label for label in labels)  # found, no restart


def test_a_rerun_in_the_middle_of_a_turn_asks_again_instead_of_losing_the_question(
    llm: ScriptedLLM, theme: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen in the browser: the cookie component reported a write just after page load,
    # Streamlit reran the script mid-turn, and the question ended "interrupted".
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

    from tracer.async_bridge import iterate_sync
    from tracer.streamlit_tracer import StreamlitChatTracer

    real_trace = StreamlitChatTracer.trace_events
    interruptions: list[int] = []

    def interrupted_once(self: StreamlitChatTracer, stream: Any) -> Any:
        if not interruptions:
            interruptions.append(1)
            items = iterate_sync(stream)
            next(items)  # the turn has started...
            items.close()  # ...when the rerun stops the script (the stream is closed)
            raise RerunException(RerunData())
        return real_trace(self, stream)

    monkeypatch.setattr(StreamlitChatTracer, "trace_events", interrupted_once)
    llm.enqueue(SEARCH, SEARCH, ANSWER)  # the interrupted first step, then the whole turn
    at = open_page({})
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    assert interruptions == [1]
    text = markdown_text(at)
    assert text.count(QUESTION) == 1 and "Up to **two days** per week." in text
    assert not at.warning  # no "interrupted" note: the question was simply asked again


def test_a_rerun_before_the_turn_starts_does_not_lose_the_typed_question(
    llm: ScriptedLLM, theme: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen under load (bench.load, 8 sessions): the cookie component's report of the last
    # answer's write reran the page while the run that carried a new question was still
    # drawing the conversation; the rerun had no question, and the question vanished.
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

    import tracer.chat_view

    real_show = tracer.chat_view.show_entry
    cuts: list[int] = []
    at = open_page({})
    llm.enqueue(ANSWER)
    at.chat_input[0].set_value("Hello?").run()  # one entry on the page to draw

    def cut_once(*args: Any, **kwargs: Any) -> Any:
        if not cuts:
            cuts.append(1)
            raise RerunException(RerunData())  # the rerun carries no question
        return real_show(*args, **kwargs)

    monkeypatch.setattr(tracer.chat_view, "show_entry", cut_once)
    llm.enqueue(SEARCH, ANSWER)
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    assert cuts == [1]
    text = markdown_text(at)
    assert text.count(QUESTION) == 1 and "Up to **two days** per week." in text
