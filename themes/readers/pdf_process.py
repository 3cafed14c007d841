"""The PDF child process: a fresh interpreter that parses one PDF and is killed on timeout.

A malformed PDF can send pypdf into a very long loop, and a thread cannot be killed in Python.
The child imports this package, so every module of ``themes.readers`` keeps its top-level
imports to the standard library; heavy libraries are imported inside the functions that use them.
"""

from __future__ import annotations

import logging
import os
import subprocess
from typing import Any

from themes.readers import pdf_extraction
from themes.readers.errors import RejectedFile
from themes.readers.pdf_extraction import PdfRefusal

logger = logging.getLogger(__name__)

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
    except PdfRefusal as exc:
        result = {"status": "refused", "reason": exc.reason}
    except Exception as exc:  # noqa: BLE001 - any parser failure on untrusted input = corrupt
        result = {"status": "corrupt", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    json.dump(result, answer)
    answer.close()


def run_pdf_extraction(name: str, data: bytes, timeout_s: float) -> list[tuple[str, list[str]]]:
    """Run the PDF extractor in a child process, killed if it takes longer than timeout_s.

    A process, because a thread stuck in a parser loop cannot be stopped in Python. A plain
    subprocess rather than multiprocessing: multiprocessing's "spawn" and "forkserver" re-run
    the application's main module in the child (under Streamlit, the page script itself) and
    fail when there is none; "fork" can deadlock a parent that holds threads.
    """
    import json
    import sys

    # Looked up at call time, so a test can replace the module attribute with a function of
    # its own; the child imports it by name.
    extractor = pdf_extraction.extract_pdf_pages
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
    return _pages_of(name, completed)


def _pages_of(
    name: str, completed: subprocess.CompletedProcess[bytes]
) -> list[tuple[str, list[str]]]:
    """The pages the child answered, or the refusal its answer (or its crash) stands for."""
    import json

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
