"""A theme's index storage, the same contract on both backends (files, PostgreSQL).

Published versions are complete and read-only, a failed or discarded writer publishes
nothing, a second writer (thread or process) is told the theme is busy instead of
waiting, readers never see half a version, and deleting a theme waits for its writer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import Document
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from tests.backends import Backend
from themes.index_storage import IndexVersion, ThemeBusy
from themes.store_protocol import ThemeIndexStorage
from themes.theme import Theme, ThemeRepository

ROOT = Path(__file__).resolve().parent.parent
DIM = 8


def nodes_for(tag: str, n: int) -> list[TextNode]:
    rng = np.random.default_rng(zlib.crc32(tag.encode()))
    nodes = []
    for i in range(n):
        node = TextNode(
            id_=f"{tag}-{i}",
            text=f"{tag} chunk {i}: procédure numéro {i}",
            embedding=rng.normal(size=DIM).tolist(),
        )
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=f"{tag}-doc{i % 2}")
        nodes.append(node)
    return nodes


def write_state(storage: ThemeIndexStorage, tag: str, n: int) -> str | None:
    """Replace the whole index by state ``tag``: n chunks, 2 documents in the docstore."""
    with storage.writer() as w:
        w.clear()
        w.vectors.add(nodes_for(tag, n))
        w.docstore.add_documents(
            [Document(id_=f"{tag}-doc{j}", text=f"{tag} document {j}") for j in range(2)]
        )
    return w.committed_version


def observe(version: IndexVersion) -> dict[str, Any]:
    """Everything a reader sees of a version, read in one snapshot."""
    with version.vectors.snapshot():
        return {
            "ids": sorted(version.vectors.node_ids()),
            "count": version.vectors.count(),
            "texts": sorted(text for _, text in version.vectors.iter_texts()),
            "keywords": sorted(version.keywords.node_ids()),
            "keyword_hits": sorted(i for i, _ in version.keywords.query("procédure", 100)),
            "docs": sorted(version.docstore.docs),
        }


@pytest.fixture
def theme(tmp_path: Path, backend: Backend) -> Theme:
    return ThemeRepository(tmp_path / "data", backend.store).create("docs")


def test_an_untouched_theme_reads_as_empty(theme: Theme) -> None:
    version = theme.load_data()
    assert version.name is None and theme.storage.current_version_name() is None
    assert version.vectors.count() == version.keywords.count() == 0
    assert version.keywords.query("procédure") == []


def test_commit_publishes_a_complete_read_only_version(theme: Theme) -> None:
    name = write_state(theme.storage, "a", 5)
    assert name is not None and theme.storage.current_version_name() == name
    version = theme.load_data()
    assert version.name == name
    state = observe(version)
    assert state["ids"] == state["keywords"] == state["keyword_hits"]
    assert state["count"] == 5 and state["docs"] == ["a-doc0", "a-doc1"]
    with pytest.raises(RuntimeError, match="read-only"):
        version.vectors.add(nodes_for("b", 1))
    second = write_state(theme.storage, "b", 3)
    assert second != name and theme.storage.refresh(version).name == second
    assert theme.storage.refresh(theme.load_data()).name == second


def test_exception_or_discard_publishes_nothing(theme: Theme) -> None:
    first = write_state(theme.storage, "a", 4)
    with pytest.raises(ZeroDivisionError), theme.storage.writer() as w:
        w.vectors.add(nodes_for("b", 3))
        w.docstore.add_documents([Document(id_="b-doc0", text="b")])
        raise ZeroDivisionError
    with theme.storage.writer() as w:
        w.clear()
        w.discard()
    assert w.committed_version is None
    assert theme.storage.current_version_name() == first
    state = observe(theme.load_data())
    assert state["ids"] == sorted(f"a-{i}" for i in range(4))
    assert state["docs"] == ["a-doc0", "a-doc1"]


def test_second_writer_gets_theme_busy_not_a_hang(theme: Theme) -> None:
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with theme.storage.writer():
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(5)
        started = time.monotonic()
        busy = pytest.raises(ThemeBusy, match="'docs'.*another writer")
        with busy, theme.storage.writer(lock_timeout=0.2):
            pass
        assert time.monotonic() - started < 2.0
        assert theme.load_data().name is None  # readers never wait for the lock
    finally:
        release.set()
        holder.join()
    with theme.storage.writer(lock_timeout=0.2):  # free again
        pass


_HOLDER = """
import sys, time
from pathlib import Path
from themes.theme import ThemeRepository
theme = ThemeRepository(Path(sys.argv[1])).get("docs")
with theme.storage.writer() as w:
    print("holding", flush=True)
    sys.stdin.readline()
    w.discard()
"""


def test_writer_in_another_process_makes_this_one_busy(
    theme: Theme, backend: Backend, tmp_path: Path
) -> None:
    env = {**os.environ, "VECTOR_BACKEND": backend.kind, "PYTHONPATH": str(ROOT)}
    if backend.url:
        env["DATABASE_URL"] = backend.url
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path / "data")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding"
        with pytest.raises(ThemeBusy), theme.storage.writer(lock_timeout=0.3):
            pass
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.close()
        assert child.wait(30) == 0
    with theme.storage.writer(lock_timeout=2):
        pass


def test_deleting_a_theme_waits_for_its_writer(theme: Theme, tmp_path: Path) -> None:
    repo = ThemeRepository(tmp_path / "data", theme.store)
    write_state(theme.storage, "a", 2)
    with theme.storage.writer(), pytest.raises(ThemeBusy):
        repo.delete("docs", lock_timeout=0.2)
    assert repo.names() == ["docs"]
    repo.delete("docs")
    assert repo.names() == []


def test_readers_never_see_a_partial_version(theme: Theme) -> None:
    commits = 8
    done = threading.Event()
    seen: set[str] = set()
    loads = 0
    errors: list[BaseException] = []

    def reader() -> None:
        nonlocal loads
        try:
            while not done.is_set():
                version = theme.storage.load_current()
                loads += 1
                if version.name is None:
                    continue
                state = observe(version)
                tags = {text.split()[0] for text in state["texts"]}
                assert len(tags) == 1, f"{version.name} mixes {tags}"
                tag = tags.pop()
                n = int(tag[1:]) + 1
                assert state["ids"] == sorted(f"{tag}-{i}" for i in range(n))
                assert state["keywords"] == state["ids"] == state["keyword_hits"]
                assert state["docs"] == [f"{tag}-doc0", f"{tag}-doc1"]
                assert state["count"] == n
                seen.add(version.name)
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for i in range(commits):
            write_state(theme.storage, f"g{i}", i + 1)
            time.sleep(0.02)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert not errors, errors[0]
    assert loads > commits
    assert len(seen) >= 2
