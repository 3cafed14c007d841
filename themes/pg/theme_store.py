"""``PgThemeStore``: themes' settings, prompts, documents and indexes in PostgreSQL.

Every replica pointed at the same database sees the same themes: a theme created, set up,
fed or deleted through one is seen by the others at their next read. The theme's local
folder (``<data_dir>/themes/<name>/``) only holds what stays per replica (feedback, the
RAG Manager's ledger and regression questions); it is created when first needed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from themes.documents import DocumentFiles
from themes.index_storage import ThemeBusy
from themes.pg.database import Database, get_database
from themes.pg.documents import PgDocuments
from themes.pg.index_storage import PgIndexStorage, lock_theme
from themes.pg.schema import drop_chunks_table
from themes.store_protocol import ThemeIndexStorage
from themes.theme_settings import ThemeExists, ThemeSettings


class PgThemeStore:
    """Implements ``ThemeStore`` on one database."""

    kind = "postgres"

    def __init__(self, database: Database) -> None:
        self.database = database

    def names(self, root: Path) -> list[str]:
        with self.database.connection() as conn:
            rows = conn.execute("SELECT name FROM chatitego_themes ORDER BY name").fetchall()
        return [row[0] for row in rows]

    def read_settings(self, directory: Path, name: str) -> ThemeSettings | None:
        with self.database.connection() as conn:
            row = conn.execute(
                "SELECT settings FROM chatitego_themes WHERE name = %s", (name,)
            ).fetchone()
        if row is None:
            return None
        directory.mkdir(parents=True, exist_ok=True)  # this replica's local part
        return ThemeSettings.model_validate(row[0])

    def create(self, directory: Path, settings: ThemeSettings, system_prompt: str) -> None:
        try:
            with self.database.dedicated() as conn:
                conn.execute(
                    "INSERT INTO chatitego_themes (name, settings, system_prompt) "
                    "VALUES (%s, %s, %s)",
                    (settings.name, Jsonb(settings.model_dump(mode="json")), system_prompt),
                )
        except psycopg.errors.UniqueViolation as exc:
            raise ThemeExists(f"the theme {settings.name!r} already exists") from exc
        directory.mkdir(parents=True, exist_ok=True)

    def write_settings(self, directory: Path, settings: ThemeSettings) -> None:
        with self.database.dedicated() as conn:
            conn.execute(
                "UPDATE chatitego_themes SET settings = %s WHERE name = %s",
                (Jsonb(settings.model_dump(mode="json")), settings.name),
            )

    def delete(self, directory: Path, name: str, lock_timeout: float) -> None:
        """Drop the theme's rows and chunk table in one transaction, under its lock."""
        with self.database.dedicated() as conn, conn.transaction():
            row = conn.execute("SELECT id FROM chatitego_themes WHERE name = %s", (name,))
            found = row.fetchone()
            if found is None:
                return
            theme_id = int(found[0])
            if not lock_theme(conn, theme_id, lock_timeout):
                raise ThemeBusy(directory, lock_timeout, lock="its database lock")
            drop_chunks_table(conn, theme_id)
            conn.execute("DELETE FROM chatitego_themes WHERE id = %s", (theme_id,))
        shutil.rmtree(directory, ignore_errors=True)

    def read_prompt(self, directory: Path, name: str) -> str:
        with self.database.connection() as conn:
            row = conn.execute(
                "SELECT system_prompt FROM chatitego_themes WHERE name = %s", (name,)
            ).fetchone()
        return str(row[0]) if row is not None else ""

    def write_prompt(self, directory: Path, name: str, text: str) -> None:
        with self.database.dedicated() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO chatitego_prompt_history (theme_id, text) "
                "SELECT id, system_prompt FROM chatitego_themes "
                "WHERE name = %s AND system_prompt <> ''",
                (name,),
            )
            conn.execute(
                "UPDATE chatitego_themes SET system_prompt = %s WHERE name = %s", (text, name)
            )

    def prompt_history(self, directory: Path, name: str) -> list[str]:
        with self.database.connection() as conn:
            rows = conn.execute(
                "SELECT h.saved_at FROM chatitego_prompt_history h "
                "JOIN chatitego_themes t ON t.id = h.theme_id WHERE t.name = %s "
                "ORDER BY h.saved_at, h.id",
                (name,),
            ).fetchall()
        return [row[0].strftime("%Y%m%dT%H%M%S%fZ") for row in rows]

    def index_storage(self, directory: Path, name: str) -> ThemeIndexStorage:
        return PgIndexStorage(self.database, name, directory)

    def documents(self, directory: Path, name: str) -> DocumentFiles:
        return PgDocuments(self.database, name)


def postgres_theme_store(url: str, *, ef_search: int = 100) -> PgThemeStore:
    """The store on the process's pool for ``url``."""
    return PgThemeStore(get_database(url, ef_search=ef_search))
