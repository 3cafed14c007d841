"""A theme's original documents as rows of ``chatitego_documents`` (bytes, sha256, size).

Reads go through the pool; a writer's changes (``PgDocumentChanges``) are rows written in
its own transaction, so a document and its chunks are published together or not at all,
and nothing has to be moved back when a commit fails. A document is parsed from a copy
written into the writer's staging folder (``readable_path``).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from themes.documents import DocumentChanges, StoredDocument
from themes.pg.database import Database
from themes.readers import RejectedFile

if TYPE_CHECKING:
    from themes.index_storage import IndexWriter

_THEME_ID = "(SELECT id FROM chatitego_themes WHERE name = %s)"


class PgDocumentChanges:
    """Implements ``DocumentChanges`` in a writer's transaction."""

    def __init__(self, conn: psycopg.Connection[Any], theme_id: int) -> None:
        self.conn = conn
        self.theme_id = theme_id
        self.done: list[str] = []

    def install(self, staged: Path, name: str) -> None:
        content = staged.read_bytes()
        self.conn.execute(
            "INSERT INTO chatitego_documents (theme_id, name, content, sha256, size) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (theme_id, name) DO UPDATE SET "
            "content = EXCLUDED.content, sha256 = EXCLUDED.sha256, size = EXCLUDED.size, "
            "updated_at = now()",
            (self.theme_id, name, content, hashlib.sha256(content).hexdigest(), len(content)),
        )
        self.done.append(name)

    def take_out(self, name: str) -> None:
        self.conn.execute(
            "DELETE FROM chatitego_documents WHERE theme_id = %s AND name = %s",
            (self.theme_id, name),
        )
        self.done.append(name)

    def rollback(self) -> None:
        """Nothing to do: the writer's transaction is rolled back with everything in it."""
        self.done.clear()

    def make_durable(self) -> None:
        """Nothing to do: the commit makes the rows durable with the index."""


class PgDocuments:
    """One theme's documents in the database; implements ``DocumentFiles``."""

    def __init__(self, database: Database, theme_name: str) -> None:
        self.database = database
        self.theme_name = theme_name

    def entries(self) -> list[StoredDocument]:
        with self.database.connection() as conn:
            rows = conn.execute(
                "SELECT name, size, updated_at FROM chatitego_documents "
                f"WHERE theme_id = {_THEME_ID} ORDER BY name",
                (self.theme_name,),
            ).fetchall()
        return [
            StoredDocument(row[0], "file", int(row[1]), row[2].isoformat(timespec="seconds"))
            for row in rows
        ]

    def names(self) -> list[str]:
        return [entry.name for entry in self.entries()]

    def exists(self, name: str) -> bool:
        with self.database.connection() as conn:
            row = conn.execute(
                f"SELECT 1 FROM chatitego_documents WHERE theme_id = {_THEME_ID} AND name = %s",
                (self.theme_name, name),
            ).fetchone()
        return row is not None

    def digest(self, name: str) -> tuple[str, int]:
        with self.database.connection() as conn:
            row = conn.execute(
                "SELECT sha256, size FROM chatitego_documents "
                f"WHERE theme_id = {_THEME_ID} AND name = %s",
                (self.theme_name, name),
            ).fetchone()
        if row is None:
            raise RejectedFile(name, "no such stored document, not indexed")
        return str(row[0]), int(row[1])

    def read_bytes(self, name: str) -> bytes:
        with self.database.connection() as conn:
            row = conn.execute(
                "SELECT content FROM chatitego_documents "
                f"WHERE theme_id = {_THEME_ID} AND name = %s",
                (self.theme_name, name),
            ).fetchone()
        if row is None:
            raise FileNotFoundError(f"theme {self.theme_name!r} stores no document {name!r}")
        return bytes(row[0])

    def readable_path(self, name: str, scratch: Path) -> Path:
        try:
            content = self.read_bytes(name)
        except FileNotFoundError:
            raise RejectedFile(name, "no such stored document, not indexed") from None
        folder = scratch / "stored"
        folder.mkdir(exist_ok=True)
        path = folder / name
        path.write_bytes(content)
        return path

    @contextmanager
    def staging(self) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="chatitego-staging-") as folder:
            yield Path(folder)

    def changes(self, writer: IndexWriter, staging: Path) -> DocumentChanges:
        from themes.pg.index_storage import PgIndexWriter

        if not isinstance(writer, PgIndexWriter):
            raise TypeError("documents in the database change through a postgres index writer")
        return PgDocumentChanges(writer.connection, writer.theme_id)
