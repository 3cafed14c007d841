"""Retrieval latency vs corpus size: postgres (pgvector HNSW), embedded (numpy store), brute force.

Synthetic 384-d unit vectors (fixed seed), clustered like sentence embeddings are
(``--distribution clustered``: points around ``n / 100`` random centres; ``uniform``:
independent random directions, the hardest case for an approximate index). Queries are
perturbed corpus points. Per size (1k, 10k, 100k; 1M with ``--large``):

- ``postgres``: a theme's chunk table loaded with ``COPY ... FORMAT BINARY``, its HNSW
  index built as ingestion builds it (``maintenance_work_mem`` 1 GB), queried through
  ``PgChunkStore.query`` (what retrieval calls: SQL, nodes built) with the app's
  ``hnsw.ef_search``; recall@10 against brute force over the same vectors;
- ``embedded``: ``NumpyVectorStore.query`` (up to 100k: filling it at 1M takes long);
- ``numpy``: ``M @ q`` + ``argpartition``, the exact floor.

The server is ``DATABASE_URL`` when set, else a throwaway local one (removed after).
Prints one JSON object. Target: postgres p50 at 100k <= 10 ms with recall@10 >= 0.95.

    .venv/bin/python -m bench.scale [--large] [--queries 200] [--distribution clustered]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.vector_stores.types import VectorStoreQuery

from bench.retrieval import DIM, TOP_K, fill, latencies_ms, numpy_top_k
from themes.pg.chunk_store import PgChunkStore
from themes.pg.database import Database
from themes.pg.index_storage import theme_row
from themes.pg.schema import create_chunks_table, ensure_hnsw_index, theme_chunks
from themes.pg.theme_store import PgThemeStore
from themes.theme import ThemeRepository
from themes.vector_store import NumpyVectorStore

SEED = 20261204
SIZES = (1_000, 10_000, 100_000)
LARGE = 1_000_000
EMBEDDED_MAX = 100_000
COPY_BATCH = 50_000
TARGET_P50_MS_AT_100K = 10.0
TARGET_RECALL = 0.95
EF_SEARCH = 100


def _unit(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out.astype(np.float32)


def corpus(rng: np.random.Generator, n: int, distribution: str) -> np.ndarray:
    if distribution == "uniform":
        return _unit(rng.standard_normal((n, DIM), dtype=np.float32))
    centres = _unit(rng.standard_normal((max(10, n // 100), DIM), dtype=np.float32))
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, COPY_BATCH):
        stop = min(n, start + COPY_BATCH)
        picks = rng.integers(0, len(centres), stop - start)
        noise = rng.standard_normal((stop - start, DIM), dtype=np.float32) * 0.06
        out[start:stop] = _unit(centres[picks] + noise)
    return out


def queries_near(rng: np.random.Generator, vectors: np.ndarray, n: int) -> np.ndarray:
    picks = vectors[rng.integers(0, len(vectors), n)]
    return _unit(picks + rng.standard_normal(picks.shape, dtype=np.float32) * 0.03)


@contextmanager
def postgres_url() -> Iterator[str]:
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    from themes.pg.local_server import LocalPostgres

    folder = Path(tempfile.mkdtemp(prefix="chatitego-bench-pg-"))
    with LocalPostgres.start(folder, remove_on_stop=True) as server:
        yield server.url


def load_theme(database: Database, vectors: np.ndarray) -> tuple[int, dict[str, float]]:
    """A fresh theme holding ``vectors`` (COPY), its HNSW index built; its id and timings."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as data:
        ThemeRepository(data, PgThemeStore(database)).create(name)
    timings: dict[str, float] = {}
    with database.dedicated() as conn, conn.transaction():
        row = theme_row(conn, name)
        assert row is not None
        create_chunks_table(conn, row.theme_id, DIM)
        table = theme_chunks(row.theme_id)
        # Bench rows need no full text or metadata: defaults keep COPY to three columns.
        conn.execute(f"ALTER TABLE {table.as_string(conn)} ALTER tsv SET DEFAULT ''")
        conn.execute(f"ALTER TABLE {table.as_string(conn)} ALTER metadata SET DEFAULT '{{}}'")
        started = time.perf_counter()
        statement = (
            f"COPY {table.as_string(conn)} (node_id, text, embedding) FROM STDIN (FORMAT BINARY)"
        )
        with conn.cursor().copy(statement) as copy:
            copy.set_types(["text", "text", "vector"])
            for i, vector in enumerate(vectors):
                copy.write_row((f"chunk-{i}", f"Synthetic chunk {i}.", vector))
        timings["copy_s"] = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        ensure_hnsw_index(conn, row.theme_id)
        timings["hnsw_build_s"] = round(time.perf_counter() - started, 2)
        conn.execute(
            "UPDATE chatitego_themes SET chunks = %s WHERE id = %s", (len(vectors), row.theme_id)
        )
    with database.dedicated() as conn:
        conn.execute(f"ANALYZE {theme_chunks(row.theme_id).as_string(conn)}")
    return row.theme_id, timings


