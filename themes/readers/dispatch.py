"""Reading one file: the checks every file passes, then the reader of its extension."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from themes.readers.docx_reader import read_docx
from themes.readers.errors import RejectedFile
from themes.readers.html_reader import read_html
from themes.readers.pdf_reader import read_pdf
from themes.readers.text_reader import read_text

if TYPE_CHECKING:
    from llama_index.core import Document

SUPPORTED_EXTENSIONS: tuple[str, ...] = (
    ".pdf",
    ".docx",
    ".html",
    ".htm",
    ".md",
    ".markdown",
    ".txt",
)

_FILE_TYPES = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
}

_MB = 2**20


def read_document(
    path: Path,
    *,
    max_bytes: int = 50 * 2**20,
    pdf_timeout_s: float = 30.0,
) -> list[Document]:
    """Read one file into Documents: one per PDF page with text, one for any other format.

    Every Document has the metadata "file_name", "page" (1-based, None when not paged),
    "file_type" ("pdf", "docx", "html", "markdown", "text") and "headings" (best effort);
    HTML adds "title", and text decoded from a legacy encoding adds "encoding_note".

    Raises RejectedFile, with a reason the admin can act on, for symbolic links, anything but a
    regular file, files over ``max_bytes``, unsupported extensions, content that does not match
    the extension, encrypted/corrupt/image-only PDFs, ZIP bombs, corrupt DOCX and empty files.
    """
    path = Path(path)
    name = path.name
    # Checked before anything else touches the path: a link could point at /etc/shadow or at
    # another theme's documents.
    if path.is_symlink():
        raise RejectedFile(name, "symbolic link, not ingested (upload the file itself)")
    try:
        info = path.lstat()
    except OSError:
        raise RejectedFile(name, "file not found or not readable, not ingested") from None
    if not stat.S_ISREG(info.st_mode):
        raise RejectedFile(name, "not a regular file (a folder or device?), not ingested")
    suffix = path.suffix.lower()
    if suffix not in _FILE_TYPES:
        raise RejectedFile(
            name,
            f"unsupported file type '{suffix or '(no extension)'}', not ingested "
            f"(supported: {', '.join(SUPPORTED_EXTENSIONS)})",
        )
    data = _read_bytes(path, name, max_bytes)
    file_type = _FILE_TYPES[suffix]
    if file_type == "pdf":
        return read_pdf(name, data, pdf_timeout_s)
    if file_type == "docx":
        return read_docx(name, data)
    if file_type == "html":
        return read_html(name, data)
    return read_text(name, data, file_type)


def _read_bytes(path: Path, name: str, max_bytes: int) -> bytes:
    """Read at most max_bytes, refusing a file that became a link or a FIFO since the checks."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        # ELOOP when the path was swapped for a symbolic link after the checks above.
        raise RejectedFile(name, "file not readable (or a link), not ingested") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise RejectedFile(name, "not a regular file, not ingested")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise RejectedFile(
            name,
            f"file too large ({max(info.st_size, len(data)) / _MB:.1f} MB, limit "
            f"{max_bytes / _MB:.1f} MB), not ingested (split it into smaller files)",
        )
    if not data:
        raise RejectedFile(name, "empty file, not ingested")
    return data
