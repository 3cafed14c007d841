"""``ChunkStore``: what the rest of Chatitego may rely on from a theme's chunk store.

The embedded ``NumpyVectorStore`` is the only implementation today; the
protocol exists so that a server-side backend (pgvector) can replace it
without touching ingestion or retrieval. Everything llama-index itself needs
comes from ``BasePydanticVectorStore``; this protocol only names the extra
operations Chatitego uses.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, Self, runtime_checkable

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryResult


@runtime_checkable
class ChunkStore(Protocol):
    """A store of embedded chunks (llama-index nodes) for one theme."""

    @property
    def dim(self) -> int | None:
        """Embedding dimension, ``None`` while the store has never held a vector."""
        ...

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """Insert or replace (same node id) nodes that carry an embedding; return their ids."""
        ...

    def delete_document(self, ref_doc_id: str) -> list[str]:
        """Remove every chunk of one source document; return the removed node ids."""
        ...

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Nearest chunks by cosine similarity, best first."""
        ...

    def get(self, node_id: str) -> BaseNode | None:
        """One chunk without its embedding, or ``None``."""
        ...

    def count(self) -> int:
        """Number of chunks."""
        ...

    def iter_texts(self) -> Iterator[tuple[str, str]]:
        """``(node_id, text)`` for every chunk, e.g. to (re)build a keyword index."""
        ...

    def persist(self, persist_path: str | os.PathLike[str]) -> None:
        """Write the store under the folder ``persist_path``."""
        ...

    @classmethod
    def load(cls, persist_path: str | os.PathLike[str], *, mmap: bool = True) -> Self:
        """Read a store written by ``persist``."""
        ...
