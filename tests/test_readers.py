"""Document readers: the bad-file table, the good files, safe names and URL fetching.

Every file is generated in tmp_path by the test itself. URL tests never leave the machine: a
small HTTP server listens on 127.0.0.1 and an injected resolver maps the made-up host names
("docs.example", "evil.example") to whatever address a case needs. Refusal cases use the
strict default address policy; cases that must reach the local server use a policy that allows
loopback only, so a redirect to any other private address is still refused.
"""

from __future__ import annotations

import io
import ipaddress
import os
import shutil
import ssl
import struct
import subprocess
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import docx
import pytest
from llama_index.core.schema import MetadataMode

from tests.pdf_fixtures import (
    crashing_extract,
    hanging_extract,
    make_encrypted_pdf,
    make_pdf,
    make_text_pdf,
)
from themes.readers import (
    FetchedDocument,
    RejectedFile,
    RejectedURL,
    fetch_url,
    is_public_address,
    read_document,
    safe_file_name,
    save_fetched,
)

# --------------------------------------------------------------------------------------------
# File builders
# --------------------------------------------------------------------------------------------


def _docx_bytes(build: Callable[[Any], None] | None = None) -> bytes:
    document = docx.Document()
    if build is not None:
        build(document)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _sample_docx(document: Any) -> None:
    document.add_heading("Introduction", level=1)
    document.add_paragraph("Chatitego answers questions about the company's documents.")
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "Plan"
    table.cell(0, 1).text = "Premium"
    document.add_heading("Holidays", level=2)
    document.add_paragraph("Employees get 25 days of paid leave.")


def _zip(entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return out.getvalue()


def _declare_smaller_size(archive: bytes, entry: str, declared: int) -> bytes:
    """Rewrite the central-directory size of one entry: a ZIP whose header lies."""
    data = bytearray(archive)
    at = data.find(b"PK\x01\x02")
    while at != -1:
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + name_length] == entry.encode():
            struct.pack_into("<I", data, at + 24, declared)
            return bytes(data)
        at = data.find(b"PK\x01\x02", at + 4)
    raise AssertionError(f"{entry} not in archive")


def _write(name: str, content: bytes) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(content)
        return path

    return build


def _symlink_to_valid_text(folder: Path) -> Path:
    target = folder / "real.txt"
    target.write_text("Real content.", encoding="utf-8")
    link = folder / "link.txt"
    link.symlink_to(target)
    return link


def _directory(folder: Path) -> Path:
    path = folder / "folder.pdf"
    path.mkdir()
    return path


def _missing(folder: Path) -> Path:
    return folder / "gone.txt"


_TEXT_PDF = make_text_pdf(["Hello page one"])


@dataclass(frozen=True)
class BadFile:
    build: Callable[[Path], Path]
    reason: str  # a fragment of RejectedFile.reason
    options: dict[str, Any] | None = None  # keyword arguments of read_document
    patches: dict[str, Any] | None = None  # "module.attribute" targets replaced


