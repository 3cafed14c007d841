"""ToolRouter: pick the tools relevant to a prompt.

A llama-index ``ObjectIndex`` over the tools' descriptions, retrieved by
cosine similarity of embeddings; the top-k are offered together with an
always-on set. The index is built once per tool list (the descriptions do not
change between prompts) and queried per prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.objects import ObjectIndex
from llama_index.core.tools import BaseTool


class ToolRouter:
    """Select, per prompt, the routed tools plus the always-on ones."""

    def __init__(
        self,
        tools: Sequence[BaseTool],
        embed_model: BaseEmbedding | None,
        *,
        top_k: int = 4,
        always_on: Iterable[str] = (),
    ) -> None:
        self.tools = list(tools)
        self.top_k = top_k
        self.always_on = set(always_on)
        names = [t.metadata.get_name() for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate tool names: {sorted(names)}")
        routable = [t for t in self.tools if t.metadata.get_name() not in self.always_on]
        self._index: ObjectIndex[BaseTool] | None = None
        if len(routable) > top_k:
            if embed_model is None:
                raise ValueError("routing more tools than top_k needs an embedding model")
            self._index = ObjectIndex.from_objects(
                routable, index_cls=VectorStoreIndex, embed_model=embed_model
            )

    @property
    def routes(self) -> bool:
        """False when every tool is always offered (nothing to choose)."""
        return self._index is not None

    def select(self, prompt: str) -> list[BaseTool]:
        """The tools to offer for ``prompt``, always-on first, in a stable order."""
        if self._index is None:
            return list(self.tools)
        retriever = self._index.as_retriever(similarity_top_k=self.top_k)
        chosen = {t.metadata.get_name() for t in retriever.retrieve(prompt)}
        chosen |= self.always_on
        return [t for t in self.tools if t.metadata.get_name() in chosen]
