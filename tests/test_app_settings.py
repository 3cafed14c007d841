"""AppSettings: one validated, locked, traced initialisation, serialised across processes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from config.settings import AppConfig
from models import app_settings as app_settings_module
from models.app_settings import (
    AppSettings,
    AppSettingsError,
    AppSettingsManager,
    get_app_settings,
)
from models.embeddings import LlamaIndexEmbeddingAdapter, UniversalEmbeddingWrapper

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _fresh_app_settings() -> Iterator[None]:
    AppSettingsManager.reset_for_tests()
    yield
    AppSettingsManager.reset_for_tests()


class FakeBackend:
    """An embedding backend with a tokenizer, like a SentenceTransformer."""

    def __init__(self, with_tokenizer: bool = True) -> None:
        if with_tokenizer:
            self.tokenizer = object()

    def embed(self, text: str) -> list[float]:
        return [1.0, 0.0]


class FakeLLM:
    """Anything works as the LLM here: AppSettings only stores it."""


class CountingLoaders:
    def __init__(self, *, with_tokenizer: bool = True, llm: Any = "fake") -> None:
        self.embed_calls = 0
        self.llm_calls = 0
        self.with_tokenizer = with_tokenizer
        self.llm = FakeLLM() if llm == "fake" else llm

    def embed(self, config: AppConfig) -> Any:
        self.embed_calls += 1
        return LlamaIndexEmbeddingAdapter(
            UniversalEmbeddingWrapper(FakeBackend(self.with_tokenizer))
        )

    def llm_loader(self, config: AppConfig, progress: Any) -> Any:
        self.llm_calls += 1
        return self.llm


def _load(loaders: CountingLoaders, data_dir: Path) -> AppSettings:
    return AppSettingsManager.load_models(
        AppConfig(data_dir=data_dir), llm_loader=loaders.llm_loader, embed_loader=loaders.embed
    )


def test_load_models_fills_validates_and_locks(tmp_path: Path) -> None:
    loaders = CountingLoaders()
    before = time.time()
    app = _load(loaders, tmp_path)
    assert app is get_app_settings()
    assert app.locked
    assert app.llm is loaders.llm
    assert isinstance(app.embed_model, LlamaIndexEmbeddingAdapter)
    assert app.tokenizer is app.embed_model.wrapper.embedding.tokenizer
    assert app.initialized_at is not None and before <= app.initialized_at <= time.time()
    # The trace names who initialised: this test.
    assert app.initialized_by and "test_load_models_fills_validates_and_locks" in app.initialized_by
    assert app.versions and "llama-index-core" in app.versions


def test_locked_settings_refuse_any_assignment(tmp_path: Path) -> None:
    app = _load(CountingLoaders(), tmp_path)
    for name, value in [("llm", None), ("embed_model", None), ("locked", False), ("versions", {})]:
        with pytest.raises(AppSettingsError, match="locked"):
            setattr(app, name, value)
    assert app.locked and app.llm is not None


def test_extra_attributes_are_forbidden(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        AppSettings(llm_model="x")  # type: ignore[call-arg]
    unlocked = get_app_settings()
    with pytest.raises(ValueError, match="no attribute"):
        unlocked.llm_model = "x"  # type: ignore[attr-defined]
    app = _load(CountingLoaders(), tmp_path)
    with pytest.raises(AppSettingsError):
        app.llm_model = "x"  # type: ignore[attr-defined]


def test_assignment_is_validated_before_lock() -> None:
    with pytest.raises(ValidationError):
        get_app_settings().initialized_at = "yesterday"  # type: ignore[assignment]


def test_second_load_is_idempotent(tmp_path: Path) -> None:
    first = CountingLoaders()
    app = _load(first, tmp_path)
    trace, at = app.initialized_by, app.initialized_at
    second = CountingLoaders()
    again = _load(second, tmp_path)
    assert again is app
    assert (first.embed_calls, first.llm_calls) == (1, 1)
    assert (second.embed_calls, second.llm_calls) == (0, 0)
    assert app.llm is first.llm
    assert (app.initialized_by, app.initialized_at) == (trace, at)


def test_concurrent_threads_load_once(tmp_path: Path) -> None:
    loaders = CountingLoaders()
    slow_embed = loaders.embed

    def embed(config: AppConfig) -> Any:
        time.sleep(0.3)  # long enough for every thread to be waiting on the locks
        return slow_embed(config)

    loaders.embed = embed  # type: ignore[method-assign]
    results: list[AppSettings] = []
    threads = [
        threading.Thread(target=lambda: results.append(_load(loaders, tmp_path))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 4 and all(r is results[0] for r in results)
    assert (loaders.embed_calls, loaders.llm_calls) == (1, 1)


@pytest.mark.parametrize(
    ("loaders", "missing"),
    [
        (CountingLoaders(with_tokenizer=False), "tokenizer"),
        (CountingLoaders(llm=None), "llm"),
    ],
)
def test_validate_fails_closed(tmp_path: Path, loaders: CountingLoaders, missing: str) -> None:
    with pytest.raises(AppSettingsError, match=missing):
        _load(loaders, tmp_path)
    app = get_app_settings()
    # Nothing half-initialised is left for others to read, and a later call may retry.
    assert not app.locked
    assert (app.llm, app.embed_model, app.tokenizer, app.initialized_by) == (None,) * 4
    good = CountingLoaders()
    assert _load(good, tmp_path).locked
    assert good.llm_calls == 1


def test_validate_alone_reports_everything_missing() -> None:
    with pytest.raises(AppSettingsError, match="llm, embed_model, tokenizer"):
        AppSettingsManager.validate()


def test_loader_error_leaves_settings_unlocked(tmp_path: Path) -> None:
    def broken(config: AppConfig, progress: Any) -> Any:
        raise RuntimeError("no model")

    with pytest.raises(RuntimeError, match="no model"):
        AppSettingsManager.load_models(
            AppConfig(data_dir=tmp_path), llm_loader=broken, embed_loader=CountingLoaders().embed
        )
    assert not get_app_settings().locked


def test_describe(tmp_path: Path) -> None:
    before = AppSettingsManager.describe()
    assert before["locked"] is False and before["llm"] is None
    _load(CountingLoaders(), tmp_path)
    info = AppSettingsManager.describe()
    assert set(info) == {
        "llm",
        "embed_model",
        "tokenizer",
        "versions",
        "locked",
        "initialized_by",
        "initialized_at",
    }
    assert info["llm"] == "FakeLLM"
    assert info["embed_model"] == "LlamaIndexEmbeddingAdapter"
    assert info["tokenizer"] == "object"
    assert info["locked"] is True


def test_lock_file_lives_in_the_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    used: list[str] = []
    real_file_lock = app_settings_module.FileLock

    def recording_file_lock(path: str, *args: Any, **kwargs: Any) -> Any:
        used.append(path)
        return real_file_lock(path, *args, **kwargs)

    monkeypatch.setattr(app_settings_module, "FileLock", recording_file_lock)
    data_dir = tmp_path / "data-here"
    _load(CountingLoaders(), data_dir)
    assert [Path(p) for p in used] == [data_dir / ".appsettings.lock"]
    assert (data_dir / ".appsettings.lock").exists()


# --- two processes ------------------------------------------------------------------------

_WORKER = """
import sys, time
from pathlib import Path

