"""Chunk stores: exact cosine top-k, deletion, restriction, on both backends (``store``);
metadata filters, persistence and growth of the embedded ``NumpyVectorStore``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from tests.backends import BACKENDS, open_backend
from themes.pg.chunk_store import PgChunkStore
from themes.store_protocol import ChunkStore
from themes.theme import ThemeRepository
from themes.vector_store import (
    MANIFEST_FILE,
    CorruptStoreError,
    NumpyVectorStore,
    ReadOnlyStoreError,
)

DIM = 16


def make_node(
    i: int, doc: str | None, vector: np.ndarray, *, text: str | None = None, **meta: Any
) -> TextNode:
    node = TextNode(
        id_=f"n{i}",
        text=text if text is not None else f"chunk {i}",
        metadata={"i": i, **meta},
        embedding=[float(x) for x in vector],
    )
    if doc is not None:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
    return node


def corpus(n: int, seed: int = 0, docs: int = 5) -> tuple[list[TextNode], np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    nodes = [
        make_node(i, f"doc{i % docs}", vectors[i], lang="fr" if i % 2 else "en", page=i % 7)
        for i in range(n)
    ]
    return nodes, vectors


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ChunkStore]:
    """An empty, writable chunk store: a NumpyVectorStore, or a postgres writer's store
    (rolled back after the test)."""
    if request.param == "embedded":
        yield NumpyVectorStore()
        return
    server = request.getfixturevalue("postgres_server")
    with open_backend("postgres", server) as backend:
        theme = ThemeRepository(tmp_path / "data", backend.store).create("store")
        with theme.storage.writer() as writer:
            yield writer.vectors
            writer.discard()


def ask(store: ChunkStore, q: np.ndarray, k: int, **kw: Any) -> list[str]:
    result = store.query(
        VectorStoreQuery(query_embedding=[float(x) for x in q], similarity_top_k=k, **kw)
    )
    assert result.ids is not None
    return list(result.ids)


def brute_force(vectors: np.ndarray, q: np.ndarray, k: int, ids: list[str]) -> list[str]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = unit @ (q / np.linalg.norm(q))
    return [ids[i] for i in np.argsort(-scores)[:k]]


def test_is_a_chunk_store(store: ChunkStore) -> None:
    assert isinstance(store, ChunkStore)
    assert store.stores_text is True  # type: ignore[attr-defined]


def test_query_returns_exact_cosine_top_k_best_first(store: ChunkStore) -> None:
    nodes, vectors = corpus(300)
    assert store.add(nodes) == [n.node_id for n in nodes]
    ids = [n.node_id for n in nodes]
    rng = np.random.default_rng(1)
    for _ in range(20):
        q = rng.normal(size=DIM).astype(np.float32)
        assert ask(store, q, 10) == brute_force(vectors, q, 10, ids)
    q = rng.normal(size=DIM).astype(np.float32)
    result = store.query(
        VectorStoreQuery(query_embedding=[float(x) * 123.0 for x in q], similarity_top_k=5)
    )
    assert result.similarities is not None and result.nodes is not None
    assert result.similarities == sorted(result.similarities, reverse=True)
    # Cosine similarity: scaling the query changes nothing, scores are in [-1, 1].
    assert list(result.ids or []) == ask(store, q, 5)
    assert all(-1.0 <= s <= 1.0 for s in result.similarities)
    best = nodes[int(result.nodes[0].node_id[1:])]
    expected = np.dot(vectors[int(best.node_id[1:])], q) / (
        np.linalg.norm(vectors[int(best.node_id[1:])]) * np.linalg.norm(q)
    )
    assert result.similarities[0] == pytest.approx(expected, abs=1e-5)


def test_query_results_carry_text_metadata_and_source(store: ChunkStore) -> None:
    nodes, _ = corpus(10)
    store.add(nodes)
    result = store.query(VectorStoreQuery(query_embedding=nodes[3].embedding, similarity_top_k=1))
    assert result.nodes is not None
    hit = result.nodes[0]
    assert hit.node_id == "n3"
    assert hit.get_content() == "chunk 3"
    assert hit.metadata == {"i": 3, "lang": "fr", "page": 3}
    assert hit.ref_doc_id == "doc3"
    hit.metadata["i"] = 999  # a caller's edit must not reach the store
    assert store.get("n3") is not None and store.get("n3").metadata["i"] == 3  # type: ignore[union-attr]
    store.add([make_node(90, "doc9", np.ones(DIM), tags=["a", "b"])])
    tagged = store.get("n90")
    assert tagged is not None
    tagged.metadata["tags"].append("c")
    assert store.get("n90").metadata["tags"] == ["a", "b"]  # type: ignore[union-attr]


def test_small_k_and_empty_store(store: ChunkStore) -> None:
    q = VectorStoreQuery(query_embedding=[1.0] * DIM, similarity_top_k=3)
    assert store.query(q).ids == []
    nodes, _ = corpus(2)
    store.add(nodes)
    assert sorted(store.query(q).ids or []) == ["n0", "n1"]
    assert store.query(VectorStoreQuery(query_embedding=[1.0] * DIM, similarity_top_k=0)).ids == []


def test_bad_queries_and_bad_nodes_are_rejected(store: ChunkStore) -> None:
    nodes, _ = corpus(3)
    store.add(nodes)
    with pytest.raises(ValueError, match="query_embedding"):
        store.query(VectorStoreQuery(similarity_top_k=1))
    with pytest.raises(ValueError, match="shape"):
        store.query(VectorStoreQuery(query_embedding=[1.0] * (DIM + 1)))
    with pytest.raises(ValueError, match="mode"):
        store.query(VectorStoreQuery(query_embedding=[1.0] * DIM, mode=VectorStoreQueryMode.HYBRID))
    with pytest.raises(ValueError, match="dimension"):
        store.add([make_node(50, "d", np.ones(DIM + 2))])
    with pytest.raises(ValueError, match="JSON"):
        store.add([make_node(51, "d", np.ones(DIM), when=object())])
    with pytest.raises(ValueError):
        store.add([TextNode(id_="no-embedding", text="x")])
    assert store.count() == 3


def test_add_with_an_existing_id_replaces_the_chunk(store: ChunkStore) -> None:
    nodes, vectors = corpus(5)
    store.add(nodes)
    replacement = make_node(2, "other", -vectors[2], text="new text")
    store.add([replacement])
    assert store.count() == 5
    assert store.get("n2").get_content() == "new text"  # type: ignore[union-attr]
    assert store.document_node_ids("doc2") == []
    assert store.document_node_ids("other") == ["n2"]
    assert ask(store, -vectors[2], 1) == ["n2"]


def test_delete_document_leaves_no_leftover_vectors(store: ChunkStore) -> None:
    nodes, vectors = corpus(100, docs=4)
    store.add(nodes)
    removed = store.delete_document("doc1")
    assert sorted(removed) == sorted(f"n{i}" for i in range(1, 100, 4))
    store.delete("doc3")  # the llama-index spelling
    left = [i for i in range(100) if i % 4 in (0, 2)]
    assert store.count() == len(left) == len(store.embeddings(store.node_ids()))
    assert sorted(store.node_ids()) == sorted(f"n{i}" for i in left)
    assert store.ref_doc_ids() == {"doc0", "doc2"}
    # Every remaining chunk has exactly its own node's vector: nothing stale, nothing shifted.
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for row, node_id in zip(store.embeddings(store.node_ids()), store.node_ids(), strict=True):
        np.testing.assert_allclose(row, unit[int(node_id[1:])], rtol=1e-5, atol=1e-6)
    with pytest.raises(KeyError):
        store.embeddings(["n1"])
    for i in range(1, 100, 2):
        assert store.get(f"n{i}") is None
        assert ask(store, vectors[i], 1) != [f"n{i}"]
    assert ask(store, vectors[2], 1) == ["n2"]
    assert store.delete_document("doc1") == []


def test_delete_nodes_and_clear(store: ChunkStore) -> None:
    nodes, _ = corpus(20)
    store.add(nodes)
    store.delete_nodes(["n0", "n5", "missing"])
    assert store.count() == 18 and "n0" not in store.node_ids() and "n5" not in store.node_ids()
    with pytest.raises(ValueError):
        store.delete_nodes()
    store.clear()
    assert store.count() == 0 and store.ref_doc_ids() == set()
    assert store.query(VectorStoreQuery(query_embedding=[1.0] * DIM, similarity_top_k=3)).ids == []
    store.add(nodes[:2])
    assert store.count() == 2


def test_delete_nodes_by_metadata_filter() -> None:
    nodes, _ = corpus(20)
    store = NumpyVectorStore()
    store.add(nodes)
    store.delete_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="lang", value="fr")]))
    assert sorted(store.node_ids()) == sorted(f"n{i}" for i in range(0, 20, 2))


def test_postgres_store_refuses_metadata_filters_with_a_hint(store: ChunkStore) -> None:
    if not isinstance(store, PgChunkStore):
        pytest.skip("the embedded store filters on metadata (test_metadata_filters)")
    nodes, vectors = corpus(5)
    store.add(nodes)
    only_fr = _filters(MetadataFilter(key="lang", value="fr"))
    with pytest.raises(NotImplementedError, match="doc_ids or node_ids"):
        ask(store, vectors[0], 3, filters=only_fr)


def _filters(*items: MetadataFilter | MetadataFilters, condition: str = "and") -> MetadataFilters:
    return MetadataFilters(filters=list(items), condition=FilterCondition(condition))


def test_metadata_filters() -> None:
    nodes, vectors = corpus(60)
    store = NumpyVectorStore()
    store.add(nodes)
    q = np.ones(DIM, dtype=np.float32)

    def matching(filters: MetadataFilters) -> set[int]:
        return {int(i[1:]) for i in ask(store, q, 100, filters=filters)}

    eq = MetadataFilter(key="lang", value="fr")
    assert matching(_filters(eq)) == set(range(1, 60, 2))
    page_in = MetadataFilter(key="page", value=[1, 2], operator=FilterOperator.IN)
    assert matching(_filters(page_in)) == {i for i in range(60) if i % 7 in (1, 2)}
    assert matching(_filters(eq, page_in)) == {i for i in range(1, 60, 2) if i % 7 in (1, 2)}
    assert matching(_filters(eq, page_in, condition="or")) == {
        i for i in range(60) if i % 2 or i % 7 in (1, 2)
    }
    ne = MetadataFilter(key="lang", value="fr", operator=FilterOperator.NE)
    assert matching(_filters(ne)) == set(range(0, 60, 2))
    gte = MetadataFilter(key="i", value=55, operator=FilterOperator.GTE)
    assert matching(_filters(gte)) == set(range(55, 60))
    nested = _filters(gte, _filters(eq, MetadataFilter(key="page", value=0)), condition="or")
    assert matching(nested) == set(range(55, 60)) | {i for i in range(1, 60, 2) if i % 7 == 0}
    assert matching(_filters(eq, condition="not")) == set(range(0, 60, 2))
    # The source document can be filtered on although it is not a metadata key.
    assert matching(_filters(MetadataFilter(key="ref_doc_id", value="doc2"))) == set(
        range(2, 60, 5)
    )
    # Wrong type or absent key: no match, no exception.
    assert (
        matching(_filters(MetadataFilter(key="lang", value=3, operator=FilterOperator.GT))) == set()
    )
    assert matching(_filters(MetadataFilter(key="absent", value="x"))) == set()
    # Filters narrow the candidates before top-k, so k filtered results still come back.
    assert len(ask(store, vectors[0], 5, filters=_filters(eq))) == 5


def test_doc_ids_and_node_ids_restrict_the_candidates(store: ChunkStore) -> None:
    nodes, vectors = corpus(30)
    store.add(nodes)
    got = ask(store, vectors[0], 30, doc_ids=["doc1", "doc4"])
    assert {int(i[1:]) % 5 for i in got} == {1, 4} and len(got) == 12
    assert sorted(ask(store, vectors[0], 30, node_ids=["n3", "n7", "zz"])) == ["n3", "n7"]
    assert ask(store, vectors[0], 30, node_ids=["n3"], doc_ids=["doc1"]) == []
    # Empty lists restrict nothing (llama-index's as_retriever() passes node_ids=[]).
    assert len(ask(store, vectors[0], 30, node_ids=[], doc_ids=[])) == 30


def test_get_nodes(store: ChunkStore) -> None:
    nodes, _ = corpus(10)
    store.add(nodes)
    assert [n.node_id for n in store.get_nodes(["n4", "missing", "n1"])] == ["n4", "n1"]
    assert len(store.get_nodes()) == 10
    assert store.get("missing") is None
    assert store.sample_texts(3) == ["chunk 0", "chunk 3", "chunk 6"]


def test_get_nodes_by_metadata_filter() -> None:
    nodes, _ = corpus(10)
    store = NumpyVectorStore()
    store.add(nodes)
    fr = store.get_nodes(filters=_filters(MetadataFilter(key="lang", value="fr")))
    assert sorted(n.node_id for n in fr) == sorted(f"n{i}" for i in range(1, 10, 2))


def test_persistence_round_trip(tmp_path: Path) -> None:
    nodes, vectors = corpus(50)
    nodes[0].excluded_llm_metadata_keys = ["page"]
    nodes[0].start_char_idx, nodes[0].end_char_idx = 0, 42
    nodes[0].relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id="n1")
    nodes[1].text = "accents: procédure, œuvre, 日本"
    store = NumpyVectorStore(embed_model_name="test/model")
    store.add(nodes)
    store.delete_document("doc4")
    store.persist(tmp_path / "store")

    manifest = json.loads((tmp_path / "store" / MANIFEST_FILE).read_text())
    assert manifest["count"] == 40 and manifest["dim"] == DIM
    assert manifest["embed_model"] == "test/model"

    loaded = NumpyVectorStore.load(tmp_path / "store")
    assert loaded.count() == 40 and loaded.dim == DIM and loaded.embed_model_name == "test/model"
    assert loaded.node_ids() == store.node_ids()
    np.testing.assert_array_equal(loaded.vectors(), store.vectors())
    for node_id in store.node_ids():
        a, b = store.get(node_id), loaded.get(node_id)
        assert a is not None and b is not None
        assert (a.text, a.metadata, a.ref_doc_id) == (b.text, b.metadata, b.ref_doc_id)
    first = loaded.get("n0")
    assert first is not None
    assert first.excluded_llm_metadata_keys == ["page"]
    assert (first.start_char_idx, first.end_char_idx) == (0, 42)
    assert first.relationships[NodeRelationship.NEXT].node_id == "n1"  # type: ignore[union-attr]
    assert loaded.get("n1").text == "accents: procédure, œuvre, 日本"  # type: ignore[union-attr]
    rng = np.random.default_rng(5)
    for _ in range(5):
        q = rng.normal(size=DIM).astype(np.float32)
        assert ask(loaded, q, 7) == ask(store, q, 7)


def test_loaded_store_is_memory_mapped_and_copied_on_first_write(tmp_path: Path) -> None:
    nodes, vectors = corpus(20)
    store = NumpyVectorStore()
    store.add(nodes)
    store.persist(tmp_path)
    on_disk = (tmp_path / "vectors.npy").read_bytes()

    loaded = NumpyVectorStore.load(tmp_path, mmap=True)
    assert isinstance(loaded._matrix, np.memmap)
    loaded.delete_document("doc0")
    loaded.add([make_node(99, "docx", vectors[0])])
    assert not isinstance(loaded._matrix, np.memmap)
    assert (tmp_path / "vectors.npy").read_bytes() == on_disk  # the file was never written
    assert loaded.count() == 17 and ask(loaded, vectors[0], 1) == ["n99"]


def test_empty_store_round_trip(tmp_path: Path) -> None:
    NumpyVectorStore().persist(tmp_path)
    loaded = NumpyVectorStore.load(tmp_path)
    assert loaded.count() == 0 and loaded.dim is None
    loaded.add(corpus(3)[0])
    assert loaded.count() == 3


def test_inconsistent_files_are_reported(tmp_path: Path) -> None:
    store = NumpyVectorStore()
    store.add(corpus(5)[0])
    store.persist(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
    manifest["count"] = 6
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(CorruptStoreError):
        NumpyVectorStore.load(tmp_path)


def test_growth_doubles_capacity_without_vstack(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, vectors = corpus(1000)
    more = corpus(1500, seed=3)[0][1000:]

    def no_stacking(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("stacking copies the whole matrix on every add")

    for name in ("vstack", "concatenate", "append", "row_stack"):
        monkeypatch.setattr(np, name, no_stacking, raising=False)
    store = NumpyVectorStore()
    capacities = []
    for node in nodes:
        store.add([node])
        capacities.append(store.capacity)
    distinct = sorted(set(capacities))
    assert distinct == [16 * 2**i for i in range(len(distinct))]
    assert distinct[-1] == 1024
    assert store.count() == 1000
    assert ask(store, vectors[777], 1) == ["n777"]
    store.add(more)  # one big batch jumps straight to the needed size
    assert store.capacity == 2048 and store.count() == 1500


def test_frozen_store_refuses_mutation(store: ChunkStore) -> None:
    nodes, _ = corpus(3)
    store.add(nodes)
    store.freeze()  # type: ignore[attr-defined]
    for mutate in (
        lambda: store.add(nodes),
        lambda: store.delete("doc0"),
        lambda: store.delete_nodes(["n0"]),
        store.clear,
    ):
        with pytest.raises(ReadOnlyStoreError):
            mutate()
    assert store.count() == 3
    assert (
        len(
            store.query(VectorStoreQuery(query_embedding=[1.0] * DIM, similarity_top_k=2)).ids or []
        )
        == 2
    )


def test_works_as_a_llama_index_vector_store(store: ChunkStore) -> None:
    embed = MockEmbedding(embed_dim=DIM)
    nodes = [TextNode(id_=f"t{i}", text=f"text {i}") for i in range(4)]
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    assert store.count() == 4
    hits = index.as_retriever(similarity_top_k=2).retrieve("anything")
    assert len(hits) == 2 and all(h.node.get_content().startswith("text ") for h in hits)
