"""Large texts in bounded pieces: plain-text and Markdown files streamed from disk, long
Documents cut into sections, so that chunking never sees (nor holds) a whole 50 MB text.

Issue 11, finding 9: a 50 MB text file given whole to the sentence splitter peaked at 6.3 GB
and ran the sentence tokenizer over one giant string (whose regular expressions now give up
after 5 s). Here a text file is read twice, in 256 KB blocks: ``inspect_text`` checks it (not
binary, not empty), chooses its encoding and counts its characters; ``iter_sections`` then
decodes it again and yields Documents of at most ``SECTION_CHARS`` characters, cut at a
blank line, else a line end, else a space. Only one section (plus one block) is in memory
at a time.

Invariant: the concatenation of the sections' texts is the decoded file, character for
character (``"".join(d.text for d in iter_sections(src)) == whole decoded text``).
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from themes.readers import RejectedFile, make_document, markdown_headings, textual_refusal

if TYPE_CHECKING:
    from llama_index.core import Document

# About 100 chunks of the default size: progress every few seconds, a bounded splitter input.
SECTION_CHARS = 100_000
# Bytes read at a time: a few sections' worth, so that the bytes, their decoded text and
# the carry-over held together stay near a megabyte.
_BLOCK = 1 << 18
STREAMED_FILE_TYPES = {".txt": "text", ".md": "markdown", ".markdown": "markdown"}


@dataclass(frozen=True)
class TextSource:
    """A checked text file: how to decode it, how long it is, and what the admin should know."""

    path: Path
    name: str
    file_type: str
    encoding: str
    chars: int
    warning: str | None = None


def _open_regular(path: Path, name: str) -> Any:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        raise RejectedFile(name, "file not readable (or a link), not ingested") from None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        handle.close()
        raise RejectedFile(name, "not a regular file, not ingested")
    return handle


def _decoded_length(path: Path, name: str, encoding: str) -> tuple[int, bool]:
    """(characters, any non-blank character) of the whole file; UnicodeDecodeError if invalid."""
    errors = "replace" if encoding == "utf-16" else "strict"
    decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
    chars, visible = 0, False
    offset = 0
    with _open_regular(path, name) as handle:
        while True:
            block = handle.read(_BLOCK)
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                exc.start += offset
                raise
            offset += len(block)
            chars += len(text)
            visible = visible or bool(text.strip())
            if not block:
                return chars, visible


def inspect_text(path: Path, name: str, *, max_bytes: int) -> TextSource:
    """Check a .txt/.md file without loading it; raise ``RejectedFile`` with a reason."""
    file_type = STREAMED_FILE_TYPES[Path(name).suffix.lower()]
    with _open_regular(path, name) as handle:
        size = os.fstat(handle.fileno()).st_size
        head = handle.read(8192)
    if size > max_bytes:
        raise RejectedFile(
            name,
            f"file too large ({size / 2**20:.1f} MB, limit {max_bytes / 2**20:.1f} MB), "
            "not ingested (split it into smaller files)",
        )
    if not head:
        raise RejectedFile(name, "empty file, not ingested")
    refusal = textual_refusal(head, "text" if file_type == "text" else "Markdown")
    if refusal:
        raise RejectedFile(name, refusal)
    warning = None
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
        chars, visible = _decoded_length(path, name, encoding)
    else:
        encoding = "utf-8-sig"
        try:
            chars, visible = _decoded_length(path, name, encoding)
        except UnicodeDecodeError as exc:
            # cp1252 is what Windows editors write for Western European text; latin-1 decodes
            # any byte, so it cannot fail.
            for encoding in ("cp1252", "latin-1"):
                try:
                    chars, visible = _decoded_length(path, name, encoding)
                    break
                except UnicodeDecodeError:
                    continue
            warning = (
                f"not valid UTF-8 (near byte {exc.start}), read as {encoding}: check its accented "
                "characters, or save it as UTF-8 and ingest it again"
            )
    if not visible:
        raise RejectedFile(name, "empty document (only blank space), not ingested")
    return TextSource(Path(path), name, file_type, encoding, chars, warning)


def cut_point(text: str, limit: int, start: int = 0) -> int:
    """Where to end the section of ``text`` that begins at ``start`` (at most ``limit`` long).

    After the last blank line in the second half of the window, else the last line end, else
    the last space, else at ``start + limit`` (a text without any space).
    """
    floor, end = start + limit // 2, start + limit
    for separator in ("\n\n", "\n", " "):
        at = text.rfind(separator, floor, end)
        if at != -1:
            return at + len(separator)
    return end


def _pieces(blocks: Iterator[str], limit: int) -> Iterator[str]:
    buffer = ""
    for block in blocks:
        buffer = buffer + block if buffer else block
        start = 0
        while len(buffer) - start > limit:
            cut = cut_point(buffer, limit, start)
            yield buffer[start:cut]
            start = cut
        buffer = buffer[start:]
    if buffer:
        yield buffer


def _decoded_blocks(source: TextSource) -> Iterator[str]:
    errors = "replace" if source.encoding == "utf-16" else "strict"
    decoder = codecs.getincrementaldecoder(source.encoding)(errors=errors)
    with _open_regular(source.path, source.name) as handle:
        while block := handle.read(_BLOCK):
            yield decoder.decode(block)
        yield decoder.decode(b"", final=True)


def iter_sections(source: TextSource, limit: int = SECTION_CHARS) -> Iterator[Document]:
    """The file's text as Documents of at most ``limit`` characters, read as it goes."""
    extra: dict[str, Any] = {"encoding_note": source.warning} if source.warning else {}
    for text in _pieces(_decoded_blocks(source), limit):
        headings = markdown_headings(text) if source.file_type == "markdown" else []
        yield make_document(
            text, file_name=source.name, file_type=source.file_type, headings=headings, **extra
        )


def split_document(doc: Document, limit: int = SECTION_CHARS) -> Iterator[Document]:
    """``doc`` itself when short enough, else copies of it holding consecutive sections."""
    if len(doc.text) <= limit:
        yield doc
        return
    for text in _pieces(iter([doc.text]), limit):
        part = doc.model_copy(deep=True)
        part.set_content(text)
        yield part
