"""The llama-index Document every reader returns, with the metadata the embedding and LLM see."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_index.core import Document

# Metadata the embedding sees: what the text is about, not where it sits on disk.
_EMBED_METADATA_KEYS = frozenset({"file_name", "title"})
# Metadata the LLM sees, so that it can cite its sources.
_LLM_METADATA_KEYS = frozenset({"file_name", "title", "page"})
# Never embedded nor shown, even if a later pipeline stage adds them.
_ALWAYS_EXCLUDED_KEYS = ("file_path", "source_url")


def make_document(
    text: str,
    *,
    file_name: str,
    file_type: str,
    page: int | None = None,
    headings: Iterable[str] = (),
    **extra: Any,
) -> Document:
    from llama_index.core import Document

    metadata: dict[str, Any] = {
        "file_name": file_name,
        "page": page,
        "file_type": file_type,
        "headings": list(headings),
        **extra,
    }

    # "headings" is excluded from both views on purpose: the headings are already in the text as
    # "#" lines, and a long list would be repeated in every chunk (the splitter even fails when
    # the metadata is longer than a chunk).
    # Empty values ("page: None") would only add noise to what the embedding and LLM read.
    def hidden(shown: frozenset[str]) -> list[str]:
        keys = [k for k, v in metadata.items() if k not in shown or v is None or v == []]
        return keys + [k for k in _ALWAYS_EXCLUDED_KEYS if k not in keys]

    return Document(
        text=text,
        metadata=metadata,
        excluded_embed_metadata_keys=hidden(_EMBED_METADATA_KEYS),
        excluded_llm_metadata_keys=hidden(_LLM_METADATA_KEYS),
    )
