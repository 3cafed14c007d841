"""``PgKeywordSearch``: full-text search over a theme's chunk table (French + English stems).

The score is PostgreSQL's ``ts_rank`` of the chunk's ``tsvector`` against the query's
words OR-ed (any word may match; more matching words rank higher), length-normalised
(``ts_rank`` flag 1, divide by 1 + log of the length) so that a long chunk does not win by
size alone. It is not BM25 (no inverse document frequency); the retriever's rare-word list
brings that evidence back, as with the embedded index.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from psycopg import sql

from themes.keyword_index import index_words
from themes.pg.chunk_store import PgChunkStore
from themes.pg.schema import theme_chunks

_RANK_NORMALISATION = 1


def tsquery_text(text: str) -> str | None:
    """``"w1 | w2"`` for ``to_tsquery``; ``None`` when no word is left (only stopwords)."""
    words = list(dict.fromkeys(index_words(text)))
    # Words are letters and digits only (index_words): no tsquery operator can slip in.
    return " | ".join(words) if words else None


class PgKeywordSearch:
    """Implements ``KeywordSearch`` over the same table as ``store``."""

    def __init__(self, store: PgChunkStore) -> None:
        self.store = store

    def count(self) -> int:
        return self.store.count()

    def node_ids(self) -> list[str]:
        return self.store.node_ids()

    def query(
        self, text: str, k: int = 10, *, node_ids: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """At most ``k`` ``(node_id, ts_rank)`` with a positive score, best first."""
        terms = tsquery_text(text)
        if k <= 0 or terms is None or self.store.dim is None:
            return []
        restrict = sql.SQL("")
        params: list[Any] = [terms, terms]
        if node_ids is not None:
            restrict = sql.SQL("AND node_id = ANY(%s)")
            params.append(list(node_ids))
        statement = sql.SQL(
            "SELECT node_id, ts_rank(tsv, q, {norm}) AS score "
            "FROM {table}, (SELECT to_tsquery('french', %s) || to_tsquery('english', %s) AS q) w "
            "WHERE tsv @@ q {restrict} ORDER BY score DESC, node_id LIMIT %s"
        ).format(
            norm=sql.Literal(_RANK_NORMALISATION),
            table=theme_chunks(self.store.theme_id),
            restrict=restrict,
        )
        params.append(k)
        with self.store.connector.connection() as conn:
            rows = conn.execute(statement, params).fetchall()
        return [(row[0], float(row[1])) for row in rows if float(row[1]) > 0.0]
