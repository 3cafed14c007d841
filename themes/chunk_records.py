"""A chunk (llama-index ``TextNode``) as plain, JSON-safe fields, and back.

Both backends store a chunk as its text, source document, metadata and a few optional
node fields ("extras"); the embedding is kept apart, L2-normalised. Converting here, once,
makes a chunk read back from either backend the same node.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
)

FloatMatrix = npt.NDArray[np.float32]

# Optional TextNode fields kept when set; everything else is rebuilt.
EXTRA_FIELDS = (
    "excluded_embed_metadata_keys",
    "excluded_llm_metadata_keys",
    "start_char_idx",
    "end_char_idx",
)

ChunkRecord = tuple[str, str | None, dict[str, Any], dict[str, Any] | None]


def normalise_rows(vectors: FloatMatrix) -> FloatMatrix:
    """Rows scaled to unit length; a zero row stays zero (similarity 0, never NaN)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0.0, np.float32(1.0), norms)).astype(np.float32)


def checked_embeddings(nodes: Sequence[BaseNode], dim: int | None) -> FloatMatrix:
    """The nodes' embeddings as one normalised matrix; ``ValueError`` names what is wrong."""
    vectors = np.asarray([n.get_embedding() for n in nodes], dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] == 0:
        raise ValueError(f"embeddings must be non-empty vectors, got shape {vectors.shape}")
    if not np.all(np.isfinite(vectors)):
        raise ValueError("embeddings contain NaN or infinity")
    if dim is not None and int(vectors.shape[1]) != dim:
        raise ValueError(f"embedding dimension {vectors.shape[1]} does not match the store's {dim}")
    return normalise_rows(vectors)


def copy_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """A copy a caller may edit without editing the store (deep only where needed: cheaper)."""
    if any(isinstance(v, (dict, list)) for v in meta.values()):
        return copy.deepcopy(meta)
    return dict(meta)


def node_record(node: BaseNode) -> ChunkRecord:
    """``(text, ref_doc_id, metadata, extras)``; ``ValueError`` if the metadata is not JSON."""
    try:
        # Fail now, with the node named, rather than at write time. The round trip also
        # detaches the metadata from the caller's node and makes it what a reload gives
        # (tuples become lists).
        metadata = json.loads(json.dumps(node.metadata, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"metadata of node {node.node_id!r} is not JSON-serialisable: {exc}"
        ) from exc
    extras: dict[str, Any] = {}
    for name in EXTRA_FIELDS:
        value = getattr(node, name, None)
        if value is not None and value != []:
            extras[name] = list(value) if isinstance(value, list) else value
    relations: dict[str, str | list[str]] = {}
    for kind, info in node.relationships.items():
        if kind == NodeRelationship.SOURCE:
            continue
        if isinstance(info, list):
            relations[kind.value] = [r.node_id for r in info]
        else:
            relations[kind.value] = info.node_id
    if relations:
        extras["relationships"] = relations
    text = node.get_content(metadata_mode=MetadataMode.NONE)
    return text, node.ref_doc_id, metadata, extras or None


def node_from_record(
    node_id: str,
    ref_doc_id: str | None,
    text: str,
    metadata: dict[str, Any],
    extras: dict[str, Any] | None,
) -> TextNode:
    """The ``TextNode`` a record stands for (metadata copied)."""
    extras = extras or {}
    relationships: dict[NodeRelationship, RelatedNodeInfo | list[RelatedNodeInfo]] = {}
    if ref_doc_id is not None:
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=ref_doc_id)
    for kind, target in extras.get("relationships", {}).items():
        if isinstance(target, list):
            relationships[NodeRelationship(kind)] = [RelatedNodeInfo(node_id=t) for t in target]
        else:
            relationships[NodeRelationship(kind)] = RelatedNodeInfo(node_id=target)
    fields = {k: v for k, v in extras.items() if k in EXTRA_FIELDS}
    return TextNode(
        id_=node_id,
        text=text,
        metadata=copy_metadata(metadata),
        relationships=relationships,
        **fields,
    )