BAD_FILES = [
    pytest.param(
        BadFile(
            _write(
                "locked.pdf",
                make_encrypted_pdf(["Top secret"], user_password="secret", owner_password="o"),
            ),
            "encrypted PDF, not ingested (remove the password",
        ),
        id="pdf-encrypted",
    ),
    pytest.param(
        BadFile(_write("cut.pdf", _TEXT_PDF[: len(_TEXT_PDF) * 6 // 10]), "corrupt PDF"),
        id="pdf-truncated",
    ),
    pytest.param(
        BadFile(_write("scan.pdf", make_pdf([None, None])), "OCR is not supported"),
        id="pdf-image-only",
    ),
    pytest.param(
        BadFile(_write("fake.pdf", b"Just some text, no PDF here.\n"), "not a PDF"),
        id="pdf-really-text",
    ),
    pytest.param(
        BadFile(
            _write("slow.pdf", _TEXT_PDF),
            "PDF parsing took longer than 0.5 s",
            options={"pdf_timeout_s": 0.5},
            patches={"themes.readers.pdf_extraction.extract_pdf_pages": hanging_extract},
        ),
        id="pdf-parser-hangs",
    ),
    pytest.param(
        BadFile(
            _write("boom.pdf", _TEXT_PDF),
            "PDF parser crashed",
            patches={"themes.readers.pdf_extraction.extract_pdf_pages": crashing_extract},
        ),
        id="pdf-parser-crashes",
    ),
    pytest.param(
        # 8 MB of zeros deflate to ~8 KB: far below the 200 MB cap, caught by the ratio.
        BadFile(
            _write("bomb.docx", _zip({"word/document.xml": bytes(8 * 2**20)})),
            "possible ZIP bomb",
        ),
        id="docx-zip-bomb-ratio",
    ),
    pytest.param(
        # Incompressible, so only the total-size cap (lowered for the test) can catch it.
        BadFile(
            _write("huge.docx", _zip({"word/media/a.bin": os.urandom(2 * 2**20)})),
            "when unpacked (limit 1 MB): possible ZIP bomb",
            patches={"themes.readers.docx_reader.MAX_DOCX_UNCOMPRESSED": 2**20},
        ),
        id="docx-too-large-unpacked",
    ),
    pytest.param(
        BadFile(
            _write("many.docx", _zip({f"word/p{i}.xml": b"" for i in range(2_001)})),
            "2001 entries",
        ),
        id="docx-too-many-entries",
    ),
    pytest.param(
        BadFile(_write("cut.docx", _docx_bytes(_sample_docx)[:3000]), "corrupt Word document"),
        id="docx-truncated",
    ),
    pytest.param(
        BadFile(
            _write(
                "badxml.docx",
                _zip({"[Content_Types].xml": b"<Types", "word/document.xml": b"<w:document"}),
            ),
            "corrupt Word document",
        ),
        id="docx-broken-xml",
    ),
    pytest.param(
        # The header says 10 bytes: zipfile stops there and fails the CRC, never inflating more.
        BadFile(
            _write(
                "liar.docx",
                _declare_smaller_size(_docx_bytes(_sample_docx), "word/document.xml", 10),
            ),
            "corrupt Word document",
        ),
        id="docx-lying-zip-header",
    ),
    pytest.param(
        BadFile(_write("notes.docx", b"plain text pretending"), "not a Word document"),
        id="docx-really-text",
    ),
    pytest.param(
        BadFile(_write("old.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512)), "97-2003"),
        id="docx-legacy-doc",
    ),
    pytest.param(
        BadFile(_write("blank.docx", _docx_bytes()), "empty Word document"),
        id="docx-empty",
    ),
    pytest.param(BadFile(_write("empty.txt", b""), "empty file"), id="empty-file"),
    pytest.param(
        BadFile(_write("spaces.md", b"  \n\t\n"), "empty document"),
        id="markdown-only-blanks",
    ),
    pytest.param(
        BadFile(
            _write("app.html", b"<html><script>render()</script><nav>Menu</nav></html>"),
            "without visible text",
        ),
        id="html-no-visible-text",
    ),
    pytest.param(
        BadFile(_write("notes.txt", _TEXT_PDF), "content is a PDF"),
        id="text-really-pdf",
    ),
    pytest.param(
        BadFile(_write("page.html", b"\x7fELF\x02\x01\x01\x00\x00\x00"), "binary content"),
        id="html-really-binary",
    ),
    pytest.param(
        BadFile(_write("setup.exe", b"MZ\x90\x00"), "unsupported file type '.exe'"),
        id="unknown-extension",
    ),
    pytest.param(
        BadFile(_write("README", b"hello"), "unsupported file type '(no extension)'"),
        id="no-extension",
    ),
    pytest.param(BadFile(_symlink_to_valid_text, "symbolic link"), id="symlink-to-valid-file"),
    pytest.param(BadFile(_directory, "not a regular file"), id="directory"),
    pytest.param(BadFile(_missing, "not found"), id="missing-file"),
    pytest.param(
        BadFile(
            _write("big.txt", b"x" * 2000),
            "file too large",
            options={"max_bytes": 1000},
        ),
        id="over-max-bytes",
    ),
]


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_files_are_refused_with_an_actionable_reason(
    case: BadFile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for target, value in (case.patches or {}).items():
        monkeypatch.setattr(target, value)
    path = case.build(tmp_path)
    started = time.monotonic()
    with pytest.raises(RejectedFile) as caught:
        read_document(path, **(case.options or {}))
    assert case.reason in caught.value.reason
    assert caught.value.file_name == path.name
    assert str(caught.value) == f"{path.name}: {caught.value.reason}"
    # Nothing in the table may take long: the hanging parser must have been killed.
    assert time.monotonic() - started < 5


def test_rejected_file_survives_pickling() -> None:
    import pickle

    copy = pickle.loads(pickle.dumps(RejectedFile("a.pdf", "encrypted PDF")))
    assert (copy.file_name, copy.reason) == ("a.pdf", "encrypted PDF")


# --------------------------------------------------------------------------------------------
# Good files
# --------------------------------------------------------------------------------------------


def test_pdf_gives_one_document_per_page_with_text(tmp_path: Path) -> None:
    pdf = make_text_pdf(
        ["Hello page one", None, "Third (and last) page"], outline=[("Intro", 0), ("End", 2)]
    )
    path = tmp_path / "guide.pdf"
    path.write_bytes(pdf)

    documents = read_document(path)

    # The image-only page 2 is skipped; page numbers stay those of the file.
    assert [d.metadata["page"] for d in documents] == [1, 3]
    assert documents[0].text == "Hello page one"
    assert documents[1].text == "Third (and last) page"
    assert [d.metadata["headings"] for d in documents] == [["Intro"], ["End"]]
    assert {d.metadata["file_name"] for d in documents} == {"guide.pdf"}
    assert {d.metadata["file_type"] for d in documents} == {"pdf"}

    # What the embedding and the LLM read: no bookkeeping, no server path.
    embedded = documents[0].get_content(metadata_mode=MetadataMode.EMBED)
    for_llm = documents[0].get_content(metadata_mode=MetadataMode.LLM)
    assert "file_name: guide.pdf" in embedded
    for noise in ("page:", "file_type", "headings", "Intro", str(tmp_path)):
        assert noise not in embedded
    assert "page: 1" in for_llm
    assert "file_type" not in for_llm
    assert "file_path" in documents[0].excluded_embed_metadata_keys


def test_pdf_encrypted_with_an_empty_user_password_is_read(tmp_path: Path) -> None:
    path = tmp_path / "restricted.pdf"
    path.write_bytes(make_encrypted_pdf(["Open to all"], user_password="", owner_password="o"))

    assert "Open to all" in read_document(path)[0].text


def test_docx_keeps_headings_as_markdown_and_in_metadata(tmp_path: Path) -> None:
    path = tmp_path / "handbook.docx"
    path.write_bytes(_docx_bytes(_sample_docx))

    [document] = read_document(path)

    assert document.metadata["headings"] == ["Introduction", "Holidays"]
    assert document.metadata["page"] is None
    assert document.metadata["file_type"] == "docx"
    lines = document.text.splitlines()
    assert "# Introduction" in lines
    assert "## Holidays" in lines
    assert "Plan | Premium" in lines
    # Body order: the table sits between the paragraphs around it.
    assert (
        lines.index("# Introduction") < lines.index("Plan | Premium") < lines.index("## Holidays")
    )


def test_html_keeps_visible_text_title_and_headings(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><head><title>Leave policy</title><style>p{color:red}</style></head><body>"
        "<nav>Home | About | Contact</nav><script>track('visit')</script>"
        "<h1>Paid leave</h1><p>Employees get\n   25 <b>days</b>.</p><!-- internal note -->"
        "<div hidden>draft text</div><h2>Requests</h2><p>Ask your manager.</p>"
        "<footer>Copyright ACME</footer></body></html>",
        encoding="utf-8",
    )

    [document] = read_document(path)

    assert document.metadata["title"] == "Leave policy"
    assert document.metadata["headings"] == ["Paid leave", "Requests"]
    assert "# Paid leave" in document.text.splitlines()
    assert "## Requests" in document.text.splitlines()
    assert "Employees get 25 days." in document.text
    for hidden in ("track", "Home | About", "Copyright", "color:red", "internal note", "draft"):
        assert hidden not in document.text


def test_markdown_is_kept_as_is(tmp_path: Path) -> None:
    source = "# Title\n\nSome *text*.\n\n```sh\n# not a heading\n```\n\n## Part two\n"
    path = tmp_path / "notes.md"
    path.write_text(source, encoding="utf-8")

    [document] = read_document(path)

    assert document.text == source
    assert document.metadata["file_type"] == "markdown"
    assert document.metadata["headings"] == ["Title", "Part two"]


def test_latin1_text_is_decoded_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "legacy.txt"
    path.write_bytes("Café crème à Noël".encode("latin-1"))

    [document] = read_document(path)

    assert document.text == "Café crème à Noël"
    assert "not valid UTF-8" in document.metadata["encoding_note"]


@pytest.mark.parametrize(
    "encoded",
    [
        pytest.param("Été".encode("utf-8-sig"), id="utf8-bom"),
        pytest.param("Été".encode("utf-16"), id="utf16-bom"),
        pytest.param("Été".encode(), id="utf8"),
    ],
)
def test_unicode_text_is_decoded_without_a_note(encoded: bytes, tmp_path: Path) -> None:
    path = tmp_path / "u.txt"
    path.write_bytes(encoded)

    [document] = read_document(path)

    assert document.text == "Été"
    assert "encoding_note" not in document.metadata


# --------------------------------------------------------------------------------------------
# Safe file names
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("../../x.pdf", "x.pdf", id="dot-dot-slash"),
        pytest.param("..\\..\\x.pdf", "x.pdf", id="dot-dot-backslash"),
        pytest.param("a/b/c.md", "c.md", id="subfolders"),
        pytest.param("../../etc/passwd", "passwd", id="etc-passwd"),
        pytest.param("/abs/report.docx", "report.docx", id="absolute"),
        pytest.param("C:\\Users\\bob\\report.pdf", "report.pdf", id="windows-path"),
        pytest.param("rep\x00ort.pdf", "report.pdf", id="nul-byte"),
        pytest.param("line\nbreak.txt", "linebreak.txt", id="newline"),
        pytest.param("invoice\u202efdp.exe", "invoicefdp.exe", id="rtl-override"),
        pytest.param("Cafe\u0301.md", "Caf\u00e9.md", id="nfc"),
        pytest.param(".hidden.md", "hidden.md", id="leading-dot"),
        pytest.param("name. ", "name", id="trailing-dot-space"),
        pytest.param('a:b?"c".txt', "a_b__c_.txt", id="windows-forbidden"),
        pytest.param("CON.txt", "_CON.txt", id="windows-reserved"),
        pytest.param("Rapport annuel 2024.pdf", "Rapport annuel 2024.pdf", id="plain-kept"),
    ],
)
def test_safe_file_name(raw: str, expected: str) -> None:
    assert safe_file_name(raw) == expected


def test_safe_file_name_truncates_keeping_the_extension() -> None:
    long_name = safe_file_name("x" * 300 + ".pdf")
    assert len(long_name) == 120
    assert long_name.endswith(".pdf")
    emoji = safe_file_name("\U0001f600" * 100 + ".docx")
    assert emoji.endswith(".docx")
    assert len(emoji.encode("utf-8")) <= 240


@pytest.mark.parametrize(
    "raw",
    ["", ".", "..", "...", "a/..", "folder/", "\x00\x01", "   ", "../"],
    ids=["empty", "dot", "dot-dot", "dots", "ends-dot-dot", "slash-end", "controls", "blank", "up"],
)
def test_safe_file_name_refuses_what_cannot_be_made_safe(raw: str) -> None:
    with pytest.raises(RejectedFile, match="unusable file name"):
        safe_file_name(raw)


# --------------------------------------------------------------------------------------------
# URLs: address policy without any connection
# --------------------------------------------------------------------------------------------


def _resolver(mapping: dict[str, list[str]]) -> Callable[[str], list[str]]:
    def resolve(host: str) -> list[str]:
        if host not in mapping:
            raise OSError(f"unknown host {host}")
        return mapping[host]

    return resolve


def _never_resolve(host: str) -> list[str]:
    raise AssertionError(f"{host} should have been refused before resolution")


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::",
        "::ffff:127.0.0.1",
        "64:ff9b::a00:1",
        "2002:a00:1::",
    ],
)
def test_strict_policy_refuses_internal_addresses(address: str) -> None:
    calls: list[str] = []

    def resolve(host: str) -> list[str]:
        calls.append(host)
        return [address]

    with pytest.raises(RejectedURL) as caught:
        fetch_url("http://evil.example/doc.html", resolver=resolve)

    assert calls == ["evil.example"]
    assert "private or internal" in caught.value.reason or "metadata" in caught.value.reason


def test_every_answer_of_the_resolver_must_be_allowed() -> None:
    resolve = _resolver({"mixed.example": ["93.184.216.34", "10.0.0.7"]})
    with pytest.raises(RejectedURL, match="10.0.0.7"):
        fetch_url("http://mixed.example/", resolver=resolve)


def test_public_addresses_pass_the_strict_policy() -> None:
    for address in ("93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"):
        assert is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        pytest.param("file:///etc/passwd", "only http and https", id="file-scheme"),
        pytest.param("ftp://docs.example/a.pdf", "only http and https", id="ftp-scheme"),
        pytest.param("gopher://docs.example/", "only http and https", id="gopher-scheme"),
        pytest.param("http://user:hunter2@docs.example/", "user name or password", id="creds"),
        pytest.param("http://docs.example:8080/", "port 8080", id="other-port"),
        pytest.param("https://docs.example:22/", "port 22", id="ssh-port"),
        pytest.param("http://metadata.google.internal/", "metadata", id="gcp-metadata-name"),
        pytest.param("http://169.254.169.254/latest/", "metadata", id="aws-metadata-ip"),
        pytest.param("http://[fd00:ec2::254]/", "metadata", id="aws-metadata-ipv6"),
        pytest.param("http://[::1", "malformed", id="malformed"),
    ],
)
def test_urls_refused_before_any_resolution(url: str, reason: str) -> None:
    # Even a policy that allows everything cannot reach the metadata service.
    with pytest.raises(RejectedURL) as caught:
        fetch_url(url, resolver=_never_resolve, is_allowed_address=lambda _address: True)

    assert reason in caught.value.reason
    assert "hunter2" not in str(caught.value)


