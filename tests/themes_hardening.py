"""Helpers of the themes hardening tests (issue 11): CLI runs, file-tree snapshots, a real
read-only folder, and a fast embedding with the real tokenizer."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from models.embeddings import LlamaIndexEmbeddingAdapter, load_packaged_minilm
from themes.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``python -m themes ARGV`` in-process: (exit code, stdout, stderr) of that command only
    (what the test printed before, e.g. loading a model, is dropped)."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    """The single line on stderr (fails the test if there is not exactly one)."""
    assert "Traceback" not in err, err
    assert err.endswith("\n") and err.count("\n") == 1, repr(err)
    return err.rstrip("\n")


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` (relative) -> sha256 of a file's bytes, or "dir"/"link"."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        for name in dirs:
            out[(here / name).relative_to(root).as_posix()] = "dir"
        for name in files:
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = "link"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _all_paths(root: Path) -> list[Path]:
    paths = [root]
    for folder, dirs, files in os.walk(root):
        paths += [Path(folder) / n for n in dirs + files]
    return paths


@contextmanager
def read_only(root: Path) -> Iterator[None]:
    """Make ``root`` and everything in it really read-only, for this process too.

    Not root: permissions (writes fail with EACCES). Root ignores permissions, so the
    immutable attribute is used (``chattr +i``: EPERM even for root); where neither is
    possible the test is skipped, never faked. Undone on exit, whatever happens.
    """
    paths = _all_paths(root)
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(modes[p] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield
        finally:
            for p in reversed(paths):
                p.chmod(modes[p])
        return
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("running as root without chattr: cannot make a folder read-only")
    done = subprocess.run([chattr, "-R", "+i", str(root)], capture_output=True, check=False)
    try:
        if done.returncode != 0:
            pytest.skip(f"chattr +i not supported here: {done.stderr.decode().strip()}")
        probe = root / ".probe"
        try:
            probe.write_text("x")
        except OSError:
            pass
        else:
            probe.unlink()
            pytest.skip("chattr +i did not make the folder read-only here")
        yield
    finally:
        subprocess.run([chattr, "-R", "-i", str(root)], capture_output=True, check=False)


class FastEmbedding(LlamaIndexEmbeddingAdapter):
    """all-MiniLM-L6-v2's tokenizer (chunking is real) with a cheap deterministic vector per
    text instead of the network: memory and concurrency tests embed thousands of chunks."""

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "little")
            vector = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
            out.append((vector / np.linalg.norm(vector)).tolist())
        return out

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embeddings([query])[0]


def fast_embedding() -> FastEmbedding:
    real = load_packaged_minilm()
    return FastEmbedding(real.wrapper, model_name=real.model_name)
