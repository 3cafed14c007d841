"""Document readers of the ingestion pipeline: files and URLs in, llama-index Documents out.

Everything here is a pure function of its input (no index, no embeddings) and treats the input
as hostile: an admin uploads whatever a colleague e-mailed them, and a URL may point anywhere.
What cannot be read safely is refused with :class:`RejectedFile` / :class:`RejectedURL`, whose
message names the file and says what the admin can do about it; the caller ingests the other
files and reports, e.g. "report.pdf: encrypted PDF, not ingested (...); other files were".

Design notes:

* PDF parsing runs in a child process (a fresh ``python -I``) that is killed after
  ``pdf_timeout_s``: a malformed PDF can send pypdf into a very long loop, and a thread cannot be
  killed in Python. The child imports this module, so the top-level imports below are standard
  library only; heavy libraries (llama-index takes seconds to import) are imported inside the
  functions that need them.
* A DOCX is a ZIP archive: its declared sizes are checked before anything is decompressed.
  Python's zipfile never inflates an entry beyond its declared size (it stops and fails the CRC
  check), so checking the declared sizes is enough to bound memory.
* URLs are fetched with redirects followed by hand, so that every hop is resolved, checked
  against the address policy (no private, loopback, link-local... networks, no cloud metadata
  service) and then *pinned*: the connection goes to the checked IP address, with the original
  host name in the Host header and in TLS SNI/certificate checks. A DNS answer that changes
  between the check and the connection (DNS rebinding) therefore cannot redirect the request.
"""

from __future__ import annotations

import codecs
import dataclasses
import io
import ipaddress
import logging
import os
import re
import socket
import stat
import time
import unicodedata
import zipfile
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    import httpx
    from llama_index.core import Document

logger = logging.getLogger(__name__)

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

# ZIP-bomb limits for DOCX files (module constants so that a deployment, or a test, can tune
# them). A real .docx expands 5-20 times; images barely compress at all.
MAX_DOCX_UNCOMPRESSED = 200 * 2**20
MAX_DOCX_RATIO = 100
MAX_DOCX_ENTRIES = 2_000
# Entries smaller than this are not ratio-checked on their own: tiny XML parts of a normal
# document routinely compress 50:1 and cannot hurt anyway.
_RATIO_CHECK_MIN_ENTRY = 2**20

MAX_NAME_CHARS = 120
# File systems limit names to 255 *bytes*; 120 characters of CJK or emoji can exceed that.
_MAX_NAME_BYTES = 240
_MAX_EXTENSION_CHARS = 16

# Metadata the embedding sees: what the text is about, not where it sits on disk.
_EMBED_METADATA_KEYS = frozenset({"file_name", "title"})
# Metadata the LLM sees, so that it can cite its sources.
_LLM_METADATA_KEYS = frozenset({"file_name", "title", "page"})
# Never embedded nor shown, even if a later pipeline stage adds them.
_ALWAYS_EXCLUDED_KEYS = ("file_path", "source_url")

_MB = 2**20


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class RejectedFile(Exception):
    """A file that is not ingested; ``str(exc)`` is "<file name>: <reason>", for the admin."""

    def __init__(self, file_name: str, reason: str) -> None:
        super().__init__(f"{file_name}: {reason}")
        self.file_name = file_name
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        # The default pickling would call RejectedFile(message) and fail on the missing reason.
        return (type(self), (self.file_name, self.reason))


