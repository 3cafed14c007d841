"""``NumpyVectorStore``: an embedded llama-index vector store on one float32 matrix.

All vectors live L2-normalised in one contiguous ``(capacity, dim)`` float32
matrix, so cosine similarity is a single matrix-vector product and top-k is an
``argpartition`` over it. Capacity doubles when full, so adding n chunks one
batch at a time costs O(n) copies, not O(n^2) as ``np.vstack`` per add would.
Deletion moves the last row into the hole (O(dim) per removed chunk) instead
of compacting the whole matrix.

On disk (one folder): ``vectors.npy`` (``np.save`` of the live rows),
``nodes.jsonl`` (one JSON object per row, same order: id, ref_doc_id, text,
metadata and a few optional node fields) and ``manifest.json`` (format, count,
dim, embed model), written last. ``load`` maps ``vectors.npy`` read-only
(``mmap_mode="r"``) so opening a large store costs little; the first mutation
copies it into memory.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Self, cast

import numpy as np
import numpy.typing as npt
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import (
    BaseNode,
    TextNode,
)
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)

from themes.chunk_records import checked_embeddings, node_from_record, node_record
from themes.errors import ThemesError

FloatMatrix = npt.NDArray[np.float32]
FloatVector = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]

VECTORS_FILE = "vectors.npy"
NODES_FILE = "nodes.jsonl"
MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1

_MIN_CAPACITY = 16
# Filter keys that address the source document even when it is not in the metadata:
# llama-index's node_to_metadata_dict writes it under these three names.
_REF_DOC_KEYS = frozenset({"ref_doc_id", "doc_id", "document_id"})


class ReadOnlyStoreError(ThemesError, RuntimeError):
    """A mutation was attempted on a frozen store (a published index version)."""


class CorruptStoreError(ThemesError, ValueError):
    """The files of a persisted store disagree with each other."""


# How a metadata value ``meta`` is compared to a filter's ``value``, per operator (the value
# is present: a missing key is handled before).
_COMPARISONS: dict[FilterOperator, Callable[[Any, Any], bool]] = {
    FilterOperator.EQ: lambda meta, value: bool(meta == value),
    FilterOperator.NE: lambda meta, value: bool(meta != value),
    FilterOperator.GT: lambda meta, value: bool(meta > value),
    FilterOperator.GTE: lambda meta, value: bool(meta >= value),
    FilterOperator.LT: lambda meta, value: bool(meta < value),
    FilterOperator.LTE: lambda meta, value: bool(meta <= value),
    FilterOperator.IN: lambda meta, value: meta in value,
    FilterOperator.NIN: lambda meta, value: meta not in value,
    FilterOperator.CONTAINS: lambda meta, value: value in meta,
    FilterOperator.ANY: lambda meta, value: any(v in meta for v in value),
    FilterOperator.ALL: lambda meta, value: all(v in meta for v in value),
    FilterOperator.TEXT_MATCH: lambda meta, value: (
        isinstance(meta, str) and isinstance(value, str) and value in meta
    ),
    FilterOperator.TEXT_MATCH_INSENSITIVE: lambda meta, value: (
        isinstance(meta, str) and isinstance(value, str) and value.lower() in meta.lower()
    ),
}


def _predicate(flt: MetadataFilter) -> Callable[[Any], bool]:
    """One filter as a test on a metadata value (``None`` when the key is absent).

    Semantics follow llama-index's ``build_metadata_filter_fn`` except that a
    value of the wrong type (``"a" > 3``) does not match instead of raising:
    one chunk with odd metadata must not break every query of the theme.
    """
    op, value = flt.operator, flt.value

    def test(meta: Any) -> bool:
        if op == FilterOperator.IS_EMPTY:
            return meta is None or meta == "" or meta == []
        if meta is None:
            return op in (FilterOperator.NE, FilterOperator.NIN)
        compare = _COMPARISONS.get(op)
        if compare is None:
            raise ValueError(f"unsupported metadata filter operator: {op!r}")
        return compare(meta, value)

    def safe_test(meta: Any) -> bool:
        try:
            return test(meta)
        except TypeError:
            return False

    return safe_test


class NumpyVectorStore(BasePydanticVectorStore):
    """Embedded cosine-similarity vector store; implements ``ChunkStore``.

    Not thread-safe for writes: Chatitego mutates a private copy under the
    theme's write lock (``IndexStorage.writer``) and publishes frozen copies,
    which any number of threads may query.
    """

    stores_text: bool = True
    flat_metadata: bool = False
    embed_model_name: str | None = None

    _matrix: FloatMatrix = PrivateAttr(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    _count: int = PrivateAttr(default=0)
    _dim: int | None = PrivateAttr(default=None)
    # True when _matrix is ours to write; False while it is a read-only memory map.
    _owned: bool = PrivateAttr(default=True)
    _frozen: bool = PrivateAttr(default=False)
    _ids: list[str] = PrivateAttr(default_factory=list)
    _rows: dict[str, int] = PrivateAttr(default_factory=dict)
    _ref_doc_ids: list[str | None] = PrivateAttr(default_factory=list)
    _texts: list[str] = PrivateAttr(default_factory=list)
    _metadata: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _extras: list[dict[str, Any] | None] = PrivateAttr(default_factory=list)
    _by_doc: dict[str, set[str]] = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "NumpyVectorStore"

    @property
    def client(self) -> None:
        return None

    # ------------------------------------------------------------------ inspection

    @property
    def dim(self) -> int | None:
        return self._dim

    @property
    def capacity(self) -> int:
        """Rows allocated; grows by doubling."""
        return int(self._matrix.shape[0])

    @property
    def frozen(self) -> bool:
        return self._frozen

    def count(self) -> int:
        return self._count

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._rows

    def node_ids(self) -> list[str]:
        return list(self._ids)

    def ref_doc_ids(self) -> set[str]:
        """Source documents with at least one chunk."""
        return set(self._by_doc)

    def document_node_ids(self, ref_doc_id: str) -> list[str]:
        return sorted(self._by_doc.get(ref_doc_id, ()))

    def iter_texts(self) -> Iterator[tuple[str, str]]:
        return iter(zip(self._ids, self._texts, strict=True))

    def embeddings(self, node_ids: Sequence[str]) -> FloatMatrix:
        """The normalised vectors of ``node_ids`` (a copy), in order; ``KeyError`` if unknown."""
        rows = [self._rows[i] for i in node_ids]
        if self._dim is None:
            return np.zeros((len(rows), 0), dtype=np.float32)
        return np.asarray(self._matrix[rows], dtype=np.float32)

    def sample_texts(self, n: int) -> list[str]:
        """Up to ``n`` chunk texts taken at a regular step over the whole store."""
        if n <= 0 or self._count == 0:
            return []
        step = max(1, self._count // n)
        return self._texts[::step][:n]

    def snapshot(self) -> AbstractContextManager[None]:
        """A stored version never changes under its readers: nothing to hold."""
        return nullcontext()

    def vectors(self) -> FloatMatrix:
        """Read-only view of the live normalised vectors, one row per ``node_ids()`` entry."""
        view = self._matrix[: self._count]
        view = view.view()
        view.flags.writeable = False
        return view

    def get(self, node_id: str) -> TextNode | None:
        row = self._rows.get(node_id)
        return None if row is None else self._node(row)

    def get_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
    ) -> list[BaseNode]:
        """Nodes by id (unknown ids are skipped, order kept) and/or by metadata filters."""
        if node_ids is None:
            rows = list(range(self._count))
        else:
            rows = [self._rows[i] for i in node_ids if i in self._rows]
        if filters is not None and filters.filters:
            mask = self._filter_mask(filters)
            rows = [r for r in rows if mask[r]]
        return [self._node(r) for r in rows]

    # ------------------------------------------------------------------ mutation

    def freeze(self) -> Self:
        """Refuse every later mutation; used for published, shared versions."""
        self._frozen = True
        return self

    def _check_mutable(self) -> None:
        if self._frozen:
            raise ReadOnlyStoreError(
                "this vector store is a published index version and is read-only; "
                "mutate it through IndexStorage(theme_dir).writer()"
            )

    def _reserve(self, extra: int) -> None:
        """Make room for ``extra`` more rows in a matrix we own."""
        assert self._dim is not None
        needed = self._count + extra
        if self._owned and needed <= self.capacity:
            return
        capacity = self.capacity if self._owned else 0
        if needed > capacity:
            capacity = max(_MIN_CAPACITY, 1 << math.ceil(math.log2(max(needed, 1))))
        matrix = np.empty((capacity, self._dim), dtype=np.float32)
        matrix[: self._count] = self._matrix[: self._count]
        self._matrix = matrix
        self._owned = True

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Insert nodes, replacing any chunk with the same node id; return the ids.

        Every node needs an embedding, JSON-serialisable metadata and the same
        dimension as the vectors already stored.
        """
        self._check_mutable()
        if not nodes:
            return []
        vectors = checked_embeddings(list(nodes), self._dim)
        dim = int(vectors.shape[1])
        # Everything that can fail is done before the store changes.
        records = [node_record(n) for n in nodes]
        if self._dim is None:
            self._dim = dim
            self._matrix = np.zeros((0, dim), dtype=np.float32)

        # A node id repeated inside one batch: the last occurrence wins, as with
        # successive add() calls.
        last: dict[str, int] = {}
        for i, node in enumerate(nodes):
            last[node.node_id] = i
        fresh = [i for i in last.values() if nodes[i].node_id not in self._rows]
        self._reserve(len(fresh))
        for i in last.values():
            node_id = nodes[i].node_id
            row = self._rows.get(node_id)
            if row is None:
                row = self._count
                self._count += 1
                self._rows[node_id] = row
                self._ids.append(node_id)
                self._ref_doc_ids.append(None)
                self._texts.append("")
                self._metadata.append({})
                self._extras.append(None)
            else:
                self._unlink_doc(node_id, self._ref_doc_ids[row])
            text, ref_doc_id, metadata, extras = records[i]
            self._matrix[row] = vectors[i]
            self._ref_doc_ids[row] = ref_doc_id
            self._texts[row] = text
            self._metadata[row] = metadata
            self._extras[row] = extras
            if ref_doc_id is not None:
                self._by_doc.setdefault(ref_doc_id, set()).add(node_id)
        return [n.node_id for n in nodes]

    def _unlink_doc(self, node_id: str, ref_doc_id: str | None) -> None:
        if ref_doc_id is None:
            return
        members = self._by_doc.get(ref_doc_id)
        if members is not None:
            members.discard(node_id)
            if not members:
                del self._by_doc[ref_doc_id]

    def _remove_rows(self, node_ids: Iterable[str]) -> list[str]:
        """Swap-remove: the last live row fills each hole, so removal is O(dim) per chunk."""
        self._check_mutable()
        removed = [i for i in dict.fromkeys(node_ids) if i in self._rows]
        if not removed:
            return []
        if not self._owned:
            self._reserve(0)
        for node_id in removed:
            row = self._rows.pop(node_id)
            self._unlink_doc(node_id, self._ref_doc_ids[row])
            last = self._count - 1
            if row != last:
                moved = self._ids[last]
                self._matrix[row] = self._matrix[last]
                self._ids[row] = moved
                self._ref_doc_ids[row] = self._ref_doc_ids[last]
                self._texts[row] = self._texts[last]
                self._metadata[row] = self._metadata[last]
                self._extras[row] = self._extras[last]
                self._rows[moved] = row
            for column in (self._ids, self._ref_doc_ids, self._texts, self._metadata):
                column.pop()
            self._extras.pop()
            self._count = last
        return removed

    def delete_document(self, ref_doc_id: str) -> list[str]:
        """Remove every chunk of ``ref_doc_id``; return the removed node ids."""
        self._check_mutable()
        return self._remove_rows(sorted(self._by_doc.get(ref_doc_id, ())))

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        self.delete_document(ref_doc_id)

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Remove the given nodes, or those matching ``filters``, or both (intersection)."""
        self._check_mutable()
        if node_ids is None and (filters is None or not filters.filters):
            raise ValueError("delete_nodes needs node_ids or filters (use clear() to empty)")
        candidates = list(self._ids) if node_ids is None else node_ids
        if filters is not None and filters.filters:
            mask = self._filter_mask(filters)
            candidates = [i for i in candidates if i in self._rows and mask[self._rows[i]]]
        self._remove_rows(candidates)

    def clear(self) -> None:
        """Remove every chunk; the dimension and embed model name are kept."""
        self._check_mutable()
        dim = self._dim or 0
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._owned = True
        self._count = 0
        self._ids, self._ref_doc_ids, self._texts = [], [], []
        self._metadata, self._extras = [], []
        self._rows, self._by_doc = {}, {}

    # ------------------------------------------------------------------ query

    def _meta_value(self, row: int, key: str) -> Any:
        meta = self._metadata[row]
        if key in meta:
            return meta[key]
        if key in _REF_DOC_KEYS:
            return self._ref_doc_ids[row]
        return None

    def _filter_mask(self, filters: MetadataFilters) -> BoolArray:
        n = self._count
        masks: list[BoolArray] = []
        for flt in filters.filters:
            if isinstance(flt, MetadataFilters):
                masks.append(self._filter_mask(flt))
                continue
            test, key = _predicate(flt), flt.key
            masks.append(
                np.fromiter((test(self._meta_value(r, key)) for r in range(n)), bool, count=n)
            )
        if not masks:
            return np.ones(n, dtype=bool)
        condition = filters.condition or FilterCondition.AND
        if condition == FilterCondition.AND:
            return np.logical_and.reduce(masks)
        if condition == FilterCondition.OR:
            return np.logical_or.reduce(masks)
        if condition == FilterCondition.NOT:
            return ~np.logical_or.reduce(masks)
        raise ValueError(f"unsupported filter condition: {condition!r}")

    def _candidate_mask(self, query: VectorStoreQuery) -> BoolArray | None:
        """Rows allowed by the query's filters, doc_ids and node_ids; ``None`` = all.

        An EMPTY ``doc_ids`` or ``node_ids`` list means "no restriction", as in
        llama-index's text-storing stores: ``VectorStoreIndex.as_retriever()``
        passes ``node_ids=[]`` for them, and honouring it would return nothing.
        """
        mask: BoolArray | None = None
        if query.filters is not None and query.filters.filters:
            mask = self._filter_mask(query.filters)
        if query.doc_ids:
            allowed = np.zeros(self._count, dtype=bool)
            for doc in query.doc_ids:
                for node_id in self._by_doc.get(doc, ()):
                    allowed[self._rows[node_id]] = True
            mask = allowed if mask is None else mask & allowed
        if query.node_ids:
            allowed = np.zeros(self._count, dtype=bool)
            rows = [self._rows[i] for i in query.node_ids if i in self._rows]
            allowed[rows] = True
            mask = allowed if mask is None else mask & allowed
        return mask

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Top ``similarity_top_k`` chunks by cosine similarity, best first.

        Honours ``filters`` (llama-index ``MetadataFilters``, nested ones
        included), ``doc_ids`` (source documents) and ``node_ids``. Only the
        default (dense) mode exists here: hybrid search is the retriever's job.
        """
        if query.mode != VectorStoreQueryMode.DEFAULT:
            raise ValueError(
                f"NumpyVectorStore only supports the default query mode, not {query.mode}"
            )
        if query.query_embedding is None:
            raise ValueError("NumpyVectorStore.query needs query.query_embedding")
        k = query.similarity_top_k
        if k <= 0 or self._count == 0:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        q = self._query_vector(query.query_embedding)

        mask = self._candidate_mask(query)
        if mask is None:
            rows = None
            scores = self._matrix[: self._count] @ q
        else:
            rows = np.flatnonzero(mask)
            if rows.size == 0:
                return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
            if rows.size * 4 > self._count:
                # Gathering most rows would copy most of the matrix: score them all instead.
                scores = (self._matrix[: self._count] @ q)[rows]
            else:
                scores = self._matrix[rows] @ q
        top = _top_k(scores, k)
        hits = top if rows is None else rows[top]

        nodes: list[BaseNode] = [self._node(int(r)) for r in hits]
        return VectorStoreQueryResult(
            nodes=nodes,
            similarities=[float(s) for s in scores[top]],
            ids=[self._ids[int(r)] for r in hits],
        )

    def _query_vector(self, embedding: list[float]) -> FloatVector:
        """The query's embedding, checked against the store's dimension and normalised."""
        q = np.asarray(embedding, dtype=np.float32)
        if q.shape != (self._dim,):
            raise ValueError(
                f"query embedding has shape {q.shape}, the store holds dim {self._dim}"
            )
        norm = float(np.linalg.norm(q))
        return q / np.float32(norm) if norm > 0.0 else q

    def _node(self, row: int) -> TextNode:
        return node_from_record(
            self._ids[row],
            self._ref_doc_ids[row],
            self._texts[row],
            self._metadata[row],
            self._extras[row],
        )

    # ------------------------------------------------------------------ persistence

    def persist(self, persist_path: str | os.PathLike[str], fs: Any = None) -> None:
        """Write the store into the folder ``persist_path`` (created if needed).

        Files are overwritten in place: for atomic, crash-safe publication write
        through ``IndexStorage``, which persists into a fresh folder.
        """
        if fs is not None:
            raise NotImplementedError("NumpyVectorStore persists to the local file system only")
        folder = Path(persist_path)
        folder.mkdir(parents=True, exist_ok=True)
        dim = self._dim or 0
        np.save(folder / VECTORS_FILE, np.ascontiguousarray(self._matrix[: self._count]))
        with open(folder / NODES_FILE, "w", encoding="utf-8", newline="\n") as out:
            for row in range(self._count):
                record: dict[str, Any] = {
                    "id": self._ids[row],
                    "doc": self._ref_doc_ids[row],
                    "text": self._texts[row],
                    "meta": self._metadata[row],
                }
                if self._extras[row]:
                    record["x"] = self._extras[row]
                out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
                out.write("\n")
        manifest = {
            "format": FORMAT_VERSION,
            "count": self._count,
            "dim": dim if self._dim is not None else None,
            "embed_model": self.embed_model_name,
            "metric": "cosine",
        }
        # The manifest goes last: a folder without one was never completely written.
        (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, persist_path: str | os.PathLike[str], *, mmap: bool = True) -> Self:
        """Read a store written by ``persist``; with ``mmap`` the vectors stay on disk.

        Raises ``FileNotFoundError`` for a missing file and ``CorruptStoreError``
        when the files disagree (count, dimension, format).
        """
        folder = Path(persist_path)
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        if manifest.get("format") != FORMAT_VERSION:
            raise CorruptStoreError(
                f"{folder}: unknown vector store format {manifest.get('format')!r}"
            )
        count, dim = int(manifest["count"]), manifest["dim"]
        # np.load cannot memory-map a file with no data bytes.
        mmap_mode: Any = "r" if mmap and count > 0 else None
        matrix = _load_matrix(folder, count, dim, mmap_mode)
        store = cls(embed_model_name=manifest.get("embed_model"))
        records = _node_records(folder / NODES_FILE)
        ids: list[str] = [record["id"] for record in records]
        docs: list[str | None] = [record["doc"] for record in records]
        texts: list[str] = [record["text"] for record in records]
        metas: list[dict[str, Any]] = [record["meta"] for record in records]
        extras: list[dict[str, Any] | None] = [record.get("x") for record in records]
        if len(ids) != count:
            raise CorruptStoreError(f"{folder}: {NODES_FILE} has {len(ids)} rows, manifest {count}")
        rows = {node_id: row for row, node_id in enumerate(ids)}
        if len(rows) != count:
            raise CorruptStoreError(f"{folder}: duplicate node ids in {NODES_FILE}")
        by_doc: dict[str, set[str]] = {}
        for node_id, doc in zip(ids, docs, strict=True):
            if doc is not None:
                by_doc.setdefault(doc, set()).add(node_id)

        store._matrix = matrix
        store._owned = mmap_mode is None
        store._count, store._dim = count, dim
        store._ids, store._rows, store._ref_doc_ids = ids, rows, docs
        store._texts, store._metadata, store._extras = texts, metas, extras
        store._by_doc = by_doc
        return store


def _load_matrix(folder: Path, count: int, dim: int | None, mmap_mode: Any) -> FloatMatrix:
    """The stored vectors, checked against the manifest's count and dimension."""
    matrix = np.load(folder / VECTORS_FILE, mmap_mode=mmap_mode, allow_pickle=False)
    expected_shape = (count, dim if dim is not None else 0)
    if matrix.dtype != np.float32 or matrix.shape != expected_shape:
        raise CorruptStoreError(
            f"{folder}: {VECTORS_FILE} is {matrix.dtype}{matrix.shape}, "
            f"the manifest says float32{expected_shape}"
        )
    return cast("FloatMatrix", matrix)


def _node_records(path: Path) -> list[dict[str, Any]]:
    """The chunk records of ``NODES_FILE``, one JSON object per line, in row order."""
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _top_k(scores: FloatVector, k: int) -> npt.NDArray[np.intp]:
    """Positions of the ``k`` best scores, best first (ties keep their order)."""
    count = int(scores.shape[0])
    k = min(k, count)
    top = np.argpartition(scores, -k)[-k:] if k < count else np.arange(count)
    return top[np.argsort(-scores[top], kind="stable")]
