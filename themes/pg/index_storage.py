"""A theme's versioned index in PostgreSQL: one transaction per published version.

The published version is the theme row's ``index_version`` (``v000007``), with its
description in ``chatitego_index_versions``. A writer takes the theme's advisory lock
(``pg_advisory_xact_lock``, waiting at most ``lock_timeout`` s: a second writer, in any
process or replica, gets ``ThemeBusy``), changes chunks, docstore and documents in its
own transaction, then bumps the version in that same transaction: readers see the whole
new version at once, or not at all. A crash, an exception or ``discard()`` rolls
everything back, and the lock goes with the transaction.

Only the published version can be read: the database changes in place (``list_versions``
names it alone). A reader's ``IndexVersion`` reads the live tables; a retrieval holds one
snapshot for all its statements (``ChunkStore.snapshot``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from themes.index_storage import (
    DEFAULT_LOCK_TIMEOUT,
    IndexVersion,
    IndexWriter,
    ThemeBusy,
    ThemeFolderGone,
    VersionGone,
)
from themes.pg.chunk_store import PgChunkStore
from themes.pg.database import LOCK_NAMESPACE, Database, DatabaseUnavailable, FixedConnection
from themes.pg.docstore import PgKVStore, pg_docstore
from themes.pg.keyword_search import PgKeywordSearch
from themes.pg.schema import ensure_hnsw_index

logger = logging.getLogger(__name__)

_VERSION_RE = re.compile(r"^v(\d{6,})$")


def version_name(number: int) -> str | None:
    return f"v{number:06d}" if number > 0 else None


@dataclass(frozen=True)
class _ThemeRow:
    theme_id: int
    version: int
    chunks: int
    dim: int | None
    embed_model: str | None


def theme_row(conn: psycopg.Connection[Any], name: str, *, lock: bool = False) -> _ThemeRow | None:
    """The theme's row, or ``None`` when there is no such theme."""
    row = conn.execute(
        "SELECT id, index_version, chunks, dim, embed_model FROM chatitego_themes WHERE name = %s"
        + (" FOR UPDATE" if lock else ""),
        (name,),
    ).fetchone()
    return None if row is None else _ThemeRow(*row)


def lock_theme(conn: psycopg.Connection[Any], theme_id: int, timeout: float) -> bool:
    """Take the theme's advisory lock in ``conn``'s transaction; False after ``timeout`` s."""
    if timeout <= 0:
        row = conn.execute(
            "SELECT pg_try_advisory_xact_lock(%s, %s)", (LOCK_NAMESPACE, theme_id)
        ).fetchone()
        return bool(row and row[0])
    conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(timeout * 1000)}ms",))
    try:
        with conn.transaction():  # a savepoint: the timeout must not abort the outer one
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_NAMESPACE, theme_id))
    except psycopg.errors.LockNotAvailable:
        return False
    finally:
        conn.execute("SELECT set_config('lock_timeout', '0', true)")
    return True


class PgIndexWriter(IndexWriter):
    """A writer whose stores run in ``connection``'s transaction."""

    def __init__(
        self,
        base_version: str | None,
        connection: psycopg.Connection[Any],
        theme_id: int,
        vectors: PgChunkStore,
    ) -> None:
        connector = FixedConnection(connection)
        super().__init__(
            base_version, vectors, PgKeywordSearch(vectors), pg_docstore(connector, theme_id)
        )
        self.connection = connection
        self.theme_id = theme_id

    def clear(self) -> None:
        self.vectors.clear()
        PgKVStore(FixedConnection(self.connection), self.theme_id).clear()


