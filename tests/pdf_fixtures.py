"""Small PDF builders for the reader tests.

pypdf can copy, encrypt and annotate PDFs but cannot lay out text, so text PDFs are written by
hand: one Helvetica font object shared by every page, one content stream per page drawing its
lines with ``Tj``. The byte offsets of the cross-reference table are computed, so the result is a
well-formed PDF that any reader (and pypdf's text extraction) accepts.

``hanging_extract`` lives here rather than in the test module because the PDF parser runs in a
*spawned* child process, which imports the function by name: this module imports nothing heavy,
so the child starts quickly.
"""

from __future__ import annotations

import io
import time

from pypdf import PdfReader, PdfWriter


def _pdf_string(text: str) -> bytes:
    """A PDF literal string: backslash and parentheses escaped, Latin-1 (WinAnsi-compatible)."""
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("latin-1") + b")"


def _text_stream(lines: list[str]) -> bytes:
    parts = [b"BT /F1 12 Tf 72 712 Td 14 TL"]
    for line in lines:
        parts.append(_pdf_string(line) + b" Tj T*")
    parts.append(b"ET")
    return b"\n".join(parts)


_IMAGE_STREAM = b"q 200 0 0 200 72 500 cm /Im1 Do Q"


def _assemble(objects: list[bytes]) -> bytes:
    """Serialise numbered objects (1-based, in order) with a correct xref table and trailer."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref_at = out.tell()
    out.write(b"xref\n0 %d\n" % (len(objects) + 1))
    out.write(b"0000000000 65535 f \n")
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1))
    out.write(b"startxref\n%d\n%%%%EOF\n" % xref_at)
    return out.getvalue()


def _stream_object(content: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(content), extra) + content + b"\nendstream"


def make_pdf(pages: list[list[str] | None]) -> bytes:
    """A PDF with one page per item: a list of text lines, or None for an image-only page."""
    # Object layout: 1 catalog, 2 page tree, 3 font, 4 image, then (page, content) per page.
    first_page = 5
    kids = b" ".join(b"%d 0 R" % (first_page + 2 * i) for i in range(len(pages)))
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages)),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        _stream_object(
            b"\x80",
            b"/Type /XObject /Subtype /Image /Width 1 /Height 1 "
            b"/ColorSpace /DeviceGray /BitsPerComponent 8 ",
        ),
    ]
    for index, lines in enumerate(pages):
        content_ref = first_page + 2 * index + 1
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> /XObject << /Im1 4 0 R >> >> "
            b"/Contents %d 0 R >>" % content_ref
        )
        objects.append(_stream_object(_IMAGE_STREAM if lines is None else _text_stream(lines)))
    return _assemble(objects)


def make_text_pdf(
    pages: list[str | None], *, outline: list[tuple[str, int]] | None = None
) -> bytes:
    """A PDF with one line of text per page (None: image only); ``outline`` adds bookmarks as
    (title, 0-based page)."""
    data = make_pdf([None if text is None else [text] for text in pages])
    if not outline:
        return data
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    for title, page_index in outline:
        writer.add_outline_item(title=title, page_number=page_index)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_encrypted_pdf(
    pages: list[str | None], *, user_password: str, owner_password: str
) -> bytes:
    """An RC4-encrypted copy (RC4 needs no optional crypto library, unlike AES)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_text_pdf(pages))))
    writer.encrypt(user_password=user_password, owner_password=owner_password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def hanging_extract(data: bytes) -> list[tuple[str, list[str]]]:
    """Stands in for the PDF page extractor when a test needs a parser that never finishes."""
    time.sleep(60)
    return []


def crashing_extract(data: bytes) -> list[tuple[str, list[str]]]:
    """Stands in for a parser that brings its whole process down (a segfault, the OOM killer)."""
    import os

    os._exit(3)
