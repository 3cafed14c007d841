"""IndexStorage: atomic versioned publication, writer lock, GC, and crash safety at every step."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.schema import Document, NodeRelationship, RelatedNodeInfo, TextNode

from themes.index_storage import (
    CRASH_ENV,
    CRASH_POINTS,
    CURRENT_FILE,
    INDEX_DIR,
    IndexCorrupted,
    IndexInconsistent,
    IndexStorage,
    IndexVersion,
    ThemeBusy,
)
from themes.keyword_index import KeywordIndex
from themes.vector_store import ReadOnlyStoreError

ROOT = Path(__file__).resolve().parent.parent
DIM = 8


def nodes_for(tag: str, n: int) -> list[TextNode]:
    rng = np.random.default_rng(zlib.crc32(tag.encode()))
    nodes = []
    for i in range(n):
        node = TextNode(
            id_=f"{tag}-{i}",
            text=f"{tag} chunk {i}: procédure numéro {i}",
            metadata={"tag": tag},
            embedding=rng.normal(size=DIM).tolist(),
        )
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=f"{tag}-doc{i % 2}")
        nodes.append(node)
    return nodes


def make_storage(theme_dir: Path, **kwargs: Any) -> IndexStorage:
    theme_dir.mkdir(parents=True, exist_ok=True)
    return IndexStorage(theme_dir, **kwargs)


def write_state(storage: IndexStorage, tag: str, n: int) -> str | None:
    """Replace the whole index by state ``tag``: n chunks, 2 documents in the docstore."""
    with storage.writer() as w:
        w.vectors.clear()
        w.vectors.add(nodes_for(tag, n))
        for doc_id in list(w.docstore.docs):
            w.docstore.delete_document(doc_id)
        w.docstore.add_documents(
            [Document(id_=f"{tag}-doc{j}", text=f"{tag} document {j}") for j in range(2)]
        )
        w.docstore.set_document_hash(f"{tag}-doc0", f"hash-{tag}")
    return w.committed_version


def snapshot(version: IndexVersion) -> dict[str, Any]:
    """Everything a reader can observe, in comparable form."""
    return {
        "ids": sorted(version.vectors.node_ids()),
        "texts": sorted(text for _, text in version.vectors.iter_texts()),
        "vectors": sorted(map(tuple, np.round(version.vectors.vectors(), 5).tolist())),
        "keywords": sorted(version.keywords.node_ids()),
        "keyword_hits": sorted(i for i, _ in version.keywords.query("procédure", 100)),
        "docs": sorted(version.docstore.docs),
        "hashes": dict(version.docstore.get_all_document_hashes()),
        "chunks": version.info.get("chunks"),
    }


def expected_snapshot(tmp_path: Path, tag: str, n: int) -> dict[str, Any]:
    reference = make_storage(tmp_path / f"reference-{tag}-{n}")
    write_state(reference, tag, n)
    return snapshot(reference.load_current())


def leftovers(storage: IndexStorage) -> list[str]:
    return sorted(
        p.name
        for p in storage.index_dir.iterdir()
        if p.name.endswith((".tmp", ".trash")) or p.name == f"{CURRENT_FILE}.tmp"
    )


# ---------------------------------------------------------------------------- basics


def test_an_untouched_theme_reads_as_empty(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    assert storage.current_version_name() is None
    version = storage.load_current()
    assert version.name is None
    assert version.vectors.count() == version.keywords.count() == 0
    assert version.vectors.frozen and version.keywords.frozen
    assert storage.list_versions() == []


def test_writer_needs_an_existing_theme_folder(tmp_path: Path) -> None:
    with (
        pytest.raises(FileNotFoundError, match="does not exist"),
        IndexStorage(tmp_path / "typo").writer(),
    ):
        pass
    assert not (tmp_path / "typo").exists()


def test_commit_publishes_a_complete_new_version(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    assert write_state(storage, "a", 4) == "v000001"
    assert (tmp_path / "theme" / INDEX_DIR / CURRENT_FILE).read_text() == "v000001\n"
    version = storage.load_current()
    assert version.name == "v000001"
    assert snapshot(version)["ids"] == [f"a-{i}" for i in range(4)]
    # The keyword index followed the vector store without being touched.
    assert snapshot(version)["keywords"] == snapshot(version)["ids"]
    assert snapshot(version)["keyword_hits"] == snapshot(version)["ids"]
    assert version.docstore.get_document_hash("a-doc0") == "hash-a"
    assert version.info["based_on"] is None and version.info["chunks"] == 4
    assert version.info["documents"] == 2 and version.info["dim"] == DIM

    assert write_state(storage, "b", 3) == "v000002"
    assert storage.load_current().info["based_on"] == "v000001"


def test_incremental_change_keeps_the_rest(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    write_state(storage, "a", 6)
    with storage.writer() as w:
        assert w.base_version == "v000001"
        assert w.vectors.count() == 6  # a copy of the published version
        removed = w.vectors.delete_document("a-doc1")
        w.vectors.add(nodes_for("extra", 1))
    version = storage.load_current()
    assert sorted(removed) == ["a-1", "a-3", "a-5"]
    assert snapshot(version)["ids"] == ["a-0", "a-2", "a-4", "extra-0"]
    assert snapshot(version)["keywords"] == snapshot(version)["ids"]
    assert version.keywords.query("a-1 chunk 1", 10)  # still answers, without a-1
    assert "a-1" not in {i for i, _ in version.keywords.query("chunk 1", 10)}


def test_published_versions_and_closed_writers_are_read_only(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    write_state(storage, "a", 2)
    version = storage.load_current()
    with pytest.raises(ReadOnlyStoreError):
        version.vectors.add(nodes_for("x", 1))
    with storage.writer() as w:
        pass
    with pytest.raises(ReadOnlyStoreError):
        w.vectors.add(nodes_for("late", 1))  # after the block: would never be saved


def test_refresh_reuses_the_loaded_version_until_a_commit(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    write_state(storage, "a", 2)
    first = storage.load_current()
    assert storage.refresh(first) is first
    write_state(storage, "b", 2)
    second = storage.refresh(first)
    assert second is not first and second.name == "v000002"


# ---------------------------------------------------------------------------- failure


def test_exception_in_the_block_publishes_nothing(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    write_state(storage, "a", 3)
    before = snapshot(storage.load_current())
    with pytest.raises(RuntimeError, match="boom"), storage.writer() as w:
        w.vectors.clear()
        raise RuntimeError("boom")
    assert storage.current_version_name() == "v000001"
    assert storage.list_versions() == ["v000001"]
    assert snapshot(storage.load_current()) == before
    assert leftovers(storage) == []


def test_failure_while_writing_removes_the_unfinished_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = make_storage(tmp_path / "theme")
    write_state(storage, "a", 3)

    def disk_full(self: KeywordIndex, persist_path: Any) -> None:
        Path(persist_path).mkdir(parents=True)
        (Path(persist_path) / "half-written").write_bytes(b"x")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(KeywordIndex, "persist", disk_full)
    with pytest.raises(OSError, match="space"):
        write_state(storage, "b", 3)
    assert storage.current_version_name() == "v000001"
    assert storage.list_versions() == ["v000001"]
    assert leftovers(storage) == []


def test_discard_publishes_nothing(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    write_state(storage, "a", 3)
    with storage.writer() as w:
        w.vectors.clear()
        w.discard()
    assert w.committed_version is None
    assert storage.list_versions() == ["v000001"]
    assert storage.load_current().vectors.count() == 3


def test_keywords_out_of_step_are_refused_when_not_synced(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    with pytest.raises(IndexInconsistent), storage.writer(sync_keywords=False) as w:
        w.vectors.add(nodes_for("a", 2))
    assert storage.current_version_name() is None
    with storage.writer(sync_keywords=False) as w:
        w.vectors.add(nodes_for("a", 2))
        w.keywords.add([(n.node_id, "custom keyword text") for n in nodes_for("a", 2)])
    assert storage.load_current().keywords.query("custom", 5)


def test_corrupt_current_is_reported(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    write_state(storage, "a", 2)
    current = storage.index_dir / CURRENT_FILE
    current.write_text("../../etc\n")
    with pytest.raises(IndexCorrupted):
        storage.load_current()
    current.write_text("v000042\n")
    with pytest.raises(IndexCorrupted, match="v000042"):
        storage.load_current()


# ---------------------------------------------------------------------------- lock


def test_second_writer_gets_theme_busy_not_a_hang(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme", lock_timeout=0.2)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with storage.writer():
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(5)
        started = time.monotonic()
        with pytest.raises(ThemeBusy, match="'theme'.*another writer"), storage.writer():
            pass
        assert time.monotonic() - started < 2.0
        # Readers never wait for the lock.
        assert storage.load_current().name is None
    finally:
        release.set()
        holder.join()
    assert holder.is_alive() is False
    with storage.writer(lock_timeout=0.2):  # free again
        pass
    # Same thread, nested: a second writer, not a re-entrant one.
    with storage.writer(), pytest.raises(ThemeBusy), storage.writer(lock_timeout=0.1):
        pass


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_writer_in_another_process_makes_this_one_busy(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme", lock_timeout=0.2)
    ready_r, ready_w = os.pipe()
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: hold the lock until the parent closes the pipe
        code = 1
        try:
            os.close(ready_r)
            os.close(stop_w)
            with storage.writer() as w:
                os.write(ready_w, b"1")
                os.read(stop_r, 1)
                w.discard()
            code = 0
        finally:
            os._exit(code)
    os.close(ready_w)
    os.close(stop_r)
    try:
        assert os.read(ready_r, 1) == b"1"
        with pytest.raises(ThemeBusy), storage.writer():
            pass
    finally:
        os.close(stop_w)
        _, status = os.waitpid(pid, 0)
        os.close(ready_r)
    assert os.waitstatus_to_exitcode(status) == 0
    with storage.writer():
        pass


# ---------------------------------------------------------------------------- GC


def test_gc_keeps_the_current_and_the_previous_version(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    for i in range(5):
        write_state(storage, f"s{i}", 2)
    assert storage.list_versions() == ["v000004", "v000005"]
    assert storage.current_version_name() == "v000005"
    assert storage.load_version("v000004").vectors.node_ids() == ["s3-0", "s3-1"]
    assert leftovers(storage) == []


def test_next_writer_removes_crash_leftovers(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    write_state(storage, "a", 2)
    index = storage.index_dir
    (index / "v000007.tmp" / "vectors").mkdir(parents=True)
    (index / "v000007.tmp" / "vectors" / "vectors.npy").write_bytes(b"partial")
    (index / "v000000.trash").mkdir()
    (index / f"{CURRENT_FILE}.tmp").write_text("v000007")
    (index / "v000005").mkdir()  # complete-looking but never published
    assert storage.load_current().name == "v000001"  # readers ignore all of it
    write_state(storage, "b", 2)
    assert leftovers(storage) == []
    assert storage.list_versions() == ["v000001", "v000006"]
    assert storage.current_version_name() == "v000006"


def test_every_new_file_and_folder_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to map descriptors to paths")
    storage = make_storage(tmp_path / "theme")
    write_state(storage, "a", 2)
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    name = write_state(storage, "b", 3)
    assert name is not None
    tmp_root = str(storage.index_dir / f"{name}.tmp")
    expected = {tmp_root} | {
        str(p).replace(str(storage.index_dir / name), tmp_root)
        for p in (storage.index_dir / name).rglob("*")
    }
    assert expected <= set(synced)
    assert str(storage.index_dir) in synced  # after the rename and after the switch
    assert synced.count(str(storage.index_dir)) >= 2
    assert str(storage.index_dir / f"{CURRENT_FILE}.tmp") in synced


# ---------------------------------------------------------------------------- crashes


def _prepare_old_state(tmp_path: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """A theme with two versions (so the crashing commit has garbage to collect)."""
    template = tmp_path / "template"
    storage = make_storage(template)
    write_state(storage, "older", 3)
    write_state(storage, "old", 5)
    old = snapshot(storage.load_current())
    new = expected_snapshot(tmp_path, "new", 7)
    assert old != new
    return template, old, new


def _crash_child(theme: Path, step: str) -> int:
    """Fork a writer that dies at ``step``; return its exit code (1 = died there)."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.environ[CRASH_ENV] = step
            write_state(IndexStorage(theme), "new", 7)
            code = 0  # the step was never reached
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_crash_at_any_step_leaves_the_old_or_the_new_version(tmp_path: Path) -> None:
    template, old, new = _prepare_old_state(tmp_path)
    switched_at = CRASH_POINTS.index("current_replaced")
    for position, step in enumerate(CRASH_POINTS):
        theme = tmp_path / f"crash-{step}"
        shutil.copytree(template, theme)
        assert _crash_child(theme, step) == 1, f"writer did not die at {step!r}"

        storage = IndexStorage(theme)
        after_crash = snapshot(storage.load_current())
        expected = new if position >= switched_at else old
        assert after_crash == expected, f"crash at {step!r}: neither intact old nor new"
        published = storage.current_version_name()

        # The next writer cleans up and keeps exactly the published and the new version.
        write_state(storage, "after", 2)
        assert leftovers(storage) == [], step
        assert storage.list_versions() == sorted(
            {published, storage.current_version_name()}, key=lambda n: n or ""
        ), step
        assert snapshot(storage.load_version(published or ""))["ids"] == expected["ids"]
        assert snapshot(storage.load_current())["ids"] == ["after-0", "after-1"]


