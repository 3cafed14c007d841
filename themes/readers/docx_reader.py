"""Word (.docx) files, with ZIP-bomb limits checked before anything is decompressed.

A DOCX is a ZIP archive. Python's zipfile never inflates an entry beyond its declared size (it
stops and fails the CRC check), so checking the declared sizes is enough to bound memory.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from typing import TYPE_CHECKING, Any

from themes.readers.document import make_document
from themes.readers.errors import RejectedFile

if TYPE_CHECKING:
    from llama_index.core import Document

logger = logging.getLogger(__name__)

# ZIP-bomb limits for DOCX files (module constants so that a deployment, or a test, can tune
# them). A real .docx expands 5-20 times; images barely compress at all.
MAX_DOCX_UNCOMPRESSED = 200 * 2**20
MAX_DOCX_RATIO = 100
MAX_DOCX_ENTRIES = 2_000
# Entries smaller than this are not ratio-checked on their own: tiny XML parts of a normal
# document routinely compress 50:1 and cannot hurt anyway.
_RATIO_CHECK_MIN_ENTRY = 2**20

_MB = 2**20

_CORRUPT_DOCX = "corrupt Word document, not ingested (open it in Word and save it again)"


def _check_zip_limits(name: str, entries: list[zipfile.ZipInfo], archive_size: int) -> None:
    if len(entries) > MAX_DOCX_ENTRIES:
        raise RejectedFile(
            name,
            f"ZIP archive with {len(entries)} entries (limit {MAX_DOCX_ENTRIES}): not a normal "
            "Word document, not ingested",
        )
    total = sum(entry.file_size for entry in entries)
    if total > MAX_DOCX_UNCOMPRESSED:
        raise RejectedFile(
            name,
            f"expands to {total / _MB:.0f} MB when unpacked (limit "
            f"{MAX_DOCX_UNCOMPRESSED / _MB:.0f} MB): possible ZIP bomb, not ingested",
        )
    ratios = [total / max(archive_size, 1)] + [
        entry.file_size / max(entry.compress_size, 1)
        for entry in entries
        if entry.file_size >= _RATIO_CHECK_MIN_ENTRY
    ]
    if max(ratios) > MAX_DOCX_RATIO:
        raise RejectedFile(
            name,
            f"abnormal compression ratio ({max(ratios):.0f}:1, limit {MAX_DOCX_RATIO}:1): "
            "possible ZIP bomb, not ingested",
        )


def _heading_level(paragraph: Any) -> int:
    """1-6 for "Title" and "Heading N" paragraphs, 0 otherwise.

    Built-in style names are stored in English whatever the language of Word ("heading 1" in a
    French document too), so matching the name is enough.
    """
    style = paragraph.style
    style_name = (style.name or "").strip().lower() if style is not None else ""
    if style_name == "title":
        return 1
    match = re.fullmatch(r"heading\s*([1-9])", style_name)
    return min(int(match.group(1)), 6) if match else 0


def _docx_blocks(document: Any) -> tuple[list[str], list[str]]:
    from docx.text.paragraph import Paragraph

    blocks: list[str] = []
    headings: list[str] = []
    # Body order, so that tables stay between the paragraphs that introduce them.
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            text = block.text.strip()
            if not text:
                continue
            level = _heading_level(block)
            if level:
                headings.append(text)
                blocks.append("#" * level + " " + " ".join(text.split()))
            else:
                blocks.append(text)
            continue
        for row in block.rows:
            cells: list[str] = []
            for cell in row.cells:
                value = " ".join(cell.text.split())
                # A merged cell is returned once per grid column it spans.
                if not cells or cells[-1] != value:
                    cells.append(value)
            if any(cells):
                blocks.append(" | ".join(cells))
    return blocks, headings


def read_docx(name: str, data: bytes) -> list[Document]:
    if data.startswith(b"\xd0\xcf\x11\xe0"):
        raise RejectedFile(
            name,
            "old Word 97-2003 format saved as .docx, not ingested (open it in Word and save "
            "it as .docx)",
        )
    if not data.startswith(b"PK\x03\x04"):
        raise RejectedFile(
            name, "content is not a Word document (not a ZIP archive) although it ends in .docx"
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise RejectedFile(name, _CORRUPT_DOCX) from None
    # Before python-docx decompresses anything.
    _check_zip_limits(name, entries, len(data))

    import docx

    try:
        blocks, headings = _docx_blocks(docx.Document(io.BytesIO(data)))
    except Exception as exc:  # noqa: BLE001 - zipfile, lxml and python-docx all raise their own
        logger.info("DOCX %s could not be parsed: %s: %s", name, type(exc).__name__, exc)
        raise RejectedFile(name, _CORRUPT_DOCX) from None
    if not blocks:
        raise RejectedFile(name, "empty Word document (no text), not ingested")
    return [make_document("\n\n".join(blocks), file_name=name, file_type="docx", headings=headings)]