class RejectedURL(Exception):
    """A URL that is not fetched; ``str(exc)`` is "<url>: <reason>", credentials removed."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = _display_url(url)
        self.reason = reason
        super().__init__(f"{self.url}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.url, self.reason))


def _display_url(url: str) -> str:
    """The URL as shown in messages and logs: no ``user:password@``, at most 200 characters."""
    shown = re.sub(r"//[^/?#@]*@", "//", url, count=1)
    return shown if len(shown) <= 200 else shown[:199] + "…"


def _printable(name: str) -> str:
    """A version of an untrusted name that is safe to show (no control characters)."""
    shown = "".join(ch if ch.isprintable() else "?" for ch in name)
    return (shown[:MAX_NAME_CHARS] + "…") if len(shown) > MAX_NAME_CHARS else shown or "(no name)"


# --------------------------------------------------------------------------------------------
# File names
# --------------------------------------------------------------------------------------------

_WINDOWS_RESERVED_NAMES = frozenset(
    {"con", "prn", "aux", "nul"}
    | {f"com{i}" for i in range(1, 10)}
    | {f"lpt{i}" for i in range(1, 10)}
)
# Characters Windows refuses in names (":" would also open an NTFS alternate data stream).
_WINDOWS_FORBIDDEN = re.compile(r'[<>:"|?*]')


def safe_file_name(name: str) -> str:
    """Turn an uploaded or URL-derived name into a plain, safe base name.

    Directories are dropped (with "/" and "\\" both treated as separators), so "../../x.pdf"
    becomes "x.pdf"; control and invisible formatting characters (NUL, newlines, right-to-left
    overrides that disguise "exe.pdf") are removed; the name is NFC-normalised, leading dots are
    removed (no hidden files), characters Windows refuses are replaced by "_", and the name is
    cut to 120 characters keeping its extension. Raises RejectedFile when nothing usable is left
    (empty, ".", "..", only dots).
    """
    text = unicodedata.normalize("NFC", name)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    base = text.replace("\\", "/").rsplit("/", 1)[-1]
    # Leading dots would hide the file; trailing dots and spaces are dropped by Windows.
    base = base.strip().lstrip(".").rstrip(". ")
    base = _WINDOWS_FORBIDDEN.sub("_", base)
    if not base:
        raise RejectedFile(
            _printable(name),
            "unusable file name (empty or only dots), not ingested (rename the file)",
        )
    stem, extension = os.path.splitext(base)
    if len(extension) > _MAX_EXTENSION_CHARS or not stem:
        stem, extension = base, ""
    if stem.lower() in _WINDOWS_RESERVED_NAMES:
        stem = "_" + stem
    stem = stem[: MAX_NAME_CHARS - len(extension)]
    while len((stem + extension).encode("utf-8")) > _MAX_NAME_BYTES:
        stem = stem[:-1]
    stem = stem.rstrip(". ") or "_"
    return stem + extension


# --------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------


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
        return _read_pdf(name, data, pdf_timeout_s)
    if file_type == "docx":
        return _read_docx(name, data)
    if file_type == "html":
        return _read_html(name, data)
    return _read_text(name, data, file_type)


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


# --------------------------------------------------------------------------------------------
# PDF
# --------------------------------------------------------------------------------------------


class _PdfRefusal(Exception):
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


def _extract_pdf_pages(data: bytes) -> list[tuple[str, list[str]]]:
    """Text and bookmark headings of each page. Runs in the child process (see _pdf_child)."""
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
            raise _PdfRefusal(
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
        raise _PdfRefusal("corrupt PDF (no page could be read), not ingested")
    return pages


# The child is a fresh interpreter started with -I (isolated: no PYTHON* variables, no user
# site, no current directory on the path); it gets the parent's sys.path in the first line of
# its input so that it imports this very module.
_PDF_CHILD_CODE = (
    "import json, sys\n"
    "sys.path[:0] = json.loads(sys.stdin.buffer.readline())\n"
    f"from {__name__} import _pdf_child_main\n"
    "_pdf_child_main()\n"
)
# Address-space cap of the PDF child (POSIX): a decompression bomb hidden in a PDF stream
# fails with MemoryError there instead of exhausting the server's memory.
PDF_CHILD_MEMORY_LIMIT = 2 * 2**30


def _pdf_child_main() -> None:
    """Entry point of the PDF child process.

    Input: a JSON line {"extractor": "module:qualname"}, then the PDF bytes. Output, on the
    original stdout: JSON {"status": "ok", "pages": [[text, headings], ...]}, or
    {"status": "refused", "reason": ...}, or {"status": "corrupt", "detail": ...}. Results come
    back as JSON rather than pickle so that the parent never unpickles what a process busy with
    hostile input wrote.
    """
    import importlib
    import json
    import sys

    # Anything a library prints must not corrupt the JSON answer: keep the real stdout aside
    # and send file descriptor 1 to stderr.
    answer = os.fdopen(os.dup(1), "w", encoding="ascii")
    os.dup2(2, 1)
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (PDF_CHILD_MEMORY_LIMIT, PDF_CHILD_MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):
        pass  # not POSIX, or not permitted here: the time limit still applies
    header = json.loads(sys.stdin.buffer.readline())
    data = sys.stdin.buffer.read()
    module_name, _, qualname = header["extractor"].partition(":")
    extract: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        extract = getattr(extract, part)
    try:
        result: dict[str, Any] = {"status": "ok", "pages": extract(data)}
    except _PdfRefusal as exc:
        result = {"status": "refused", "reason": exc.reason}
    except Exception as exc:  # noqa: BLE001 - any parser failure on untrusted input = corrupt
        result = {"status": "corrupt", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    json.dump(result, answer)
    answer.close()


def _run_pdf_extraction(name: str, data: bytes, timeout_s: float) -> list[tuple[str, list[str]]]:
    """Run the PDF extractor in a child process, killed if it takes longer than timeout_s.

    A process, because a thread stuck in a parser loop cannot be stopped in Python. A plain
    subprocess rather than multiprocessing: multiprocessing's "spawn" and "forkserver" re-run
    the application's main module in the child (under Streamlit, the page script itself) and
    fail when there is none; "fork" can deadlock a parent that holds threads.
    """
    import json
    import subprocess
    import sys

    # Looked up at call time, so a test can replace the module attribute with a function of
    # its own; the child imports it by name.
    extractor = _extract_pdf_pages
    header = {"extractor": f"{extractor.__module__}:{extractor.__qualname__}"}
    paths = [entry for entry in sys.path if isinstance(entry, str)]
    payload = json.dumps(paths).encode() + b"\n" + json.dumps(header).encode() + b"\n" + data
    try:
        # On timeout, subprocess.run kills the child and waits for it before raising.
        completed = subprocess.run(
            [sys.executable, "-I", "-c", _PDF_CHILD_CODE],
            input=payload,
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RejectedFile(
            name,
            f"PDF parsing took longer than {timeout_s:g} s, not ingested (the file may be "
            "malformed: open it and save or print it again as PDF)",
        ) from None
    try:
        result = json.loads(completed.stdout)
        status = result["status"]
    except (ValueError, KeyError, TypeError):
        logger.warning(
            "PDF reader for %s exited with %s: %s",
            name,
            completed.returncode,
            completed.stderr[-2000:].decode(errors="replace"),
        )
        raise RejectedFile(
            name, "PDF parser crashed, not ingested (the file may be corrupt)"
        ) from None
    if status == "refused":
        raise RejectedFile(name, str(result["reason"]))
    if status != "ok":
        logger.info("PDF %s could not be parsed: %s", name, result.get("detail"))
        raise RejectedFile(name, "corrupt PDF, not ingested (open it and save it again as PDF)")
    return [(str(text), [str(h) for h in headings]) for text, headings in result["pages"]]


def _read_pdf(name: str, data: bytes, timeout_s: float) -> list[Document]:
    # Viewers accept junk before the header, within the first kilobyte; so do we.
    if b"%PDF-" not in data[:1024]:
        raise RejectedFile(
            name, "content is not a PDF (no %PDF header) although the name ends in .pdf"
        )
    pages = _run_pdf_extraction(name, data, timeout_s)
    if not pages:
        raise RejectedFile(name, "PDF without pages, not ingested")
    documents = [
        make_document(text.strip(), file_name=name, file_type="pdf", page=number, headings=headings)
        for number, (text, headings) in enumerate(pages, start=1)
        if text.strip()
    ]
    if not documents:
        raise RejectedFile(
            name,
            "PDF without extractable text (scanned images?), not ingested: OCR is not "
            "supported (export a PDF with text, or upload the text itself)",
        )
    return documents


# --------------------------------------------------------------------------------------------
# DOCX
# --------------------------------------------------------------------------------------------

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


def _read_docx(name: str, data: bytes) -> list[Document]:
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


# --------------------------------------------------------------------------------------------
# HTML, Markdown and plain text
# --------------------------------------------------------------------------------------------


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


def _check_textual(name: str, data: bytes, kind: str) -> None:
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


def _read_text(name: str, data: bytes, file_type: str) -> list[Document]:
    _check_textual(name, data, "text" if file_type == "text" else "Markdown")
    text, note = _decode_text(name, data)
    if not text.strip():
        raise RejectedFile(name, "empty document (only blank space), not ingested")
    extra: dict[str, Any] = {"encoding_note": note} if note else {}
    headings = markdown_headings(text) if file_type == "markdown" else []
    return [make_document(text, file_name=name, file_type=file_type, headings=headings, **extra)]


# Elements whose text a reader never sees, or that repeat on every page of a site.
_HTML_DROPPED = (
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "footer",
    "svg",
    "iframe",
    "head",
)
_HTML_BLOCKS = (
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "section", "article", "main",
    "header", "aside", "blockquote", "pre", "figure", "figcaption", "form", "address", "hr",
    "h4", "h5", "h6",
)  # fmt: skip


def _read_html(name: str, data: bytes) -> list[Document]:
    _check_textual(name, data, "HTML")
    from bs4 import BeautifulSoup, Comment, Declaration, Doctype, NavigableString
    from bs4.element import ProcessingInstruction

    # Given bytes, BeautifulSoup honours a BOM or <meta charset> and guesses otherwise.
    soup = BeautifulSoup(data, "lxml")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(_HTML_DROPPED):
        tag.decompose()
    for tag in soup.select('[hidden], [aria-hidden="true"]'):
        tag.decompose()
    hidden_strings = (Comment, Declaration, Doctype, ProcessingInstruction)
    for string in soup.find_all(string=lambda s: isinstance(s, hidden_strings)):
        string.extract()
    # Source line breaks are layout, not content: collapse them (except in <pre>) before the
    # structural line breaks are added below.
    for string in soup.find_all(string=True):
        if type(string) is NavigableString and not string.find_parent("pre"):
            string.replace_with(re.sub(r"\s+", " ", string))
    headings: list[str] = []
    for heading in soup.find_all(("h1", "h2", "h3")):
        text = heading.get_text(" ", strip=True)
        if text:
            headings.append(text)
            level = int(heading.name[1])
            heading.replace_with(f"\n\n{'#' * level} {' '.join(text.split())}\n\n")
        else:
            heading.decompose()
    for tag in soup.find_all("br"):
        tag.replace_with("\n")
    for tag in soup.find_all(("td", "th")):
        tag.insert_after(" | ")
    for tag in soup.find_all(_HTML_BLOCKS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    lines = [" ".join(line.split()).removesuffix(" |") for line in soup.get_text().splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if not text:
        raise RejectedFile(name, "HTML page without visible text, not ingested")
    return [
        make_document(
            text, file_name=name, file_type="html", headings=headings, title=title or None
        )
    ]


# --------------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------------

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DOCX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
# Accepted media types, with the extension a fetched document of that type is saved under and
# the extensions an advertised name may already carry (GitHub serves .md files as text/plain).
_ACCEPTED_CONTENT_TYPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "text/html": (".html", (".html", ".htm")),
    "text/plain": (".txt", (".txt", ".md", ".markdown")),
    "text/markdown": (".md", (".md", ".markdown")),
    "text/x-markdown": (".md", (".md", ".markdown")),
    "application/pdf": (".pdf", (".pdf",)),
    DOCX_CONTENT_TYPE: (".docx", (".docx",)),
}

# Cloud metadata services hand out credentials to whoever asks from inside the VM. Refused
# whatever address policy the caller passes.
_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
_METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata", "instance-data", "instance-data.ec2.internal"}
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address hidden in an IPv4-mapped, 6to4 or NAT64 IPv6 address, if any."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def is_public_address(address: IPAddress) -> bool:
    """The default address policy: only globally routable unicast addresses.

    Refuses private, loopback, link-local, multicast, reserved, unspecified and shared (CGNAT)
    ranges, including when written as IPv4-mapped, 6to4 or NAT64 IPv6 addresses.
    """
    for candidate in {address, _embedded_ipv4(address)}:
        if (
            not candidate.is_global
            or candidate.is_private
            or candidate.is_loopback
            or candidate.is_link_local
            or candidate.is_multicast
            or candidate.is_reserved
            or candidate.is_unspecified
            or candidate in _METADATA_ADDRESSES
        ):
            return False
    return True


def _default_resolver(host: str) -> list[str]:
    """All addresses the system resolver returns for host (both IPv4 and IPv6)."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    # Drop IPv6 zone identifiers ("fe80::1%eth0"): the policy refuses link-local anyway.
    return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))


