"""What runs inside the PDF child process: pypdf's page text and bookmark headings."""

from __future__ import annotations

import io
from typing import Any

from themes.errors import ThemesError


class PdfRefusal(ThemesError):
    """Raised in the PDF child process for a PDF that is readable but must be refused."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_MAX_OUTLINE_ITEMS = 10_000


def _outline_by_page(reader: Any) -> dict[int, list[str]]:
    """Bookmark titles per 0-based page: the only headings a PDF reliably declares."""
    found: dict[int, list[str]] = {}
    pending: list[Any] = [reader.outline]
    seen = 0
    # Iterative walk with a cap: outlines of hostile files can be huge or deeply nested.
    while pending and seen < _MAX_OUTLINE_ITEMS:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(reversed(item))
            continue
        seen += 1
        page = reader.get_destination_page_number(item)
        title = str(getattr(item, "title", "") or "").strip()
        if title and page is not None and page >= 0:
            found.setdefault(page, []).append(title)
    return found


def extract_pdf_pages(data: bytes) -> list[tuple[str, list[str]]]:
    """Text and bookmark headings of each page. Runs in the child process (see pdf_process)."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        # Many PDFs are encrypted with an empty user password (only editing is restricted):
        # every viewer opens them, so do we.
        try:
            opened = bool(reader.decrypt(""))
        except Exception:  # noqa: BLE001 - e.g. AES without the optional crypto library
            opened = False
        if not opened:
            raise PdfRefusal(
                "encrypted PDF, not ingested (remove the password and upload it again)"
            )
    try:
        headings = _outline_by_page(reader)
    except Exception:  # noqa: BLE001 - bookmarks are a bonus; a broken outline is not fatal
        headings = {}
    pages: list[tuple[str, list[str]]] = []
    failures = 0
    for index, page in enumerate(reader.pages):
        try:
            text = page.extract_text() or ""
        except Exception:  # noqa: BLE001 - one broken page should not cost the whole document
            failures += 1
            text = ""
        pages.append((text, headings.get(index, [])))
    if pages and failures == len(pages):
        raise PdfRefusal("corrupt PDF (no page could be read), not ingested")
    return pages
