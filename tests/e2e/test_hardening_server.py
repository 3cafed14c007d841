"""Issue 11, configuration seen from outside: what Streamlit refuses to other origins and
hosts with the settings of .streamlit/config.toml and ./run.sh (no browser needed)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin, Subprotocol

from tests.e2e.support import streamlit_server


@pytest.fixture(scope="module")
def chat_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("data")
    env = {"CHATITEGO_DATA_DIR": str(data), "COOKIE_PASSWORD": "server-test-key"}
    with streamlit_server("chatitego.py", env) as url:
        yield url


def _stream(url: str, *, host: str | None = None, origin: str | None = None) -> None:
    """Open the page's WebSocket as a client of ``host`` from a page of ``origin``."""
    port = int(url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    target = f"ws://{host or '127.0.0.1'}:{port}/_stcore/stream"
    origin_header = Origin(origin) if origin else None
    protocols = [Subprotocol("streamlit")]
    with connect(target, sock=sock, origin=origin_header, subprotocols=protocols, open_timeout=5):
        pass


def test_the_page_itself_opens_its_stream(chat_url: str) -> None:
    _stream(chat_url, origin=chat_url)
    _stream(chat_url, host="localhost", origin=chat_url.replace("127.0.0.1", "localhost"))


def test_a_page_of_another_origin_cannot_open_the_stream(chat_url: str) -> None:
    with pytest.raises(InvalidStatus, match="403"):
        _stream(chat_url, origin="http://evil.example")


def test_a_rebound_host_name_cannot_open_the_stream(chat_url: str) -> None:
    # DNS rebinding: evil.example resolved to 127.0.0.1, same origin for the browser.
    port = chat_url.rsplit(":", 1)[1]
    with pytest.raises(InvalidStatus):
        _stream(chat_url, host="evil.example", origin=f"http://evil.example:{port}")


def test_an_upload_without_the_xsrf_token_is_refused(chat_url: str) -> None:
    request = urllib.request.Request(
        f"{chat_url}/_stcore/upload_file/session/file", data=b"x", method="PUT"
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 403


def test_no_file_of_the_folder_is_served(chat_url: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{chat_url}/app/static/../../chatitego.toml", timeout=5)
    assert missing.value.code in (400, 403, 404)