from models.app_settings import AppSettingsManager
from models.embeddings import LlamaIndexEmbeddingAdapter, UniversalEmbeddingWrapper
from config.settings import AppConfig

name, data_dir, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])


class Backend:
    tokenizer = object()

    def embed(self, text):
        return [1.0]


def embed_loader(config):
    (out / f"{name}.start").write_text(repr(time.time()))
    time.sleep(1.0)
    return LlamaIndexEmbeddingAdapter(UniversalEmbeddingWrapper(Backend()))


def llm_loader(config, progress):
    (out / f"{name}.end").write_text(repr(time.time()))
    return object()


# A barrier: both processes call load_models at the same moment, so that without the
# file lock their loading intervals would overlap.
(out / f"{name}.ready").touch()
deadline = time.time() + 60
while len(list(out.glob("*.ready"))) < 2 and time.time() < deadline:
    time.sleep(0.01)
app = AppSettingsManager.load_models(
    AppConfig(data_dir=data_dir), llm_loader=llm_loader, embed_loader=embed_loader
)
assert app.locked
"""


def test_two_processes_never_load_at_the_same_time(tmp_path: Path) -> None:
    data_dir = tmp_path / "shared-data"
    out = tmp_path / "out"
    out.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, name, str(data_dir), str(out)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in ("a", "b")
    ]
    for proc in procs:
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, output
    spans = sorted(
        (float((out / f"{n}.start").read_text()), float((out / f"{n}.end").read_text()))
        for n in ("a", "b")
    )
    (start1, end1), (start2, end2) = spans
    assert end1 - start1 >= 1.0 and end2 - start2 >= 1.0
    assert end1 <= start2, f"loading intervals overlap: {spans}"
    assert (data_dir / ".appsettings.lock").exists()


def test_load_embedding_alone_then_load_models_keeps_one_copy(tmp_path: Path) -> None:
    calls: list[str] = []

    def embed_loader(config: AppConfig) -> Any:
        calls.append("embed")
        return LlamaIndexEmbeddingAdapter(UniversalEmbeddingWrapper(FakeBackend()))

    config = AppConfig(data_dir=tmp_path)
    first = AppSettingsManager.load_embedding(config, embed_loader=embed_loader)
    assert AppSettingsManager.load_embedding(config, embed_loader=embed_loader) is first
    assert get_app_settings().llm is None  # no LLM loaded for ingestion or search
    app = AppSettingsManager.load_models(
        config, llm_loader=lambda c, p: "llm", embed_loader=embed_loader
    )
    assert app.embed_model is first
    assert calls == ["embed"]