def test_ip_literals_are_checked_without_a_resolver() -> None:
    with pytest.raises(RejectedURL, match="private or internal"):
        fetch_url("http://10.1.2.3/", resolver=_never_resolve)


def test_the_default_resolver_is_the_system_one() -> None:
    # The test guard refuses to resolve non-loopback names, so the lookup itself fails.
    with pytest.raises(RejectedURL, match="could not be resolved"):
        fetch_url("http://intranet.example/")


# --------------------------------------------------------------------------------------------
# URLs: against a local server
# --------------------------------------------------------------------------------------------

HOST = "docs.example"
BIG = 2 * 2**20


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the test output clean

    def _send(self, status: int, content_type: str, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        port = cast(ThreadingHTTPServer, self.server).server_port
        routes: dict[str, Callable[[], None]] = {
            "/doc.html": lambda: self._send(
                200, "text/html; charset=utf-8", b"<h1>Leave</h1><p>25 days.</p>"
            ),
            "/echo-host": lambda: self._send(200, "text/plain", self.headers["Host"].encode()),
            "/report": lambda: self._send(
                200,
                "application/pdf",
                _TEXT_PDF,
                Content_Disposition='attachment; filename="../../Q3 report.pdf"',
            ),
            "/redirect-relative": lambda: self._redirect("/doc.html"),
            "/redirect-host": lambda: self._redirect(f"http://{HOST}:{port}/doc.html"),
            "/redirect-internal": lambda: self._redirect("http://10.0.0.1/secret"),
            "/redirect-file": lambda: self._redirect("file:///etc/passwd"),
            "/redirect-port": lambda: self._redirect(f"http://{HOST}:8080/"),
            "/loop": lambda: self._redirect("/loop"),
            "/image": lambda: self._send(200, "image/png", b"\x89PNG\r\n"),
            "/missing": lambda: self._send(404, "text/plain", b"not found"),
            "/big": lambda: self._send(200, "text/plain", b"x" * BIG),
        }
        if self.path in routes:
            routes[self.path]()
        elif self.path == "/big-no-length":
            # HTTP/1.0 without Content-Length: the body ends when the connection closes.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            for _ in range(BIG // 65536):
                self.wfile.write(b"y" * 65536)
        elif self.path == "/drip":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            for _ in range(15):
                self.wfile.write(b"z")
                self.wfile.flush()
                time.sleep(0.1)
        elif self.path == "/stall":
            time.sleep(1.5)
            self._send(200, "text/plain", b"late")
        else:
            self._send(404, "text/plain", b"no route")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that give up mid-body (size and time limits) are expected here


@pytest.fixture(scope="module")
def server_port() -> Iterator[int]:
    server = _QuietServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _loopback_only(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return address == ipaddress.ip_address("127.0.0.1")


def _fetch(port: int, path: str, **options: Any) -> FetchedDocument:
    options.setdefault("resolver", _resolver({HOST: ["127.0.0.1"]}))
    options.setdefault("allowed_ports", {80, 443, port})
    options.setdefault("is_allowed_address", _loopback_only)
    return fetch_url(f"http://{HOST}:{port}{path}", **options)


def test_fetch_an_html_page(server_port: int) -> None:
    fetched = _fetch(server_port, "/doc.html")

    assert fetched.content_type == "text/html"
    assert fetched.body == b"<h1>Leave</h1><p>25 days.</p>"
    assert fetched.suggested_name == "doc.html"
    assert fetched.final_url == f"http://{HOST}:{server_port}/doc.html"


def test_connection_is_pinned_to_the_checked_address(server_port: int) -> None:
    # The request went to 127.0.0.1 (nothing else resolves here) but kept its host name.
    assert _fetch(server_port, "/echo-host").body == f"{HOST}:{server_port}".encode()


def test_strict_policy_refuses_the_local_server(server_port: int) -> None:
    with pytest.raises(RejectedURL, match="private or internal"):
        _fetch(server_port, "/doc.html", is_allowed_address=is_public_address)


def test_relative_redirect_is_followed_and_resolved_again(server_port: int) -> None:
    calls: list[str] = []

    def resolve(host: str) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"]

    fetched = _fetch(server_port, "/redirect-relative", resolver=resolve)

    assert fetched.final_url.endswith("/doc.html")
    assert calls == [HOST, HOST]


def test_redirect_to_a_private_address_is_refused_at_that_hop(server_port: int) -> None:
    with pytest.raises(RejectedURL, match=r"redirect to http://10\.0\.0\.1/secret refused"):
        _fetch(server_port, "/redirect-internal")


def test_a_host_that_rebinds_between_hops_is_refused(server_port: int) -> None:
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])

    with pytest.raises(RejectedURL, match="private or internal network address \\(10.0.0.1\\)"):
        _fetch(server_port, "/redirect-host", resolver=lambda _host: next(answers))


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        pytest.param("/redirect-file", "only http and https", id="to-file-scheme"),
        pytest.param("/redirect-port", "port 8080", id="to-other-port"),
    ],
)
def test_redirect_targets_are_checked_like_the_first_url(
    server_port: int, path: str, reason: str
) -> None:
    with pytest.raises(RejectedURL, match="redirect to .* refused") as caught:
        _fetch(server_port, path)
    assert reason in caught.value.reason


