"""PDF files: one Document per page with text, parsed in a child process."""

from __future__ import annotations

from typing import TYPE_CHECKING

from themes.readers.document import make_document
from themes.readers.errors import RejectedFile
from themes.readers.pdf_process import run_pdf_extraction

if TYPE_CHECKING:
    from llama_index.core import Document


def read_pdf(name: str, data: bytes, timeout_s: float) -> list[Document]:
    # Viewers accept junk before the header, within the first kilobyte; so do we.
    if b"%PDF-" not in data[:1024]:
        raise RejectedFile(
            name, "content is not a PDF (no %PDF header) although the name ends in .pdf"
        )
    pages = run_pdf_extraction(name, data, timeout_s)
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