@dataclasses.dataclass(frozen=True)
class FetchedDocument:
    """A downloaded document, not yet on disk (see save_fetched)."""

    final_url: str  # after redirects
    content_type: str  # media type only, lower case, e.g. "application/pdf"
    body: bytes
    suggested_name: str  # already safe (safe_file_name), with an extension matching the type


def _check_url(url: httpx.URL, original: str, allowed_ports: Collection[int]) -> None:
    if url.scheme not in ("http", "https"):
        raise RejectedURL(original, f"only http and https URLs are fetched, not '{url.scheme}:'")
    if url.userinfo:
        raise RejectedURL(original, "URLs with a user name or password are refused")
    host = url.raw_host.decode("ascii", errors="replace").lower().rstrip(".")
    if not host:
        raise RejectedURL(original, "URL without a host name")
    if host in _METADATA_HOSTS:
        raise RejectedURL(original, "cloud metadata service, refused")
    port = url.port or (443 if url.scheme == "https" else 80)
    if port not in allowed_ports:
        raise RejectedURL(original, f"port {port} is not allowed (only standard web ports)")


def _pinned_address(
    url: httpx.URL,
    original: str,
    resolver: Callable[[str], list[str]],
    is_allowed_address: Callable[[IPAddress], bool],
) -> IPAddress:
    """Resolve the URL's host and return the address to connect to, if every answer is allowed.

    Every answer must pass, not just the first: with several A records, the client library (or
    a retry) could otherwise pick an internal one.
    """
    host = url.raw_host.decode("ascii", errors="replace")
    try:
        answers = [host] if _is_ip_literal(host) else resolver(host)
        addresses = [ipaddress.ip_address(answer) for answer in answers]
    except (OSError, ValueError, UnicodeError):
        raise RejectedURL(original, f"host name '{host}' could not be resolved") from None
    if not addresses:
        raise RejectedURL(original, f"host name '{host}' could not be resolved")
    for address in addresses:
        if address in _METADATA_ADDRESSES or _embedded_ipv4(address) in _METADATA_ADDRESSES:
            raise RejectedURL(original, "cloud metadata service, refused")
        if not is_allowed_address(address):
            raise RejectedURL(
                original,
                f"'{host}' is a private or internal network address ({address}), refused",
            )
    # IPv4 first: a server without an IPv6 route would otherwise fail on dual-stack hosts.
    return min(addresses, key=lambda address: address.version)


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def _disposition_file_name(header: str | None) -> str | None:
    """The file name of a Content-Disposition header, best effort (RFC 6266 / 5987)."""
    if not header:
        return None
    extended = re.search(r"filename\*\s*=\s*([\w-]*)'[^']*'([^;]+)", header, re.IGNORECASE)
    if extended:
        charset = extended.group(1) or "utf-8"
        try:
            return unquote(extended.group(2).strip(), encoding=charset, errors="replace")
        except LookupError:
            return unquote(extended.group(2).strip())
    plain = re.search(r'filename\s*=\s*(?:"([^"]*)"|([^;]+))', header, re.IGNORECASE)
    if plain:
        return (plain.group(1) or plain.group(2) or "").strip() or None
    return None