def test_redirect_limit(server_port: int) -> None:
    with pytest.raises(RejectedURL, match="more than 3 redirects"):
        _fetch(server_port, "/loop", max_redirects=3)
    with pytest.raises(RejectedURL, match="more than 0 redirects"):
        _fetch(server_port, "/redirect-relative", max_redirects=0)


@pytest.mark.parametrize("path", ["/big", "/big-no-length"], ids=["declared", "streamed"])
def test_body_over_max_bytes_is_refused(server_port: int, path: str) -> None:
    with pytest.raises(RejectedURL, match="larger than 1.0 MB"):
        _fetch(server_port, path, max_bytes=2**20)
    # The same body under a higher limit comes through whole.
    assert len(_fetch(server_port, path, max_bytes=4 * 2**20).body) == BIG


@pytest.mark.parametrize("path", ["/drip", "/stall"])
def test_total_time_is_limited(server_port: int, path: str) -> None:
    started = time.monotonic()
    with pytest.raises(RejectedURL, match="took too long"):
        _fetch(server_port, path, timeout_s=0.5)
    assert time.monotonic() - started < 1.4


def test_unsupported_content_type_is_refused(server_port: int) -> None:
    with pytest.raises(RejectedURL, match="unsupported content type 'image/png'"):
        _fetch(server_port, "/image")


