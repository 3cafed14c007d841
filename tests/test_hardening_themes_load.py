"""Issue 11, load: 20 concurrent operations on one theme (threads: 10 ingests, 8 readers
checking every version they load and searching it, 2 chat turns through the engine with
the scripted model; then CLI processes). No lost update, no corrupted index, every writer
that finds the theme taken is told "busy", readers never see a half-written version.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from engine import StopReason
from tests.fakes import ScriptedLLM
from tests.test_theme_rag import consume, engine_for, search
from tests.themes_hardening import fast_embedding
from themes.cli import EXIT_BUSY, EXIT_OK
from themes.index_storage import IndexVersion
from themes.ingest import IngestBusy, health, ingest_files
from themes.retrieval import HybridRetriever
from themes.theme import Theme, ThemeRepository

ROOT = Path(__file__).resolve().parents[1]
WRITERS, READERS, CHATS = 10, 8, 2
TOPICS = [
    "purge de la pompe", "joint torique", "vanne de sécurité", "filtre à huile", "courroie",
    "roulement", "capteur de pression", "moteur électrique", "compresseur", "échangeur",
]  # fmt: skip


def document(i: int) -> str:
    return (
        f"# Fiche {i}\n\nProcédure {i} : {TOPICS[i]}. Contrôler le {TOPICS[i]} chaque mois "
        f"et noter la valeur relevée dans le registre numéro {1000 + i}.\n"
    )


@pytest.fixture
def theme(_isolated_data_dir: Path, tmp_path: Path) -> Theme:
    theme = ThemeRepository(_isolated_data_dir).create("t")
    # The scripted turns: no search before the first step, no query translation by the LLM.
    theme.settings.retrieval.search_first = False
    theme.settings.retrieval.translate_queries = False
    theme.save_settings()
    base = tmp_path / "base.md"
    base.write_text("# Base\n\nLa maintenance commence par la purge de la pompe.\n", "utf-8")
    ingest_files(theme, [base], fast_embedding())
    return theme


def check_complete(version: IndexVersion) -> None:
    """What a reader may rely on: a version is whole, never half of two."""
    assert version.name is not None
    assert version.info["chunks"] == version.vectors.count() == version.keywords.count()
    assert set(version.vectors.node_ids()) == set(version.keywords.node_ids())
    assert version.info["documents"] == len(version.vectors.ref_doc_ids())


def test_twenty_concurrent_operations_on_one_theme(theme: Theme, tmp_path: Path) -> None:
    model = fast_embedding()
    sources = tmp_path / "sources"
    sources.mkdir()
    for i in range(WRITERS):
        (sources / f"fiche-{i}.md").write_text(document(i), encoding="utf-8")
    start = threading.Barrier(WRITERS + READERS + CHATS)
    stop = threading.Event()
    results: dict[str, Any] = {}
    versions_seen: set[str] = set()

    def writer(i: int) -> None:
        start.wait()
        try:
            # Even writers wait for the lock (they must all get through, one after the
            # other); odd ones give up at once (they are told busy, or slip in between).
            timeout = 120.0 if i % 2 == 0 else 0.05
            report = ingest_files(theme, [sources / f"fiche-{i}.md"], model, lock_timeout=timeout)
            results[f"w{i}"] = report
        except Exception as exc:  # noqa: BLE001 - every outcome is checked below
            results[f"w{i}"] = exc

    def reader(i: int) -> None:
        start.wait()
        try:
            loads = 0
            while not stop.is_set() or loads < 3:
                version = theme.storage.load_current()
                check_complete(version)
                versions_seen.add(str(version.name))
                retriever = HybridRetriever(version, model, theme.settings.retrieval)
                retriever.retrieve(TOPICS[i % len(TOPICS)])
                loads += 1
            results[f"r{i}"] = loads
        except BaseException as exc:  # noqa: BLE001 - a reader must never fail
            results[f"r{i}"] = exc

    def chat(i: int) -> None:
        start.wait()
        try:
            llm = ScriptedLLM([search(TOPICS[i]), "Answer: voir la fiche."])
            engine = engine_for(llm, model, tool_timeout_s=120.0)
            engine.start(theme="t")
            asyncio.run(consume(engine, f"Comment contrôler le {TOPICS[i]} ?"))
            results[f"c{i}"] = engine.last_outcome
        except BaseException as exc:  # noqa: BLE001 - checked below
            results[f"c{i}"] = exc

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    threads += [threading.Thread(target=chat, args=(i,)) for i in range(CHATS)]
    for thread in threads:
        thread.start()
    for thread in threads[:WRITERS]:
        thread.join(300)
    stop.set()
    for thread in threads[WRITERS:]:
        thread.join(300)
    assert not any(t.is_alive() for t in threads)

    outcomes = [results[f"w{i}"] for i in range(WRITERS)]
    done = [r for r in outcomes if not isinstance(r, BaseException)]
    busy = [r for r in outcomes if isinstance(r, IngestBusy)]
    assert len(done) + len(busy) == WRITERS, [r for r in outcomes if r not in done + busy]
    assert busy and all(i % 2 == 1 for i, r in enumerate(outcomes) if r in busy)
    assert all(not isinstance(outcomes[i], BaseException) for i in range(0, WRITERS, 2))
    assert all("is busy: another ingest" in str(b) for b in busy)

    # No lost update: exactly the files of the writers that succeeded, nothing of the others.
    ingested = {r.files[0].file_name for r in done}
    assert all(r.files[0].status == "ingested" and r.version for r in done)
    final = theme.load_data()
    check_complete(final)
    assert final.vectors.ref_doc_ids() == ingested | {"base.md"}
    on_disk = {p.name for p in theme.documents_dir.iterdir() if not p.name.startswith(".")}
    assert on_disk == ingested | {"base.md"}
    theme.storage.check_current()  # sizes and checksums of every file
    assert health(theme).ok
    assert int(str(final.name)[1:]) == 1 + len(done)  # one version per successful writer

    for i in range(READERS):
        assert isinstance(results[f"r{i}"], int), results[f"r{i}"]
    # Readers ran while versions were published, and only ever saw complete ones.
    assert len(versions_seen) >= 2
    for i in range(CHATS):
        outcome = results[f"c{i}"]
        assert not isinstance(outcome, BaseException), outcome
        assert outcome.stop_reason is StopReason.ANSWERED
        assert outcome.sources and {s.file for s in outcome.sources} <= ingested | {"base.md"}


def _cli(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "themes", "--json", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def test_cli_processes_are_told_busy_and_lose_nothing(theme: Theme, tmp_path: Path) -> None:
    files = []
    for i in range(3):
        path = tmp_path / f"proc-{i}.md"
        path.write_text(document(i), encoding="utf-8")
        files.append(path)
    with theme.storage.exclusive():
        held = [_cli("ingest", "t", str(path)) for path in files[:2]]
        for proc in held:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == EXIT_BUSY and out == "", err
            assert err.count("\n") == 1 and err.startswith("busy: "), err
    assert theme.load_data().vectors.ref_doc_ids() == {"base.md"}

    racing = [_cli("ingest", "t", str(path)) for path in files]
    codes: dict[str, int] = {}
    for path, proc in zip(files, racing, strict=True):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode in (EXIT_OK, EXIT_BUSY), err
        if proc.returncode == EXIT_OK:
            assert json.loads(out)["files"][0]["status"] == "ingested"
        else:
            assert err.startswith("busy: ") and err.count("\n") == 1
        codes[path.name] = proc.returncode
    final = theme.load_data()
    check_complete(final)
    winners = {name for name, code in codes.items() if code == EXIT_OK}
    assert winners and final.vectors.ref_doc_ids() == winners | {"base.md"}
    assert health(theme).ok
