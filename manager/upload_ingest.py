"""Ingesting what the admin uploaded or listed as URLs: stage, then ingest as one batch."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from manager.operations import BatchOutcome, ingest_batch
from manager.uploads import UploadedFile, stage_uploads, stage_urls
from themes.ingest import IngestProgress
from themes.readers import RejectedFile, safe_file_name
from themes.theme import Theme


def renamed_uploads(names: Iterable[str]) -> list[tuple[str, str]]:
    """(uploaded name, stored name) of each upload stored under another name.

    A path, control characters or a reserved name are taken out of a name; a name that
    cannot be made safe is not listed here: it is refused with its reason in the batch.
    """
    renamed = []
    for name in names:
        try:
            stored = safe_file_name(name)
        except RejectedFile:
            continue
        if stored != name:
            renamed.append((name, stored))
    return renamed


def ingest_uploads(
    theme: Theme,
    uploads: Sequence[UploadedFile],
    urls: Sequence[str],
    embed_model: Any,
    *,
    max_bytes: int,
    progress: Callable[[IngestProgress], None] | None = None,
) -> BatchOutcome:
    """Stage the uploads and the fetched URLs in a temporary folder and ingest them.

    A file refused while staging (too big, unsupported, unreachable URL) is reported in
    the batch's statuses beside the ingested ones; the staging folder never outlives
    the batch.
    """
    with tempfile.TemporaryDirectory(prefix="chatitego-upload-") as tmp:
        staged = stage_uploads(uploads, Path(tmp) / "files", max_bytes=max_bytes)
        fetched = stage_urls(urls, Path(tmp) / "urls", max_bytes=max_bytes)
        return ingest_batch(
            theme,
            staged.paths + fetched.paths,
            embed_model,
            rejected=staged.rejected + fetched.rejected,
            progress=progress,
        )