def test_crash_point_works_in_a_fresh_interpreter(tmp_path: Path) -> None:
    template, old, _new = _prepare_old_state(tmp_path)
    theme = tmp_path / "crash-subprocess"
    shutil.copytree(template, theme)
    child = (
        "import sys\n"
        "from tests.test_index_storage import write_state\n"
        "from themes.index_storage import IndexStorage\n"
        "write_state(IndexStorage(sys.argv[1]), 'new', 7)\n"
    )
    env = {**os.environ, CRASH_ENV: "version_renamed", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", child, str(theme)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr.decode()[-2000:]
    storage = IndexStorage(theme)
    assert snapshot(storage.load_current()) == old
    # A complete but unpublished version is left behind; the next writer removes it.
    assert storage.list_versions() == ["v000001", "v000002", "v000003"]
    write_state(storage, "after", 1)
    assert storage.list_versions() == ["v000002", "v000004"]


# ---------------------------------------------------------------------------- readers


def test_readers_never_see_a_partial_version(tmp_path: Path) -> None:
    storage = make_storage(tmp_path / "theme")
    commits = 12
    done = threading.Event()
    seen: set[str] = set()
    loads = 0
    errors: list[BaseException] = []

    def reader() -> None:
        nonlocal loads
        try:
            while not done.is_set():
                version = make_storage(tmp_path / "theme").load_current()
                loads += 1
                if version.name is None:
                    continue
                state = snapshot(version)
                tags = {text.split()[0] for text in state["texts"]}
                assert len(tags) == 1, f"{version.name} mixes {tags}"
                tag = tags.pop()
                n = int(tag[1:]) + 1
                assert state["ids"] == sorted(f"{tag}-{i}" for i in range(n))
                assert state["keywords"] == state["ids"] == state["keyword_hits"]
                assert state["docs"] == [f"{tag}-doc0", f"{tag}-doc1"]
                assert state["chunks"] == n and len(state["vectors"]) == n
                seen.add(version.name)
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for i in range(commits):
            write_state(storage, f"g{i}", i + 1)
            time.sleep(0.01)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert not errors, errors[0]
    assert loads > commits
    assert len(seen) >= 2