def test_http_errors_are_refused(server_port: int) -> None:
    with pytest.raises(RejectedURL, match="HTTP 404"):
        _fetch(server_port, "/missing")


def test_fetched_pdf_is_saved_safely_and_readable(server_port: int, tmp_path: Path) -> None:
    fetched = _fetch(server_port, "/report")
    assert fetched.suggested_name == "Q3 report.pdf"  # the "../../" of the header is gone

    first = save_fetched(fetched, tmp_path)
    second = save_fetched(fetched, tmp_path)

    assert first == tmp_path / "Q3 report.pdf"
    assert second == tmp_path / "Q3 report-2.pdf"
    assert [d.metadata["page"] for d in read_document(first)] == [1]


def test_save_fetched_stays_in_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    outside = tmp_path / "victim.txt"
    outside.write_text("untouched", encoding="utf-8")
    (folder / "notes.txt").symlink_to(outside)
    doc = FetchedDocument("http://x.example/", "text/plain", b"new", "../../notes.txt")

    saved = save_fetched(doc, folder)
    replaced = save_fetched(doc, folder, overwrite=True)

    assert saved == folder / "notes-2.txt"  # never written through the link
    assert replaced == folder / "notes.txt"
    assert not replaced.is_symlink()
    assert replaced.read_bytes() == b"new"
    assert outside.read_text(encoding="utf-8") == "untouched"
    assert sorted(p.name for p in folder.iterdir()) == ["notes-2.txt", "notes.txt"]


