"""Per-theme tables: the chunks of one theme, their HNSW and full-text indexes.

Each theme gets its own chunk table, created with the embedding dimension when its
first chunk arrives: one HNSW index per theme keeps a small theme's searches exact-ish
and fast beside a large one (a filtered search over one shared index would lose recall).

Full text: the text is folded and split the way the embedded keyword index does it
(``themes.keyword_index``: no accents, no case, words of letters and digits, French and
English stopwords dropped), then PostgreSQL's ``french`` and ``english`` configurations
stem it; the ``tsvector`` holds both stems. A query goes through the same steps, its
words OR-ed. Folding in Python keeps the server requirements to pgvector alone (no
``unaccent``), so any managed PostgreSQL with pgvector works.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from themes.keyword_index import index_words

# HNSW build parameters (pgvector's defaults); ef_search is set per connection.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
# An HNSW build sorts in memory; pgvector falls back to a much slower path past it.
BUILD_MAINTENANCE_WORK_MEM = "1GB"


def theme_chunks(theme_id: int) -> sql.Identifier:
    """The table of one theme's chunks."""
    return sql.Identifier(f"chatitego_chunks_{int(theme_id)}")


def _index_name(theme_id: int, kind: str) -> sql.Identifier:
    return sql.Identifier(f"chatitego_chunks_{int(theme_id)}_{kind}")


def search_text(text: str) -> str:
    """The words the full-text configurations stem (folded, stopwords dropped)."""
    return " ".join(index_words(text))


def create_chunks_table(conn: psycopg.Connection[Any], theme_id: int, dim: int) -> None:
    """The theme's chunk table and its lookup indexes (HNSW comes at commit)."""
    table = theme_chunks(theme_id)
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " seq bigserial,"
            " node_id text PRIMARY KEY,"
            " ref_doc_id text,"
            " text text NOT NULL,"
            " metadata jsonb NOT NULL,"
            " extras jsonb,"
            " embedding vector({}) NOT NULL,"
            " tsv tsvector NOT NULL)"
        ).format(table, sql.Literal(int(dim)))
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (ref_doc_id)").format(
            _index_name(theme_id, "doc"), table
        )
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (tsv)").format(
            _index_name(theme_id, "tsv"), table
        )
    )
    conn.execute("UPDATE chatitego_themes SET dim = %s WHERE id = %s", (int(dim), theme_id))


def ensure_hnsw_index(conn: psycopg.Connection[Any], theme_id: int) -> None:
    """Build the theme's HNSW index if missing (after a bulk load: faster than row by row)."""
    name = _index_name(theme_id, "hnsw")
    exists = conn.execute("SELECT to_regclass(%s)", (name.as_string(conn),)).fetchone()
    if exists is not None and exists[0] is not None:
        return
    conn.execute(
        sql.SQL("SET LOCAL maintenance_work_mem = {}").format(
            sql.Literal(BUILD_MAINTENANCE_WORK_MEM)
        )
    )
    conn.execute(
        sql.SQL(
            "CREATE INDEX {} ON {} USING hnsw (embedding vector_ip_ops) "
            "WITH (m = {}, ef_construction = {})"
        ).format(
            name,
            theme_chunks(theme_id),
            sql.Literal(HNSW_M),
            sql.Literal(HNSW_EF_CONSTRUCTION),
        )
    )


def drop_chunks_table(conn: psycopg.Connection[Any], theme_id: int) -> None:
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(theme_chunks(theme_id)))
