"""The llama-index docstore of a theme in PostgreSQL (``KVDocumentStore`` over a table).

Ingestion keeps each source document's content hash (and its pages' text) in a docstore;
here it is ``llama-index``'s own ``KVDocumentStore`` over ``PgKVStore``, rows of the shared
``chatitego_docstore`` table keyed by theme. A writer's docstore runs in the writer's
transaction, like its chunks: published together or not at all.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.storage.docstore.keyval_docstore import KVDocumentStore
from llama_index.core.storage.kvstore.types import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_COLLECTION,
    BaseKVStore,
)
from psycopg.types.json import Jsonb

from themes.pg.database import Connector

# Docstore rows written per statement batch (KVDocumentStore writes one by one otherwise).
_BATCH = 100


class PgKVStore(BaseKVStore):
    """Key-value collections of one theme (the async methods run the sync ones in a thread)."""

    def __init__(self, connector: Connector, theme_id: int) -> None:
        self._connector = connector
        self._theme_id = theme_id

    def put(self, key: str, val: dict[str, Any], collection: str = DEFAULT_COLLECTION) -> None:
        self.put_all([(key, val)], collection=collection)

    def put_all(
        self,
        kv_pairs: list[tuple[str, dict[str, Any]]],
        collection: str = DEFAULT_COLLECTION,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if not kv_pairs:
            return
        rows = [(self._theme_id, collection, key, Jsonb(val)) for key, val in kv_pairs]
        with self._connector.connection() as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO chatitego_docstore (theme_id, collection, key, value) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (theme_id, collection, key) "
                "DO UPDATE SET value = EXCLUDED.value",
                rows,
            )

    def get(self, key: str, collection: str = DEFAULT_COLLECTION) -> dict[str, Any] | None:
        with self._connector.connection() as conn:
            row = conn.execute(
                "SELECT value FROM chatitego_docstore "
                "WHERE theme_id = %s AND collection = %s AND key = %s",
                (self._theme_id, collection, key),
            ).fetchone()
        return None if row is None else dict(row[0])

    def get_all(self, collection: str = DEFAULT_COLLECTION) -> dict[str, dict[str, Any]]:
        with self._connector.connection() as conn:
            rows = conn.execute(
                "SELECT key, value FROM chatitego_docstore "
                "WHERE theme_id = %s AND collection = %s ORDER BY key",
                (self._theme_id, collection),
            ).fetchall()
        return {row[0]: dict(row[1]) for row in rows}

    def delete(self, key: str, collection: str = DEFAULT_COLLECTION) -> bool:
        with self._connector.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM chatitego_docstore "
                "WHERE theme_id = %s AND collection = %s AND key = %s",
                (self._theme_id, collection, key),
            )
            return cursor.rowcount > 0

    def clear(self) -> None:
        """Every collection of the theme."""
        with self._connector.connection() as conn:
            conn.execute("DELETE FROM chatitego_docstore WHERE theme_id = %s", (self._theme_id,))

    async def aput(
        self, key: str, val: dict[str, Any], collection: str = DEFAULT_COLLECTION
    ) -> None:
        await asyncio.to_thread(self.put, key, val, collection)

    async def aget(self, key: str, collection: str = DEFAULT_COLLECTION) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.get, key, collection)

    async def aget_all(self, collection: str = DEFAULT_COLLECTION) -> dict[str, dict[str, Any]]:
        return await asyncio.to_thread(self.get_all, collection)

    async def adelete(self, key: str, collection: str = DEFAULT_COLLECTION) -> bool:
        return await asyncio.to_thread(self.delete, key, collection)


def pg_docstore(connector: Connector, theme_id: int) -> KVDocumentStore:
    """The theme's docstore."""
    return KVDocumentStore(PgKVStore(connector, theme_id), batch_size=_BATCH)
