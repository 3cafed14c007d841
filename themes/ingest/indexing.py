"""Chunking and embedding what was read, within the time budget, then recording the outcome."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from llama_index.core.embeddings import BaseEmbedding

from themes.chunking import PendingFile, ProgressTracker, chunk_parameters, embed_pending
from themes.index_storage import IndexWriter
from themes.ingest.reports import FileResult, IngestReport
from themes.ingest_estimate import DEFAULT_MAX_MINUTES, TimeBudget
from themes.theme import Theme

logger = logging.getLogger(__name__)


def embed_within_budget(
    w: IndexWriter,
    theme: Theme,
    embed_model: BaseEmbedding,
    pending: list[PendingFile],
    tracker: ProgressTracker,
    report: IngestReport,
    max_minutes: float | None,
) -> list[PendingFile]:
    """Chunk and embed what was read, within the time budget; refusals go to the report."""
    chunk_size, overlap = chunk_parameters(theme.settings.retrieval, embed_model)
    budget = TimeBudget(_limit_minutes(max_minutes), chunk_size, overlap)
    indexed, refused = embed_pending(
        w, embed_model, theme.settings.retrieval, pending, tracker, budget, theme_name=theme.name
    )
    report.files.extend(FileResult(r.name, "rejected", reason=r.reason) for r in refused)
    return indexed


def _limit_minutes(max_minutes: float | None) -> float:
    if max_minutes is not None:
        return max_minutes
    try:
        from config.settings import get_config

        return float(get_config().ingest_max_minutes)
    except Exception:  # noqa: BLE001 - an unreadable configuration must not stop ingestion
        logger.warning("configuration unreadable: ingest time limit %s min", DEFAULT_MAX_MINUTES)
        return DEFAULT_MAX_MINUTES


def record_indexed(
    report: IngestReport,
    w: IndexWriter,
    tracker: ProgressTracker,
    indexed: list[PendingFile],
    changed: bool,
    renamed: Mapping[str, str] | None = None,
) -> None:
    """Record the indexed files, and publish (or not) the version."""
    for item in indexed:
        warnings = [item.warning] if item.warning else []
        if renamed and item.name in renamed:
            warnings.append(
                f"stored as {item.name!r} (the name {renamed[item.name]!r} was made safe)"
            )
        report.files.append(
            FileResult(
                item.name,
                item.status,
                chunks=len(w.vectors.document_node_ids(item.name)),
                removed_chunks=item.removed_chunks,
                warning="; ".join(warnings) or None,
            )
        )
    report.chunks_embedded = tracker.chunks_done
    if changed:
        tracker.emit("writing")
    else:
        w.discard()


def close_report(
    report: IngestReport,
    w: IndexWriter,
    tracker: ProgressTracker,
    started: float,
    writing_started: float,
) -> None:
    """Stamp the published version and the timings, once the writer has committed."""
    tracker.timings["writing"] = time.perf_counter() - writing_started
    report.version = w.committed_version
    report.timings = {**tracker.timings, "total": time.perf_counter() - started}
