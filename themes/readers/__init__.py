"""Document readers of the ingestion pipeline: files and URLs in, llama-index Documents out.

Everything here is a pure function of its input (no index, no embeddings) and treats the input
as hostile: an admin uploads whatever a colleague e-mailed them, and a URL may point anywhere.
What cannot be read safely is refused with :class:`RejectedFile` / :class:`RejectedURL`, whose
message names the file and says what the admin can do about it; the caller ingests the other
files and reports, e.g. "report.pdf: encrypted PDF, not ingested (...); other files were".

One module per concept: ``dispatch`` (checks every file passes, then the reader of its
extension), ``pdf_reader`` / ``pdf_process`` / ``pdf_extraction`` (PDF, parsed in a child
process killed on timeout), ``docx_reader`` (with ZIP-bomb limits), ``text_reader`` and
``html_reader``, ``url_fetcher`` with its ``ssrf_guard``, ``saved_documents``, ``file_names``.
The PDF child process imports this package, so every module keeps its top-level imports to
the standard library; heavy libraries (llama-index takes seconds to import) are imported
inside the functions that need them.
"""

from themes.readers.dispatch import SUPPORTED_EXTENSIONS, read_document
from themes.readers.document import make_document
from themes.readers.errors import RejectedFile, RejectedURL
from themes.readers.file_names import MAX_NAME_CHARS, safe_file_name
from themes.readers.saved_documents import save_fetched
from themes.readers.ssrf_guard import IPAddress, is_public_address
from themes.readers.text_reader import markdown_headings, textual_refusal
from themes.readers.url_fetcher import DOCX_CONTENT_TYPE, FetchedDocument, fetch_url

__all__ = [
    "DOCX_CONTENT_TYPE",
    "MAX_NAME_CHARS",
    "SUPPORTED_EXTENSIONS",
    "FetchedDocument",
    "IPAddress",
    "RejectedFile",
    "RejectedURL",
    "fetch_url",
    "is_public_address",
    "make_document",
    "markdown_headings",
    "read_document",
    "safe_file_name",
    "save_fetched",
    "textual_refusal",
]
