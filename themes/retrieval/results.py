"""What one retrieval returns: the kept chunks with their scores, also usable as nodes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from llama_index.core.schema import NodeWithScore, TextNode


@dataclass(frozen=True)
class RetrievedChunk:
    """One chunk kept by the retriever, with every score that led to it.

    ``vector_score``: best cosine similarity over the query variants;
    ``keyword_score``: best BM25 score (0 when no variant's keywords matched);
    ``fused_score``: reciprocal rank fusion of all the ranked lists;
    ``rerank_score``: the final ordering score; ``rank``: 1-based position.
    """

    node_id: str
    text: str
    compressed_text: str
    file_name: str | None
    page: int | None
    vector_score: float
    keyword_score: float
    fused_score: float
    rerank_score: float
    rank: int
    metadata: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def label(self) -> str:
        """``"file.pdf, p. 3"``: how the chunk is cited."""
        name = _one_line(self.file_name) if self.file_name else "unknown document"
        return f"{name}, p. {self.page}" if self.page is not None else name


@dataclass(frozen=True)
class RetrievalResult(Sequence[NodeWithScore]):
    """What one retrieval found: the chunks, best first, and how long each stage took.

    It is also a sequence of ``NodeWithScore`` (the compressed chunks, scored by
    ``rerank_score``): ``HybridRetriever.retrieve`` overrides llama-index's
    ``BaseRetriever.retrieve``, whose callers iterate over nodes.
    """

    query: str
    variants: tuple[str, ...] = ()
    items: list[RetrievedChunk] = field(default_factory=list)
    timings_ms: Mapping[str, float] = field(default_factory=dict)

    @property
    def nodes(self) -> list[NodeWithScore]:
        return [_node_of(item) for item in self.items]

    @overload
    def __getitem__(self, index: int) -> NodeWithScore: ...

    @overload
    def __getitem__(self, index: slice) -> list[NodeWithScore]: ...

    def __getitem__(self, index: int | slice) -> NodeWithScore | list[NodeWithScore]:
        if isinstance(index, slice):
            return [_node_of(item) for item in self.items[index]]
        return _node_of(self.items[index])

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[NodeWithScore]:
        return (_node_of(item) for item in self.items)

    def context_text(self, escape: Callable[[str], str] | None = None) -> str:
        """The compressed passages, numbered, each between ``[Source n: ...]`` and its end.

        ``escape`` (optional) rewrites each passage first, e.g. to neutralise
        lines a ReAct agent would read as its own markers.
        """
        blocks = []
        for item in self.items:
            body = item.compressed_text if escape is None else escape(item.compressed_text)
            blocks.append(
                f"[Source {item.rank}: {item.label}]\n{body}\n[End of source {item.rank}]"
            )
        return "\n\n".join(blocks)


def _node_of(item: RetrievedChunk) -> NodeWithScore:
    node = TextNode(id_=item.node_id, text=item.compressed_text, metadata=dict(item.metadata))
    # What the chat engine's LLM reads of the metadata: where the passage comes from.
    node.excluded_llm_metadata_keys = [
        k for k, v in node.metadata.items() if k not in ("file_name", "page") or v is None
    ]
    node.excluded_embed_metadata_keys = list(node.metadata)
    return NodeWithScore(node=node, score=item.rerank_score)


def _one_line(text: str) -> str:
    # A file name is printed inside a "[Source n: ...]" header: it must not break it.
    return re.sub(r"[\s\[\]]+", " ", text).strip()


def page_of(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


# --------------------------------------------------------------------------------------------
# The retriever
# --------------------------------------------------------------------------------------------
