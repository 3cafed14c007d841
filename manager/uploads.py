"""Uploaded files and URLs into a staging folder, with the checks the page owes the admin.

Streamlit already refuses files above ``server.maxUploadSize``; the size is checked again
here (the configured ``max_upload_mb`` may be lower, and the config file may be changed).
A plain-text or Markdown upload whose estimated indexing time exceeds ``INGEST_MAX_MINUTES``
is refused before it is even written (its size is its text length); other formats are
estimated by ``ingest_files`` once read. Names are made safe (``safe_file_name``: no folder
part, no control or bidi characters, no Windows device name), the extension must be a
supported one, and a second file of the batch with the same safe name is refused. Every
refusal is a ``FileResult`` with a reason, merged later with ``ingest_files``' own results.
Nothing is ever written outside ``folder``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from themes.ingest import FileResult, IngestProgress
from themes.ingest_estimate import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_MAX_MINUTES,
    DEFAULT_OVERLAP,
    estimate_seconds,
    too_long_reason,
)
from themes.readers import (
    SUPPORTED_EXTENSIONS,
    RejectedFile,
    RejectedURL,
    fetch_url,
    safe_file_name,
    save_fetched,
)


class UploadedFile(Protocol):
    """What ``st.file_uploader`` returns (``UploadedFile``), reduced to what we read."""

    name: str
    size: int

    def getvalue(self) -> bytes: ...


@dataclass
class StagedBatch:
    """Files written to the staging folder, and the ones refused before ingestion."""

    paths: list[Path] = field(default_factory=list)
    rejected: list[FileResult] = field(default_factory=list)


def _refuse(batch: StagedBatch, name: str, reason: str) -> None:
    batch.rejected.append(FileResult(name, "rejected", reason=reason))


_STREAMED_TEXT = (".txt", ".md", ".markdown")


def _max_minutes(max_minutes: float | None) -> float:
    if max_minutes is not None:
        return max_minutes
    try:
        from config.settings import get_config

        return float(get_config().ingest_max_minutes)
    except Exception:  # noqa: BLE001 - an unreadable configuration: the default limit
        return DEFAULT_MAX_MINUTES


def stage_uploads(
    files: Iterable[UploadedFile],
    folder: Path,
    *,
    max_bytes: int,
    max_minutes: float | None = None,
) -> StagedBatch:
    """Write each acceptable upload to ``folder`` under its safe name.

    ``max_minutes``: longest estimated indexing time accepted for the text uploads of the
    batch together (``None``: ``INGEST_MAX_MINUTES``; 0: no limit).
    """
    batch = StagedBatch()
    seen: set[str] = set()
    limit_s = _max_minutes(max_minutes) * 60
    admitted_s = 0.0
    folder.mkdir(parents=True, exist_ok=True)
    for upload in files:
        try:
            name = safe_file_name(upload.name)
        except RejectedFile as exc:
            _refuse(batch, exc.file_name, exc.reason)
            continue
        if Path(name).suffix.lower() not in SUPPORTED_EXTENSIONS:
            _refuse(
                batch,
                name,
                f"unsupported file type '{Path(name).suffix or '(no extension)'}', not "
                f"ingested (supported: {', '.join(SUPPORTED_EXTENSIONS)})",
            )
            continue
        if upload.size > max_bytes:
            _refuse(
                batch,
                name,
                f"file too large ({upload.size / 2**20:.1f} MB, limit "
                f"{max_bytes / 2**20:.0f} MB), not ingested (split it into smaller files)",
            )
            continue
        if name in seen:
            _refuse(batch, name, "another file of this batch has the same name, not ingested")
            continue
        if Path(name).suffix.lower() in _STREAMED_TEXT:
            needed = estimate_seconds(upload.size, DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP)
            if limit_s and admitted_s + needed > limit_s:
                _refuse(batch, name, too_long_reason(needed, limit_s, admitted_s))
                continue
            admitted_s += needed
        seen.add(name)
        target = folder / name
        target.write_bytes(upload.getvalue())
        batch.paths.append(target)
    return batch


def stage_urls(urls: Sequence[str], folder: Path, *, max_bytes: int) -> StagedBatch:
    """Fetch each http(s) URL (public addresses only, size and time limited) into ``folder``."""
    batch = StagedBatch()
    folder.mkdir(parents=True, exist_ok=True)
    for raw in urls:
        url = raw.strip()
        if not url:
            continue
        if not url.startswith(("http://", "https://")):
            _refuse(batch, url, "not an http(s) address, nothing fetched")
            continue
        try:
            batch.paths.append(save_fetched(fetch_url(url, max_bytes=max_bytes), folder))
        except RejectedURL as exc:
            _refuse(batch, exc.url, exc.reason)
        except RejectedFile as exc:
            _refuse(batch, exc.file_name, exc.reason)
    return batch


def parse_url_lines(text: str) -> list[str]:
    """One URL per line; blank lines and ``#`` comments ignored, duplicates dropped."""
    out: list[str] = []
    for line in text.splitlines():
        url = line.strip()
        if url and not url.startswith("#") and url not in out:
            out.append(url)
    return out


# Share of the bar given to each stage (reading is per file, embedding per chunk).
_READ_SHARE = 0.35
_EMBED_SHARE = 0.6


def progress_fraction(event: IngestProgress) -> float:
    """0..1 for a progress bar; never decreases within one call of ``ingest_files``.

    After reading, the bar follows the share of the text embedded (``text_done``), which
    only grows, rather than chunks over an estimated total, which may be revised.
    """
    files = event.files_done / event.files_total if event.files_total else 1.0
    if event.stage == "reading":
        return round(_READ_SHARE * files, 4)
    if event.stage == "writing":
        return 1.0
    text = event.text_done / event.text_total if event.text_total else 0.0
    return round(_READ_SHARE + _EMBED_SHARE * min(1.0, text), 4)
