"""One PostgreSQL database: a connection pool, the schema, and per-thread read snapshots.

Readers borrow a pooled connection per statement, or pin one for a whole read snapshot
(``snapshot()``: a REPEATABLE READ, READ ONLY transaction, so every statement of a
retrieval sees the same published version even if a writer commits meanwhile). A writer
holds one connection and one transaction from its start to its commit
(``themes.pg.index_storage``).

The schema is created on first use (``CREATE ... IF NOT EXISTS``, serialised by an
advisory lock so that replicas starting together do not race). It needs the ``vector``
extension: on a managed server where the application's role may not create extensions,
an administrator runs ``CREATE EXTENSION vector;`` once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol
from urllib.parse import urlsplit

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from themes.errors import ThemesError

logger = logging.getLogger(__name__)

# First key of every advisory lock Chatitego takes ("CHAT"); the second is a theme's id
# (0: the schema).
LOCK_NAMESPACE = 0x43484154
SCHEMA_LOCK_KEY = 0
_CONNECT_TIMEOUT_S = 10.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS chatitego_themes (
    id bigserial PRIMARY KEY,
    name text UNIQUE NOT NULL,
    settings jsonb NOT NULL,
    system_prompt text NOT NULL DEFAULT '',
    index_version bigint NOT NULL DEFAULT 0,
    chunks bigint NOT NULL DEFAULT 0,
    dim integer,
    embed_model text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS chatitego_prompt_history (
    id bigserial PRIMARY KEY,
    theme_id bigint NOT NULL REFERENCES chatitego_themes(id) ON DELETE CASCADE,
    saved_at timestamptz NOT NULL DEFAULT now(),
    text text NOT NULL
);
CREATE TABLE IF NOT EXISTS chatitego_index_versions (
    theme_id bigint NOT NULL REFERENCES chatitego_themes(id) ON DELETE CASCADE,
    version bigint NOT NULL,
    info jsonb NOT NULL,
    PRIMARY KEY (theme_id, version)
);
CREATE TABLE IF NOT EXISTS chatitego_documents (
    theme_id bigint NOT NULL REFERENCES chatitego_themes(id) ON DELETE CASCADE,
    name text NOT NULL,
    content bytea NOT NULL,
    sha256 text NOT NULL,
    size bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (theme_id, name)
);
CREATE TABLE IF NOT EXISTS chatitego_docstore (
    theme_id bigint NOT NULL REFERENCES chatitego_themes(id) ON DELETE CASCADE,
    collection text NOT NULL,
    key text NOT NULL,
    value jsonb NOT NULL,
    PRIMARY KEY (theme_id, collection, key)
);
"""


class DatabaseUnavailable(ThemesError, RuntimeError):
    """The database cannot be reached or refused the schema; ``str()`` says what to do."""


class Connector(Protocol):
    """Where a store's statements run: the pool (readers) or a writer's transaction."""

    def connection(self) -> Any:  # a context manager yielding a psycopg.Connection
        ...


def safe_url(url: str) -> str:
    """``host:port/dbname`` of a URL, without user or password (for messages)."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}{parts.path or ''}"


class FixedConnection:
    """A connector that always yields the same connection (a writer's transaction)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        yield self.conn


class Database:
    """A pool of connections to one database, its schema ensured once."""

    def __init__(self, url: str, *, ef_search: int = 100, max_size: int = 16) -> None:
        self.url = url
        self.ef_search = ef_search
        self._local = threading.local()
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            kwargs={"autocommit": True, "connect_timeout": int(_CONNECT_TIMEOUT_S)},
            configure=self._configure,
            open=False,
            name="chatitego",
        )
        try:
            with psycopg.connect(
                url, autocommit=True, connect_timeout=int(_CONNECT_TIMEOUT_S)
            ) as c:
                _ensure_schema(c)
            self._pool.open(wait=True, timeout=_CONNECT_TIMEOUT_S)
        except (PoolTimeout, psycopg.OperationalError) as exc:
            self._pool.close()
            raise DatabaseUnavailable(
                f"PostgreSQL at {safe_url(url)} cannot be reached ({_reason(exc)}); check "
                "DATABASE_URL and that the server runs"
            ) from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            self._pool.close()
            raise DatabaseUnavailable(
                f"PostgreSQL at {safe_url(url)}: this role may not create the pgvector "
                f"extension or Chatitego's tables ({_reason(exc)}); an administrator runs "
                "'CREATE EXTENSION vector;' in that database, or grants CREATE on its schema"
            ) from exc

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        register_vector(conn)
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(int(self.ef_search))))

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's snapshot connection inside ``snapshot()``, else a pooled one."""
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def dedicated(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for a writer (never a reader's pinned snapshot)."""
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read of this thread inside the block sees one committed state."""
        if getattr(self._local, "conn", None) is not None:
            yield  # nested: the outer snapshot holds
            return
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None


def _ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """The extension and the shared tables, created once (replicas may start together)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_NAMESPACE, SCHEMA_LOCK_KEY))
        row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        if row is None:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(SCHEMA)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


_databases: dict[tuple[str, int], Database] = {}
_databases_lock = threading.Lock()


def get_database(url: str, *, ef_search: int = 100) -> Database:
    """The process's ``Database`` for ``url`` (one pool per URL and setting)."""
    key = (url, ef_search)
    with _databases_lock:
        database = _databases.get(key)
        if database is None:
            database = _databases[key] = Database(url, ef_search=ef_search)
        return database


def forget_database(url: str) -> None:
    """Close and forget the process's pools for ``url`` (tests drop their databases)."""
    with _databases_lock:
        for key in [k for k in _databases if k[0] == url]:
            _databases.pop(key).close()
