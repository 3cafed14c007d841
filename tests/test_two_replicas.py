"""Two replicas of Chatitego on one PostgreSQL database (``VECTOR_BACKEND=postgres``).

Each replica is a separate process (``tests/replica_worker.py``) with its own data
directory, so nothing is shared but the database: a document ingested through one is
retrieved by the other, a document removed through the second is gone from the first, and
a writer that finds the other replica holding the theme's lock is told "busy".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.backends import BACKENDS, fresh_database

pytestmark = pytest.mark.skipif("postgres" not in BACKENDS, reason="VECTOR_BACKEND=embedded")

ROOT = Path(__file__).resolve().parent.parent
WEDDING = (
    "Un salarié qui se marie bénéficie de quatre jours de congé exceptionnel, accordés sur "
    "présentation de l'acte de mariage au service des ressources humaines."
)
BADGE = (
    "Le badge d'accès au parking souterrain se retire à l'accueil du bâtiment B contre une "
    "caution de vingt euros, restituée au départ du salarié."
)


class Replica:
    """One worker process and its JSON-lines conversation."""

    def __init__(self, data_dir: Path, database_url: str) -> None:
        env = dict(os.environ)
        env.update(
            VECTOR_BACKEND="postgres",
            DATABASE_URL=database_url,
            CHATITEGO_DATA_DIR=str(data_dir),
            DATA_DIR=str(data_dir),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.replica_worker", str(data_dir)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.read() == {"ready": "postgres"}

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"replica exited with {self.process.poll()}"
        result: dict[str, Any] = json.loads(line)
        return result

    def send(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.send(op="quit")
        self.process.wait(timeout=30)


@pytest.fixture
def replicas(tmp_path: Path, postgres_server: str) -> Iterator[tuple[Replica, Replica]]:
    with fresh_database(postgres_server) as url:
        first = Replica(tmp_path / "replica-1", url)
        second = Replica(tmp_path / "replica-2", url)
        try:
            yield first, second
        finally:
            for replica in (first, second):
                try:
                    replica.close()
                except Exception:  # noqa: BLE001 - kill what did not quit
                    replica.process.kill()


@pytest.mark.timeout(300)
def test_two_replicas_share_one_database(replicas: tuple[Replica, Replica], tmp_path: Path) -> None:
    first, second = replicas
    upload = tmp_path / "upload"
    upload.mkdir()
    (upload / "conges.txt").write_text(WEDDING, encoding="utf-8")
    (upload / "parking.txt").write_text(BADGE, encoding="utf-8")

    assert first.send(op="create", theme="rh")["ok"]
    empty = second.send(op="retrieve", theme="rh", query="congé mariage")
    assert empty["texts"] == []

    # Ingested through the first, retrieved through the second.
    assert first.send(op="ingest", theme="rh", path=str(upload / "conges.txt"))["ok"]
    assert first.send(op="ingest", theme="rh", path=str(upload / "parking.txt"))["ok"]
    found = second.send(op="retrieve", theme="rh", query="Combien de jours pour un mariage ?")
    assert any("quatre jours" in text for text in found["texts"])
    assert any("parking" in text for text in found["texts"])

    # Removed through the second, gone from the first.
    assert second.send(op="remove", theme="rh", name="conges.txt")["ok"]
    after = first.send(op="retrieve", theme="rh", query="Combien de jours pour un mariage ?")
    assert after["version"] != found["version"]
    assert not any("quatre jours" in text for text in after["texts"])
    assert any("parking" in text for text in after["texts"])

    # A second writer is told "busy" while the other replica holds the theme's lock.
    assert first.send(op="hold", theme="rh")["held"]
    busy = second.send(op="ingest", theme="rh", path=str(upload / "conges.txt"))
    assert busy["busy"] and not busy["ok"]
    busy = second.send(op="remove", theme="rh", name="parking.txt")
    assert busy["busy"] and not busy["ok"]
    assert first.send(op="release")["released"]
    # Free again: the second replica's write goes through, and the first sees it.
    assert second.send(op="ingest", theme="rh", path=str(upload / "conges.txt"))["ok"]
    again = first.send(op="retrieve", theme="rh", query="Combien de jours pour un mariage ?")
    assert any("quatre jours" in text for text in again["texts"])