def _suggest_name(url: httpx.URL, content_type: str, disposition: str | None) -> str:
    extension, known = _ACCEPTED_CONTENT_TYPES[content_type]
    host = url.raw_host.decode("ascii", errors="replace")
    last_segment = url.path.rstrip("/").rsplit("/", 1)[-1]  # httpx already decoded the path
    candidate = _disposition_file_name(disposition) or last_segment or host
    if os.path.splitext(candidate)[1].lower() not in known:
        candidate += extension
    try:
        return safe_file_name(candidate)
    except RejectedFile:
        return safe_file_name(host + extension)


def _read_body(response: httpx.Response, original: str, max_bytes: int, deadline: float) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise RejectedURL(original, _too_large(max_bytes))
    chunks: list[bytes] = []
    size = 0
    # The Content-Length may be absent or lie; count what actually arrives (after decoding).
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise RejectedURL(original, _too_large(max_bytes))
        if time.monotonic() > deadline:
            raise _timed_out(original)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(max_bytes: int) -> str:
    return f"document larger than {max_bytes / _MB:.1f} MB, not fetched"


def _timed_out(original: str) -> RejectedURL:
    return RejectedURL(original, "the server took too long to answer, not fetched")


def fetch_url(
    url: str,
    *,
    max_bytes: int = 10 * 2**20,
    timeout_s: float = 20.0,
    max_redirects: int = 5,
    resolver: Callable[[str], list[str]] | None = None,
    allowed_ports: Collection[int] = (80, 443),
    is_allowed_address: Callable[[IPAddress], bool] = is_public_address,
) -> FetchedDocument:
    """Download one document from the web, refusing anything that could reach internal systems.

    ``resolver`` maps a host name to its IP addresses (default: the system resolver);
    ``is_allowed_address`` is the address policy applied to every answer of every hop (default:
    public addresses only; cloud metadata addresses are refused whatever the policy). Raises
    RejectedURL for non-http(s) schemes, credentials in the URL, ports outside
    ``allowed_ports``, refused addresses, HTTP errors, too many redirects, bodies over
    ``max_bytes``, a total time over ``timeout_s`` and content types other than HTML, plain
    text, Markdown, PDF and DOCX.

    Time limit: the deadline is checked between network reads, and each read waits at most the
    time left when the hop started; DNS resolution is not covered (the system resolver has no
    timeout parameter) and is bounded by the resolver's own configuration.
    """
    import httpx

    resolve = resolver or _default_resolver
    deadline = time.monotonic() + timeout_s
    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise RejectedURL(url, "malformed URL") from None
    headers = {
        "User-Agent": "Chatitego document fetcher",
        "Accept": ", ".join(_ACCEPTED_CONTENT_TYPES),
        # Asking for an uncompressed body keeps a gzip bomb from expanding in one read.
        "Accept-Encoding": "identity",
    }
    try:
        with httpx.Client(trust_env=False, follow_redirects=False, headers=headers) as client:
            for hop in range(max_redirects + 1):
                try:
                    _check_url(current, url, allowed_ports)
                    address = _pinned_address(current, url, resolve, is_allowed_address)
                except RejectedURL as exc:
                    if hop == 0:
                        raise
                    shown = _display_url(str(current))
                    raise RejectedURL(url, f"redirect to {shown} refused: {exc.reason}") from None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _timed_out(url)
                host = current.raw_host.decode("ascii")
                # httpx reports default ports as None, so a port here is an explicit one.
                host_header = f"[{host}]" if ":" in host else host
                if current.port is not None:
                    host_header += f":{current.port}"
                # Connect to the checked address; the host name still drives the Host header,
                # TLS SNI and certificate verification ("sni_hostname" is an httpcore request
                # extension).
                request = client.build_request(
                    "GET",
                    current.copy_with(host=str(address), fragment=None),
                    headers={"Host": host_header},
                    extensions={"sni_hostname": host},
                    timeout=httpx.Timeout(remaining),
                )
                response = client.send(request, stream=True)
                try:
                    if response.is_redirect:
                        location = response.headers["location"]
                        try:
                            current = current.join(location).copy_with(fragment=None)
                        except (httpx.InvalidURL, ValueError):
                            raise RejectedURL(url, "malformed redirect location") from None
                        continue
                    if not response.is_success:
                        raise RejectedURL(
                            url, f"the server answered HTTP {response.status_code}, not fetched"
                        )
                    content_type = _media_type(response.headers.get("content-type"))
                    if content_type not in _ACCEPTED_CONTENT_TYPES:
                        raise RejectedURL(
                            url,
                            f"unsupported content type '{content_type or 'none'}', not fetched "
                            "(web pages, text, Markdown, PDF and DOCX only)",
                        )
                    body = _read_body(response, url, max_bytes, deadline)
                    return FetchedDocument(
                        final_url=str(current),
                        content_type=content_type,
                        body=body,
                        suggested_name=_suggest_name(
                            current, content_type, response.headers.get("content-disposition")
                        ),
                    )
                finally:
                    response.close()
    except httpx.TimeoutException:
        raise _timed_out(url) from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise RejectedURL(url, f"could not be fetched ({type(exc).__name__})") from None
    raise RejectedURL(url, f"more than {max_redirects} redirects, not fetched")


def save_fetched(doc: FetchedDocument, folder: Path, *, overwrite: bool = False) -> Path:
    """Write a fetched document into folder under its safe suggested name; return the path.

    Without ``overwrite`` an existing file is never replaced: "name-2.ext", "name-3.ext"... is
    used instead. Files are created without following symbolic links.
    """
    folder = Path(folder)
    name = safe_file_name(doc.suggested_name)
    if overwrite:
        import tempfile

        target = folder / name
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(doc.body)
            os.chmod(temporary, 0o644)
            # os.replace swaps the directory entry: a link at the target is replaced, not
            # followed, and readers never see a half-written file.
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return target
    stem, extension = os.path.splitext(name)
    for number in range(1, 1000):
        target = folder / (name if number == 1 else f"{stem}-{number}{extension}")
        try:
            _write_new(target, doc.body)
        except FileExistsError:
            continue
        return target
    raise RejectedFile(name, "too many files with this name in the folder, not saved")


def _write_new(target: Path, body: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(target, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
