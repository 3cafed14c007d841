"""``PgChunkStore``: a theme's chunks in one PostgreSQL table, searched with pgvector HNSW.

One table per theme (``chatitego_chunks_<id>``, see ``themes.pg.schema``): node id, source
document, text, metadata, the L2-normalised embedding as ``vector(dim)`` and a full-text
``tsvector``. Vector search orders by inner product (``<#>``: on unit vectors, the
cosine) through an HNSW index; keyword search is ``themes.pg.keyword_search``.

A published version's store reads through the pool (read-only: mutations raise); a
writer's store runs every statement in the writer's transaction, so nothing it does is
seen by others before the commit, and it reads its own changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from psycopg import sql
from psycopg.types.json import Jsonb

from themes.chunk_records import FloatMatrix, checked_embeddings, node_from_record, node_record
from themes.pg.database import Connector, Database
from themes.pg.schema import create_chunks_table, search_text, theme_chunks
from themes.vector_store import ReadOnlyStoreError

_COLUMNS = sql.SQL("node_id, ref_doc_id, text, metadata, extras")


def _no_filters(filters: MetadataFilters | None) -> None:
    if filters is not None and filters.filters:
        raise NotImplementedError(
            "the postgres chunk store does not filter on metadata; restrict the search "
            "with doc_ids or node_ids"
        )


class PgChunkStore(BasePydanticVectorStore):
    """A theme's chunks in PostgreSQL; implements ``ChunkStore``."""

    stores_text: bool = True
    flat_metadata: bool = False
    embed_model_name: str | None = None

    _connector: Connector = PrivateAttr()
    _theme_id: int = PrivateAttr()
    _dim: int | None = PrivateAttr(default=None)
    _frozen: bool = PrivateAttr(default=False)
    _published: bool = PrivateAttr(default=False)

    def __init__(
        self,
        connector: Connector,
        theme_id: int,
        *,
        dim: int | None,
        embed_model_name: str | None,
        frozen: bool = False,
    ) -> None:
        """``frozen``: a published version's store (read-only)."""
        super().__init__(stores_text=True, embed_model_name=embed_model_name)
        self._connector = connector
        self._theme_id = theme_id
        self._dim = dim
        self._frozen = frozen
        self._published = frozen  # a published version's reader (not a writer's store)

    @classmethod
    def class_name(cls) -> str:
        return "PgChunkStore"

    @property
    def client(self) -> None:
        return None

    @property
    def dim(self) -> int | None:
        return self._dim

    @property
    def frozen(self) -> bool:
        return self._frozen

    @property
    def theme_id(self) -> int:
        return self._theme_id

    @property
    def connector(self) -> Connector:
        return self._connector

    def freeze(self) -> PgChunkStore:
        """Refuse every later mutation (a writer's store once the writer has ended)."""
        self._frozen = True
        return self

    def _check_mutable(self) -> None:
        if self._frozen:
            raise ReadOnlyStoreError(
                "this chunk store is a published index version and is read-only; "
                "change it through the theme's storage writer()"
            )

    def _rows(self, query: sql.Composable, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self._dim is None:  # no table yet: nothing was ever stored
            return []
        with self._connector.connection() as conn:
            return list(conn.execute(query, params).fetchall())

    def _table(self) -> sql.Identifier:
        return theme_chunks(self._theme_id)

    # ------------------------------------------------------------------ reading

    def count(self) -> int:
        if self._published:
            # A reader: the count published with the version (a primary-key lookup, in the
            # same snapshot as the chunks), not a count(*) over the table.
            with self._connector.connection() as conn:
                row = conn.execute(
                    "SELECT chunks FROM chatitego_themes WHERE id = %s", (self._theme_id,)
                ).fetchone()
            return int(row[0]) if row is not None else 0
        rows = self._rows(sql.SQL("SELECT count(*) FROM {}").format(self._table()))
        return int(rows[0][0]) if rows else 0

    def __contains__(self, node_id: object) -> bool:
        return bool(
            isinstance(node_id, str)
            and self._rows(
                sql.SQL("SELECT 1 FROM {} WHERE node_id = %s").format(self._table()), (node_id,)
            )
        )

    def node_ids(self) -> list[str]:
        query = sql.SQL("SELECT node_id FROM {} ORDER BY seq").format(self._table())
        return [row[0] for row in self._rows(query)]

    def ref_doc_ids(self) -> set[str]:
        query = sql.SQL("SELECT DISTINCT ref_doc_id FROM {} WHERE ref_doc_id IS NOT NULL")
        return {row[0] for row in self._rows(query.format(self._table()))}

    def document_node_ids(self, ref_doc_id: str) -> list[str]:
        query = sql.SQL("SELECT node_id FROM {} WHERE ref_doc_id = %s ORDER BY node_id")
        return [row[0] for row in self._rows(query.format(self._table()), (ref_doc_id,))]

    def iter_texts(self) -> Iterator[tuple[str, str]]:
        query = sql.SQL("SELECT node_id, text FROM {} ORDER BY seq").format(self._table())
        return iter([(row[0], row[1]) for row in self._rows(query)])

    def sample_texts(self, n: int) -> list[str]:
        count = self.count()
        if n <= 0 or count == 0:
            return []
        step = max(1, count // n)
        query = sql.SQL(
            "SELECT text FROM (SELECT text, row_number() OVER (ORDER BY seq) - 1 AS r FROM {}) s "
            "WHERE r %% %s = 0 ORDER BY r LIMIT %s"
        ).format(self._table())
        return [row[0] for row in self._rows(query, (step, n))]

    def snapshot(self) -> AbstractContextManager[None]:
        if isinstance(self._connector, Database):
            return self._connector.snapshot()
        return nullcontext()  # a writer's transaction is its own snapshot

    def embeddings(self, node_ids: Sequence[str]) -> FloatMatrix:
        ids = list(node_ids)
        if not ids:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        query = sql.SQL("SELECT node_id, embedding FROM {} WHERE node_id = ANY(%s)")
        found = {row[0]: row[1] for row in self._rows(query.format(self._table()), (ids,))}
        missing = [i for i in ids if i not in found]
        if missing:
            raise KeyError(f"no chunk {missing[0]!r} in theme store {self._theme_id}")
        return np.asarray([_as_array(found[i]) for i in ids], dtype=np.float32)

    def get(self, node_id: str) -> TextNode | None:
        nodes = self.get_nodes([node_id])
        return nodes[0] if nodes else None  # type: ignore[return-value]

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        _no_filters(filters)
        if node_ids is None:
            query = sql.SQL("SELECT {} FROM {} ORDER BY seq").format(_COLUMNS, self._table())
            return [node_from_record(*_record(row)) for row in self._rows(query)]
        if not node_ids:
            return []
        query = sql.SQL("SELECT {} FROM {} WHERE node_id = ANY(%s)").format(_COLUMNS, self._table())
        by_id = {row[0]: row for row in self._rows(query, (list(node_ids),))}
        return [node_from_record(*_record(by_id[i])) for i in node_ids if i in by_id]

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Top ``similarity_top_k`` chunks by cosine similarity (HNSW), best first.

        Honours ``doc_ids`` and ``node_ids`` (an empty list: no restriction, as in
        llama-index's stores); metadata ``filters`` are refused.
        """
        if query.mode != VectorStoreQueryMode.DEFAULT:
            raise ValueError(f"PgChunkStore only supports the default query mode, not {query.mode}")
        if query.query_embedding is None:
            raise ValueError("PgChunkStore.query needs query.query_embedding")
        _no_filters(query.filters)
        k = query.similarity_top_k
        if k <= 0 or self._dim is None:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        q = np.asarray(query.query_embedding, dtype=np.float32)
        if q.shape != (self._dim,):
            raise ValueError(
                f"query embedding has shape {q.shape}, the store holds dim {self._dim}"
            )
        norm = float(np.linalg.norm(q))
        if norm > 0.0:
            q = q / np.float32(norm)
        where, params = _restrictions(query)
        statement = sql.SQL(
            "SELECT {}, -(embedding <#> %s) FROM {} {} ORDER BY embedding <#> %s LIMIT %s"
        ).format(_COLUMNS, self._table(), where)
        rows = self._rows(statement, (q, *params, q, k))
        return VectorStoreQueryResult(
            nodes=[node_from_record(*_record(row)) for row in rows],
            similarities=[float(row[5]) for row in rows],
            ids=[row[0] for row in rows],
        )

    # ------------------------------------------------------------------ writing

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Insert nodes, replacing any chunk with the same node id; return the ids."""
        self._check_mutable()
        if not nodes:
            return []
        vectors = checked_embeddings(list(nodes), self._dim)
        records = [node_record(n) for n in nodes]
        # A node id repeated inside one batch: the last occurrence wins.
        last = {node.node_id: i for i, node in enumerate(nodes)}
        with self._connector.connection() as conn:
            if self._dim is None:
                self._dim = int(vectors.shape[1])
                create_chunks_table(conn, self._theme_id, self._dim)
            statement = sql.SQL(
                "INSERT INTO {} (node_id, ref_doc_id, text, metadata, extras, embedding, tsv) "
                "VALUES (%s, %s, %s, %s, %s, %s, "
                "to_tsvector('french', %s) || to_tsvector('english', %s)) "
                "ON CONFLICT (node_id) DO UPDATE SET ref_doc_id = EXCLUDED.ref_doc_id, "
                "text = EXCLUDED.text, metadata = EXCLUDED.metadata, extras = EXCLUDED.extras, "
                "embedding = EXCLUDED.embedding, tsv = EXCLUDED.tsv"
            ).format(self._table())
            rows = []
            for node_id, i in last.items():
                text, ref_doc_id, metadata, extras = records[i]
                words = search_text(text)
                rows.append(
                    (
                        node_id,
                        ref_doc_id,
                        text,
                        Jsonb(metadata),
                        Jsonb(extras) if extras else None,
                        vectors[i],
                        words,
                        words,
                    )
                )
            with conn.cursor() as cursor:
                cursor.executemany(statement, rows)
        return [n.node_id for n in nodes]

    def delete_document(self, ref_doc_id: str) -> list[str]:
        """Remove every chunk of ``ref_doc_id``; return the removed node ids."""
        self._check_mutable()
        query = sql.SQL("DELETE FROM {} WHERE ref_doc_id = %s RETURNING node_id")
        return sorted(row[0] for row in self._rows(query.format(self._table()), (ref_doc_id,)))

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        self.delete_document(ref_doc_id)

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Remove the given chunks (metadata filters are refused)."""
        self._check_mutable()
        _no_filters(filters)
        if node_ids is None:
            raise ValueError("delete_nodes needs node_ids (use clear() to empty)")
        query = sql.SQL("DELETE FROM {} WHERE node_id = ANY(%s)").format(self._table())
        self._execute(query, (list(node_ids),))

    def clear(self) -> None:
        """Remove every chunk; the dimension and embed model name are kept."""
        self._check_mutable()
        self._execute(sql.SQL("DELETE FROM {}").format(self._table()))

    def _execute(self, query: sql.Composable, params: Sequence[Any] = ()) -> None:
        if self._dim is None:
            return
        with self._connector.connection() as conn:
            conn.execute(query, params)


def _as_array(value: Any) -> Any:
    # pgvector's loaders give numpy arrays (text format) or Vector objects (binary format).
    return value.to_numpy() if hasattr(value, "to_numpy") else value


def _record(row: tuple[Any, ...]) -> tuple[str, str | None, str, dict[str, Any], Any]:
    return row[0], row[1], row[2], row[3] or {}, row[4]


def _restrictions(query: VectorStoreQuery) -> tuple[sql.Composable, list[Any]]:
    clauses: list[sql.Composable] = []
    params: list[Any] = []
    if query.doc_ids:
        clauses.append(sql.SQL("ref_doc_id = ANY(%s)"))
        params.append(list(query.doc_ids))
    if query.node_ids:
        clauses.append(sql.SQL("node_id = ANY(%s)"))
        params.append(list(query.node_ids))
    if not clauses:
        return sql.SQL(""), params
    return sql.SQL("WHERE ") + sql.SQL(" AND ").join(clauses), params