def recall_at_k(store: PgChunkStore, vectors: np.ndarray, queries: np.ndarray) -> float:
    hits = 0
    for q in queries:
        exact = {f"chunk-{i}" for i in numpy_top_k(vectors, q)}
        found = store.query(VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=TOP_K))
        hits += len(exact & set(found.ids or []))
    return hits / (TOP_K * len(queries))


def bench_size(
    database: Database, n: int, n_queries: int, distribution: str, rng: np.random.Generator
) -> dict[str, Any]:
    vectors = corpus(rng, n, distribution)
    queries = queries_near(rng, vectors, n_queries)
    theme_id, timings = load_theme(database, vectors)
    pg = PgChunkStore(database, theme_id, dim=DIM, embed_model_name="synthetic-384", frozen=True)

    def pg_query(q: np.ndarray) -> Any:
        return pg.query(VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=TOP_K))

    def numpy_query(q: np.ndarray) -> Any:
        return numpy_top_k(vectors, q)

    runners: dict[str, Any] = {"postgres": pg_query, "numpy": numpy_query}
    result: dict[str, Any] = {"chunks": n, **timings}
    if n <= EMBEDDED_MAX:
        embedded = NumpyVectorStore(embed_model_name="synthetic-384")
        result["embedded_add_s"] = round(fill(embedded, vectors), 2)

        def embedded_query(q: np.ndarray) -> Any:
            query = VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=TOP_K)
            return embedded.query(query)

        runners["embedded"] = embedded_query
    result.update(latencies_ms(runners, queries))
    result["postgres_recall_at_10"] = round(recall_at_k(pg, vectors, queries), 4)
    with database.dedicated() as conn:
        conn.execute(f"DROP TABLE {theme_chunks(theme_id).as_string(conn)}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--large", action="store_true", help="add 1M chunks (minutes)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--distribution", choices=("clustered", "uniform"), default="clustered")
    parser.add_argument("--sizes", type=int, nargs="*", help="chunk counts (default 1k 10k 100k)")
    args = parser.parse_args()
    sizes = list(args.sizes or SIZES) + ([LARGE] if args.large else [])
    rng = np.random.default_rng(SEED)
    results = []
    with postgres_url() as url:
        database = Database(url, ef_search=EF_SEARCH)
        try:
            for n in sizes:
                results.append(bench_size(database, n, args.queries, args.distribution, rng))
        finally:
            database.close()
    at_100k = next((r for r in results if r["chunks"] == 100_000), None)
    report = {
        "benchmark": "scale",
        "distribution": args.distribution,
        "ef_search": EF_SEARCH,
        "cpus": os.cpu_count(),
        "sizes": results,
        "targets": {
            "postgres_p50_ms_at_100k_max": TARGET_P50_MS_AT_100K,
            "postgres_recall_at_10_min": TARGET_RECALL,
        },
    }
    if at_100k is not None:
        report["met"] = {
            "postgres_p50_at_100k": at_100k["postgres"]["p50_ms"] <= TARGET_P50_MS_AT_100K,
            "postgres_recall_at_100k": at_100k["postgres_recall_at_10"] >= TARGET_RECALL,
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
