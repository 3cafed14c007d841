"""AppSettings: the process-wide, locked holder of the app's models.

llama-index's global ``Settings`` can be reset or overwritten implicitly; this
singleton is initialised once (thread lock + a file lock in the data
directory for several processes), traced (who, when), validated and then
locked. Everything in the app gets its models from here.
"""

from __future__ import annotations

import importlib.metadata
import threading
import time
import traceback
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field

from config.settings import AppConfig, get_config
from models.errors import ModelError
from models.progress import Progress


class AppSettingsError(ModelError):
    """AppSettings is incomplete, or someone tried to change it once locked."""


class AppSettings(BaseModel):
    """The models shared by the whole process."""

    model_config = ConfigDict(
        arbitrary_types_allowed=True, validate_assignment=True, extra="forbid"
    )

    llm: Any | None = None
    embed_model: Any | None = None
    tokenizer: Any | None = None
    versions: dict[str, str] | None = None
    locked: bool = Field(default=False, exclude=True)
    initialized_by: str | None = None
    initialized_at: float | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "locked", False):
            raise AppSettingsError(f"AppSettings is locked: {name} cannot change")
        super().__setattr__(name, value)


@lru_cache(maxsize=1)
def get_app_settings() -> AppSettings:
    """The process-wide instance."""
    return AppSettings()


_thread_lock = threading.Lock()
# The embedding loaded before the LLM (see load_embedding), handed over to AppSettings.
_embedding_cache: dict[str, Any] = {}
_STATE_FIELDS = ("llm", "embed_model", "tokenizer", "versions", "initialized_by", "initialized_at")
_VERSIONED = ("llama-index-core", "sentence-transformers", "llama_cpp_python", "torch")

LLMLoader = Callable[[AppConfig, Progress | None], Any]
EmbedLoader = Callable[[AppConfig], Any]


def _default_llm(config: AppConfig, progress: Progress | None) -> Any:
    from models.llms import build_llm

    return build_llm(config, progress)


def _default_embedding(config: AppConfig) -> Any:
    from models.embeddings import LlamaIndexEmbeddingAdapter, UniversalEmbeddingWrapper
    from models.factory import ModelLoaderFactory

    factory = ModelLoaderFactory(config.data_dir)
    name = "sentence-transformers/all-MiniLM-L6-v2"
    backend = factory.create_embedding(None, name, "sentence_transformer")
    return LlamaIndexEmbeddingAdapter(UniversalEmbeddingWrapper(backend), model_name=name)


class AppSettingsManager:
    """The only way to initialise ``AppSettings``."""

    @staticmethod
    def load_models(
        config: AppConfig | None = None,
        *,
        llm_loader: LLMLoader = _default_llm,
        embed_loader: EmbedLoader = _default_embedding,
        progress: Progress | None = None,
    ) -> AppSettings:
        """Load, validate and lock the models once; later calls return at once."""
        app = get_app_settings()
        if app.locked:
            return app
        config = config or get_config()
        lock_path = Path(config.data_dir) / ".appsettings.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(lock_path)), _thread_lock:
            if app.locked:
                return app
            embed_model = _embedding_cache.pop("model", None) or embed_loader(config)
            llm = llm_loader(config, progress)
            try:
                app.initialized_by = "".join(traceback.format_stack(limit=10))
                app.initialized_at = time.time()
                app.embed_model = embed_model
                app.llm = llm
                app.tokenizer = _tokenizer_of(embed_model)
                app.versions = _versions()
                AppSettingsManager.validate()
            except Exception:
                # Fail closed: nobody may read a half-initialised, unvalidated state.
                for name in _STATE_FIELDS:
                    setattr(app, name, None)
                raise
            AppSettingsManager.lock()
        return app

    @staticmethod
    def load_embedding(
        config: AppConfig | None = None, *, embed_loader: EmbedLoader = _default_embedding
    ) -> Any:
        """The app's embedding model alone (ingestion and search need no LLM).

        The same object later becomes ``AppSettings.embed_model`` when
        ``load_models`` completes, so the process holds one copy.
        """
        app = get_app_settings()
        if app.locked:
            return app.embed_model
        config = config or get_config()
        lock_path = Path(config.data_dir) / ".appsettings.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(lock_path)), _thread_lock:
            if app.locked:
                return app.embed_model
            if "model" not in _embedding_cache:
                _embedding_cache["model"] = embed_loader(config)
            return _embedding_cache["model"]

    @staticmethod
    def validate() -> None:
        """Fail closed when a model is missing."""
        app = get_app_settings()
        missing = [n for n in ("llm", "embed_model", "tokenizer") if getattr(app, n) is None]
        if missing:
            raise AppSettingsError(f"AppSettings is missing: {', '.join(missing)}")

    @staticmethod
    def lock() -> None:
        """No change after this."""
        get_app_settings().locked = True

    @staticmethod
    def describe() -> dict[str, Any]:
        """What is loaded, for diagnostics."""
        app = get_app_settings()
        return {
            "llm": type(app.llm).__name__ if app.llm is not None else None,
            "embed_model": type(app.embed_model).__name__ if app.embed_model is not None else None,
            "tokenizer": type(app.tokenizer).__name__ if app.tokenizer is not None else None,
            "versions": app.versions,
            "locked": app.locked,
            "initialized_by": app.initialized_by,
            "initialized_at": app.initialized_at,
        }

    @staticmethod
    def reset_for_tests() -> None:
        """Forget the instance (tests only: a real process initialises once)."""
        get_app_settings.cache_clear()
        _embedding_cache.clear()


def _tokenizer_of(embed_model: Any) -> Any:
    wrapper = getattr(embed_model, "wrapper", None)
    backend = getattr(wrapper, "embedding", None)
    tokenizer = getattr(backend, "tokenizer", None)
    return tokenizer if tokenizer is not None else getattr(embed_model, "tokenizer", None)


def _versions() -> dict[str, str]:
    found = {}
    for name in _VERSIONED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found