def _self_signed(folder: Path, host: str) -> tuple[Path, Path]:
    certificate, key = folder / f"{host}.crt", folder / f"{host}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(certificate), "-subj", f"/CN={host}"]
        + ["-addext", f"subjectAltName=DNS:{host}"],
        check=True,
        capture_output=True,
    )
    return certificate, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
@pytest.mark.parametrize(
    ("certificate_host", "accepted"),
    [
        pytest.param(HOST, True, id="right-certificate"),
        pytest.param("other.example", False, id="wrong"),
    ],
)
def test_https_pins_the_address_but_verifies_the_host_name(
    certificate_host: str, accepted: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    certificate, key = _self_signed(tmp_path, certificate_host)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(certificate, key)
    names_sent: list[str | None] = []
    server_context.sni_callback = lambda _socket, name, _context: names_sent.append(name)
    server = _QuietServer(("127.0.0.1", 0), _Handler)
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Trust the test certificate instead of the public CAs; everything else is fetch_url's own.
    trusting = ssl.create_default_context(cafile=str(certificate))
    real_client = httpx.Client
    monkeypatch.setattr(httpx, "Client", lambda **kwargs: real_client(verify=trusting, **kwargs))
    port = server.server_address[1]
    try:
        options: dict[str, Any] = {
            "resolver": _resolver({HOST: ["127.0.0.1"]}),
            "allowed_ports": {port},
            "is_allowed_address": _loopback_only,
        }
        if accepted:
            fetched = fetch_url(f"https://{HOST}:{port}/echo-host", **options)
            assert fetched.body == f"{HOST}:{port}".encode()
        else:
            # Connected to 127.0.0.1, yet checked against docs.example: the mismatch is caught.
            with pytest.raises(RejectedURL, match="could not be fetched"):
                fetch_url(f"https://{HOST}:{port}/echo-host", **options)
        assert names_sent == [HOST]
    finally:
        server.shutdown()
        server.server_close()
