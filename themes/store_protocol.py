"""What the rest of Chatitego may rely on from a theme's index, whatever the backend.

Two backends implement these protocols: the embedded one (``NumpyVectorStore``,
``KeywordIndex`` and ``IndexStorage``, files under the theme's folder) and PostgreSQL with
pgvector (``themes.pg``). Retrieval, ingestion, the pages and the CLI only use what is
named here; everything llama-index itself needs from a vector store comes from
``BasePydanticVectorStore``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryResult

if TYPE_CHECKING:
    from themes.index_storage import IndexVersion, IndexWriter

FloatMatrix = npt.NDArray[np.float32]


@runtime_checkable
class ChunkStore(Protocol):
    """A store of embedded chunks (llama-index nodes) for one theme.

    Vectors are kept L2-normalised: a query's similarity is the cosine. A published
    version's store is read-only (mutations raise); a writer's store is the writer's
    private, uncommitted view until the writer publishes it.
    """

    embed_model_name: str | None

    @property
    def dim(self) -> int | None:
        """Embedding dimension, ``None`` while the store has never held a vector."""
        ...

    # --- reading ------------------------------------------------------------------------
    def count(self) -> int:
        """Number of chunks."""
        ...

    def node_ids(self) -> list[str]:
        """Every chunk's node id."""
        ...

    def ref_doc_ids(self) -> set[str]:
        """Source documents with at least one chunk."""
        ...

    def document_node_ids(self, ref_doc_id: str) -> list[str]:
        """The node ids of one source document's chunks, sorted."""
        ...

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Nearest chunks by cosine similarity, best first; honours ``doc_ids``/``node_ids``."""
        ...

    def embeddings(self, node_ids: Sequence[str]) -> FloatMatrix:
        """The normalised vectors of ``node_ids``, one row each, in that order.

        ``KeyError`` for an unknown id: the caller took it from this same store.
        """
        ...

    def get(self, node_id: str) -> TextNode | None:
        """One chunk without its embedding, or ``None``."""
        ...

    def get_nodes(self, node_ids: list[str] | None = None, filters: Any = None) -> list[BaseNode]:
        """Chunks by id (unknown ids skipped, order kept), all of them when ``None``."""
        ...

    def iter_texts(self) -> Iterator[tuple[str, str]]:
        """``(node_id, text)`` for every chunk, e.g. to (re)build a keyword index."""
        ...

    def sample_texts(self, n: int) -> list[str]:
        """Up to ``n`` chunk texts spread over the whole store (deterministic)."""
        ...

    def snapshot(self) -> AbstractContextManager[None]:
        """Reads inside the block see one state of the store, even if a writer publishes."""
        ...

    # --- writing (a writer's store only) --------------------------------------------------
    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """Insert or replace (same node id) nodes that carry an embedding; return their ids."""
        ...

    def delete_document(self, ref_doc_id: str) -> list[str]:
        """Remove every chunk of one source document; return the removed node ids."""
        ...

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: Any = None, **kwargs: Any
    ) -> None:
        """Remove the given chunks."""
        ...

    def clear(self) -> None:
        """Remove every chunk."""
        ...


@runtime_checkable
class KeywordSearch(Protocol):
    """Keyword (full-text) search over the same chunks as the theme's ``ChunkStore``.

    Words are matched through French and English stems, without accents or case.
    """

    def count(self) -> int:
        """Number of chunks searched."""
        ...

    def node_ids(self) -> list[str]:
        """Every searched chunk's node id (the same set as the vector store's)."""
        ...

    def query(
        self, text: str, k: int = 10, *, node_ids: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """At most ``k`` ``(node_id, score)`` with a positive score, best first."""
        ...


@runtime_checkable
class ThemeIndexStorage(Protocol):
    """The versioned index of one theme: read the published version, or write the next."""

    def current_version_name(self) -> str | None:
        """The published version's name, ``None`` when nothing was ever published."""
        ...

    def list_versions(self) -> list[str]:
        """Versions that can still be loaded, oldest first."""
        ...

    def load_current(self) -> IndexVersion:
        """The published version (read-only)."""
        ...

    def load_version(self, name: str) -> IndexVersion:
        """One version by name (``list_versions()``)."""
        ...

    def refresh(self, previous: IndexVersion | None) -> IndexVersion:
        """``previous`` while it is still the published version, else the new one."""
        ...

    def check_current(self) -> None:
        """Raise ``IndexCorrupted`` when the published version cannot be read."""
        ...

    def published_or_none(self) -> str | None:
        """The published version's name; ``None`` when none or unreadable."""
        ...

    def exclusive(self, *, lock_timeout: float | None = None) -> AbstractContextManager[None]:
        """Hold the theme's write lock (``ThemeBusy`` after ``lock_timeout`` s)."""
        ...

    def writer(
        self,
        *,
        lock_timeout: float | None = None,
        sync_keywords: bool = True,
        rebuild: bool = False,
    ) -> AbstractContextManager[IndexWriter]:
        """Change the index; publish one new version when the block ends cleanly."""
        ...
