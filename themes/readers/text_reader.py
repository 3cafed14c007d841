"""Plain text and Markdown files: decoding, binary-content refusal and Markdown headings."""

from __future__ import annotations

import codecs
import logging
import re
from typing import TYPE_CHECKING, Any

from themes.readers.document import make_document
from themes.readers.errors import RejectedFile

if TYPE_CHECKING:
    from llama_index.core import Document

logger = logging.getLogger(__name__)


def textual_refusal(data: bytes, kind: str) -> str | None:
    """Why binary content behind a text extension is refused (a renamed PDF, a ZIP, an
    executable), judged on its first 8 KB; ``None`` when it looks like text."""
    if data[:1024].lstrip().startswith(b"%PDF-"):
        return f"content is a PDF, not {kind}: rename it to .pdf"
    if data.startswith(b"PK\x03\x04"):
        return f"content is a ZIP archive (a .docx?), not {kind}"
    head = data[:8192]
    utf16 = head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    if b"\x00" in head and not utf16:
        return f"binary content, not {kind}, not ingested"
    return None


def check_textual(name: str, data: bytes, kind: str) -> None:
    refusal = textual_refusal(data, kind)
    if refusal:
        raise RejectedFile(name, refusal)


def _decode_text(name: str, data: bytes) -> tuple[str, str | None]:
    """Text and, when it was not UTF-8, a note saying which legacy encoding was assumed."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace"), None
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        pass
    # cp1252 first: it is what Windows editors write for Western European text and a superset
    # of the printable latin-1 range; latin-1 decodes any byte, so it cannot fail.
    for encoding in ("cp1252", "latin-1"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        note = f"not valid UTF-8, decoded as {encoding} (check accented characters)"
        logger.warning("%s: %s", name, note)
        return text, note
    raise AssertionError("latin-1 decodes every byte")  # pragma: no cover


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_ATX_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")


def markdown_headings(text: str) -> list[str]:
    headings: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (match := _ATX_HEADING.match(line)):
            headings.append(match.group(1))
    return headings


def read_text(name: str, data: bytes, file_type: str) -> list[Document]:
    check_textual(name, data, "text" if file_type == "text" else "Markdown")
    text, note = _decode_text(name, data)
    if not text.strip():
        raise RejectedFile(name, "empty document (only blank space), not ingested")
    extra: dict[str, Any] = {"encoding_note": note} if note else {}
    headings = markdown_headings(text) if file_type == "markdown" else []
    return [make_document(text, file_name=name, file_type=file_type, headings=headings, **extra)]
