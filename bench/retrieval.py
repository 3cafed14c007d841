"""Dense retrieval latency and load time: NumpyVectorStore vs raw numpy vs SimpleVectorStore.

Synthetic chunks (dim 384, random unit float32 vectors, fixed seed) at 1k, 10k
and 100k. Per size: query p50/p95 over random top-10 queries for our store
(the full llama-index ``query()`` path: list -> array, nodes built), the numpy
floor (``M @ q`` + ``argpartition`` + sort, same matrix, same run), and
llama-index's default ``SimpleVectorStore`` (1k and 10k only, 20 queries at
10k: it rebuilds a numpy array from Python lists on every query). Then the load
time of our persisted 10k store (``np.load`` memory map + ``nodes.jsonl``) and
SimpleVectorStore's JSON persist/load, timed at 1k by default (its
dataclasses_json (de)serialisation takes minutes at 10k) and extrapolated.
Prints one JSON object.

    .venv/bin/python -m bench.retrieval [--queries 100] [--simple-load-size 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import VectorStoreQuery

from themes.vector_store import NumpyVectorStore

DIM = 384
TOP_K = 10
SEED = 20240601
BATCH = 5_000
# SimpleVectorStore costs ~0.1-0.3 s per query at 10k: cap its query count there.
SIMPLE_MAX_SIZE = 10_000
SIMPLE_QUERY_CAP = {1_000: 100, 10_000: 20}
LOAD_SIZE = 10_000
LOAD_REPEATS = 5


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def make_nodes(vectors: np.ndarray, start: int) -> list[TextNode]:
    nodes = []
    for offset, row in enumerate(vectors.tolist()):
        i = start + offset
        node = TextNode(
            id_=f"chunk-{i}",
            text=f"Synthetic chunk {i}: a paragraph of a company document about topic {i % 97}.",
            metadata={"file_name": f"doc-{i // 20}.pdf", "page": i % 20, "lang": "fr"},
            embedding=row,
        )
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=f"doc-{i // 20}")
        nodes.append(node)
    return nodes


def fill(store: Any, vectors: np.ndarray) -> float:
    """Add all vectors in batches (no giant list of Python floats); return seconds."""
    started = time.perf_counter()
    for start in range(0, len(vectors), BATCH):
        store.add(make_nodes(vectors[start : start + BATCH], start))
    return time.perf_counter() - started


def _summary(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {
        "p50_ms": round(statistics.median(times), 4),
        "p95_ms": round(times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)], 4),
        "n_queries": len(times),
    }


def latencies_ms(
    runners: dict[str, Callable[[np.ndarray], Any]], queries: np.ndarray
) -> dict[str, dict[str, float]]:
    """Per-query latency of each runner, interleaved query by query.

    Interleaving gives every runner the same machine conditions (other load,
    BLAS thread wake-ups), so their ratio means something on a busy 2-core box.
    """
    for run in runners.values():
        run(queries[0])  # warm-up: first-touch page faults, BLAS initialisation
    times: dict[str, list[float]] = {name: [] for name in runners}
    for i, q in enumerate(queries):
        order = list(runners.items())
        if i % 2:
            order.reverse()
        for name, run in order:
            started = time.perf_counter_ns()
            run(q)
            times[name].append((time.perf_counter_ns() - started) / 1e6)
    return {name: _summary(t) for name, t in times.items()}


def numpy_top_k(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    scores = matrix @ q
    top = np.argpartition(scores, -TOP_K)[-TOP_K:]
    return top[np.argsort(-scores[top])]


def bench_size(
    n: int, n_queries: int, rng: np.random.Generator
) -> tuple[dict[str, Any], NumpyVectorStore, SimpleVectorStore | None]:
    vectors = unit_vectors(rng, n)
    queries = unit_vectors(rng, n_queries)
    ours = NumpyVectorStore(embed_model_name="synthetic-384")
    add_s = fill(ours, vectors)

    def ours_query(q: np.ndarray) -> Any:
        return ours.query(VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=TOP_K))

    def numpy_query(q: np.ndarray) -> Any:
        return numpy_top_k(vectors, q)

    # Same answers, or the comparison is meaningless.
    for q in queries[:5]:
        expected = [f"chunk-{i}" for i in numpy_top_k(vectors, q)]
        assert ours_query(q).ids == expected, "NumpyVectorStore disagrees with brute force"

    result: dict[str, Any] = {
        "chunks": n,
        "ours_add_s": round(add_s, 3),
        **latencies_ms({"ours": ours_query, "numpy": numpy_query}, queries),
    }
    result["ratio_ours_numpy_p50"] = round(result["ours"]["p50_ms"] / result["numpy"]["p50_ms"], 2)
    result["ratio_ours_numpy_p95"] = round(result["ours"]["p95_ms"] / result["numpy"]["p95_ms"], 2)

    simple: SimpleVectorStore | None = None
    if n <= SIMPLE_MAX_SIZE:
        simple = SimpleVectorStore()
        result["simple_add_s"] = round(fill(simple, vectors), 3)
        capped = queries[: SIMPLE_QUERY_CAP.get(n, n_queries)]

        def simple_query(q: np.ndarray) -> Any:
            assert simple is not None
            return simple.query(
                VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=TOP_K)
            )

        result["simple_vector_store"] = latencies_ms({"simple": simple_query}, capped)["simple"]
        result["ratio_simple_ours_p50"] = round(
            result["simple_vector_store"]["p50_ms"] / result["ours"]["p50_ms"], 1
        )
    else:
        result["simple_vector_store"] = "skipped (too slow at this size)"
    return result, ours, simple


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bench_ours_load(store: NumpyVectorStore, q: np.ndarray) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ours"
        started = time.perf_counter()
        store.persist(folder)
        persist_s = time.perf_counter() - started
        loads, load_and_query = [], []
        for _ in range(LOAD_REPEATS):
            started = time.perf_counter()
            loaded = NumpyVectorStore.load(folder)
            loads.append(time.perf_counter() - started)
            loaded.query(VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=TOP_K))
            load_and_query.append(time.perf_counter() - started)
        return {
            "chunks": store.count(),
            "load_s_median": round(statistics.median(loads), 4),
            "load_plus_first_query_s_median": round(statistics.median(load_and_query), 4),
            "persist_s": round(persist_s, 4),
            "bytes": folder_bytes(folder),
        }


def bench_simple_load(store: SimpleVectorStore, n: int) -> dict[str, Any]:
    # dataclasses_json makes SimpleVectorStore's (de)serialisation very slow (~8 s per
    # 1k chunks to load here): one run, at the size asked for.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vector_store.json"
        started = time.perf_counter()
        store.persist(str(path))
        persist_s = time.perf_counter() - started
        started = time.perf_counter()
        SimpleVectorStore.from_persist_path(str(path))
        load_s = time.perf_counter() - started
        return {
            "chunks": n,
            "load_s": round(load_s, 3),
            "persist_s": round(persist_s, 3),
            "bytes": path.stat().st_size,
        }


def _blas_info() -> Any:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown"
    return [
        {k: info.get(k) for k in ("internal_api", "num_threads", "version")}
        for info in threadpool_info()
        if info.get("user_api") == "blas"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument(
        "--simple-load-size",
        type=int,
        default=1_000,
        help="size at which SimpleVectorStore persist/load is timed (10000 takes minutes)",
    )
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    started = time.perf_counter()
    sizes = sorted({int(s) for s in args.sizes.split(",")} | {LOAD_SIZE, args.simple_load_size})
    results = []
    load: dict[str, Any] = {}
    for n in sizes:
        print(f"bench: {n} chunks...", file=sys.stderr, flush=True)
        result, ours, simple = bench_size(n, args.queries, rng)
        results.append(result)
        if n == LOAD_SIZE:
            load["ours"] = bench_ours_load(ours, unit_vectors(rng, 1)[0])
        if n == args.simple_load_size and simple is not None:
            load["simple_vector_store"] = bench_simple_load(simple, n)
        del ours, simple
    simple_load = load.get("simple_vector_store")
    if simple_load is not None and simple_load["chunks"] != LOAD_SIZE:
        scale = LOAD_SIZE / simple_load["chunks"]
        load["simple_vector_store_at_10k_extrapolated_s"] = {
            "load_s": round(simple_load["load_s"] * scale, 1),
            "persist_s": round(simple_load["persist_s"] * scale, 1),
            "note": "linear extrapolation; run with --simple-load-size 10000 to measure",
        }
    report = {
        "benchmark": "dense retrieval, top-10, dim 384, synthetic unit vectors",
        "seed": SEED,
        "cpus": os.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "blas": _blas_info(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "sizes": results,
        "load": load,
        "targets": {
            "ratio_ours_numpy_p50_at_100k_max": 2.0,
            "ours_load_10k_max_s": 0.5,
        },
        "total_s": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
