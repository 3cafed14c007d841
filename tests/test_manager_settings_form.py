"""The settings form as settings: trimmed text, int numbers, all tools by default, and
whether documents must be re-indexed."""

from __future__ import annotations

from dataclasses import replace

from manager.settings_form import SettingsForm, settings_changes

FORM = SettingsForm(
    title="  Ressources humaines ",
    description=" Congés et paie\n",
    language="fr",
    detail="standard",
    engine_mode="react",
    enabled_tools=[],
    wide_k=40.0,
    top_k=5.0,
    chunk_tokens=0.0,
    chunk_overlap=64.0,
    compression=True,
    compression_threshold=0.25,
    llm_extraction=False,
    translate_queries=True,
    search_first=False,
)


def test_text_is_trimmed_and_numbers_are_ints() -> None:
    values = settings_changes(FORM, None, 64).values
    assert values["title"] == "Ressources humaines" and values["description"] == "Congés et paie"
    retrieval = values["retrieval"]
    assert retrieval["wide_k"] == 40 and isinstance(retrieval["wide_k"], int)
    assert retrieval["top_k"] == 5 and retrieval["chunk_overlap"] == 64
    assert retrieval["compression_threshold"] == 0.25


def test_no_tool_ticked_means_every_tool() -> None:
    assert settings_changes(FORM, None, 64).values["enabled_tools"] == ["*"]
    ticked = replace(FORM, enabled_tools=["current_date"])
    assert settings_changes(ticked, None, 64).values["enabled_tools"] == ["current_date"]


def test_zero_chunk_tokens_means_the_models_own_size() -> None:
    assert settings_changes(FORM, None, 64).values["retrieval"]["chunk_tokens"] is None


def test_chunking_change_is_noticed_and_nothing_else_counts() -> None:
    assert not settings_changes(FORM, None, 64).chunking_changed
    assert not settings_changes(replace(FORM, top_k=9, title="x"), None, 64).chunking_changed
    assert settings_changes(replace(FORM, chunk_tokens=256), None, 64).chunking_changed
    assert settings_changes(replace(FORM, chunk_overlap=32), None, 64).chunking_changed
    assert settings_changes(FORM, 256, 64).chunking_changed  # back to the model's size