class PgIndexStorage:
    """The index of the theme ``theme_name``; implements ``ThemeIndexStorage``.

    ``theme_dir`` is the theme's local folder, used only to name it in messages.
    """

    def __init__(
        self,
        database: Database,
        theme_name: str,
        theme_dir: Path,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.database = database
        self.theme_name = theme_name
        self.theme_dir = Path(theme_dir)
        self.lock_timeout = lock_timeout

    # ------------------------------------------------------------------ readers

    def _row(self) -> _ThemeRow | None:
        try:
            with self.database.connection() as conn:
                return theme_row(conn, self.theme_name)
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc

    def current_version_name(self) -> str | None:
        row = self._row()
        return None if row is None else version_name(row.version)

    def list_versions(self) -> list[str]:
        current = self.current_version_name()
        return [current] if current else []

    def load_current(self) -> IndexVersion:
        row = self._row()
        if row is None:
            return _reader_version(self.database, None)
        return _reader_version(self.database, row, self._info(row))

    def load_version(self, name: str) -> IndexVersion:
        if _VERSION_RE.fullmatch(name) is None:
            raise ValueError(f"not a version name: {name!r}")
        version = self.load_current()
        if version.name != name:
            raise VersionGone(
                f"theme {self.theme_name!r}: version {name} is no longer stored (the database "
                f"keeps the published one only, now {version.name or 'none'}); load that one"
            )
        return version

    def refresh(self, previous: IndexVersion | None) -> IndexVersion:
        if previous is not None and previous.name == self.current_version_name():
            return previous
        return self.load_current()

    def check_current(self) -> None:
        version = self.load_current()
        with version.vectors.snapshot():
            version.vectors.count()

    def published_or_none(self) -> str | None:
        try:
            return self.current_version_name()
        except DatabaseUnavailable:
            return None

    def _info(self, row: _ThemeRow) -> dict[str, Any]:
        with self.database.connection() as conn:
            found = conn.execute(
                "SELECT info FROM chatitego_index_versions WHERE theme_id = %s AND version = %s",
                (row.theme_id, row.version),
            ).fetchone()
        return dict(found[0]) if found else {}

    def _unavailable(self, exc: BaseException) -> DatabaseUnavailable:
        return DatabaseUnavailable(
            f"theme {self.theme_name!r}: the database stopped answering ({exc}); "
            "nothing was changed; check that PostgreSQL runs, then try again"
        )

    # ------------------------------------------------------------------ writers

    @contextmanager
    def _locked(
        self, lock_timeout: float | None
    ) -> Iterator[tuple[psycopg.Connection[Any], _ThemeRow]]:
        """A transaction holding the theme's lock, and the theme's row (locked too)."""
        timeout = self.lock_timeout if lock_timeout is None else lock_timeout
        try:
            with self.database.dedicated() as conn, conn.transaction():
                # An ingestion embeds between statements: the server must not end it as idle.
                conn.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
                row = theme_row(conn, self.theme_name)
                if row is None:
                    raise self._gone()
                if not lock_theme(conn, row.theme_id, timeout):
                    raise ThemeBusy(self.theme_dir, timeout, lock="its database lock")
                row = theme_row(conn, self.theme_name, lock=True)
                if row is None:  # deleted while we waited for the lock
                    raise self._gone()
                yield conn, row
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc

    def _gone(self) -> ThemeFolderGone:
        return ThemeFolderGone(
            f"theme {self.theme_name!r} does not exist in the database (deleted meanwhile?); "
            "nothing was written"
        )

    @contextmanager
    def exclusive(self, *, lock_timeout: float | None = None) -> Iterator[None]:
        """Hold the theme's lock for the block (``ThemeBusy`` after ``lock_timeout`` s)."""
        with self._locked(lock_timeout):
            yield

    @contextmanager
    def writer(
        self,
        *,
        lock_timeout: float | None = None,
        sync_keywords: bool = True,
        rebuild: bool = False,
    ) -> Iterator[IndexWriter]:
        """Change the index in one transaction; commit it as a new version on clean exit.

        ``sync_keywords`` has no effect: the full-text vectors are written with the chunks.
        ``rebuild`` starts from an empty index (documents are kept).
        """
        number: int | None = None
        with self._locked(lock_timeout) as (conn, row):
            vectors = PgChunkStore(
                FixedConnection(conn), row.theme_id, dim=row.dim, embed_model_name=row.embed_model
            )
            writer = PgIndexWriter(version_name(row.version), conn, row.theme_id, vectors)
            try:
                if rebuild:
                    writer.clear()
                yield writer
                if writer.discarded:
                    raise psycopg.Rollback()
                number = self._publish(conn, row, vectors, writer.base_version)
            finally:
                vectors.freeze()
        if number is not None:  # committed (a discard rolled back)
            writer.committed_version = version_name(number)

    def _publish(
        self, conn: psycopg.Connection[Any], row: _ThemeRow, vectors: PgChunkStore, base: str | None
    ) -> int:
        """Record the new version in the writer's transaction (it commits right after)."""
        number = row.version + 1
        count = vectors.count()
        if vectors.dim is not None and count > 0:
            ensure_hnsw_index(conn, row.theme_id)
        info = {
            "name": version_name(number),
            "based_on": base,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "chunks": count,
            "documents": len(vectors.ref_doc_ids()),
            "dim": vectors.dim,
            "embed_model": vectors.embed_model_name,
        }
        conn.execute(
            "INSERT INTO chatitego_index_versions (theme_id, version, info) VALUES (%s, %s, %s)",
            (row.theme_id, number, Jsonb(info)),
        )
        conn.execute(
            "UPDATE chatitego_themes SET index_version = %s, chunks = %s, dim = %s, "
            "embed_model = %s WHERE id = %s",
            (number, count, vectors.dim, vectors.embed_model_name, row.theme_id),
        )
        # Keep the descriptions of the published version and the one it replaced.
        conn.execute(
            "DELETE FROM chatitego_index_versions WHERE theme_id = %s AND version < %s",
            (row.theme_id, number - 1),
        )
        return number


def _reader_version(
    database: Database, row: _ThemeRow | None, info: dict[str, Any] | None = None
) -> IndexVersion:
    theme_id = row.theme_id if row is not None else 0
    vectors = PgChunkStore(
        database,
        theme_id,
        dim=row.dim if row is not None else None,
        embed_model_name=row.embed_model if row is not None else None,
        frozen=True,
    )
    return IndexVersion(
        version_name(row.version) if row is not None else None,
        vectors,
        PgKeywordSearch(vectors),
        pg_docstore(database, theme_id),
        MappingProxyType(info or {}),
    )
