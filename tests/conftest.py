"""Test-wide guards: no network outside loopback, offline model hub, isolated data dir."""

from __future__ import annotations

import ipaddress
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# Tests must never pick up a developer's real key or config file.
for _var in ("MISTRAL_API_KEY", "OPENAI_LIKE_BASE_URL", "OPENAI_LIKE_API_KEY", "LLM_PROVIDER"):
    os.environ.pop(_var, None)
# The server the postgres backend's tests use (set: any PostgreSQL with pgvector; unset: a
# throwaway local one); tests themselves run on the embedded backend unless they ask.
# VECTOR_BACKEND set (embedded or postgres): the backend-parametrised tests run on it only.
_DATABASE_URL = os.environ.pop("DATABASE_URL", None)
_CHOSEN_BACKEND = os.environ.pop("VECTOR_BACKEND", None)
if _CHOSEN_BACKEND:
    os.environ["CHATITEGO_TEST_BACKENDS"] = _CHOSEN_BACKEND
os.environ["CHATITEGO_CONFIG"] = str(Path(__file__).parent / "no-such-config.toml")


class NetworkBlocked(OSError):
    """A test tried to reach a non-loopback address."""


def _is_loopback(address: Any) -> bool:
    if isinstance(address, (str, bytes)):
        return True  # AF_UNIX socket path
    host = address[0] if isinstance(address, tuple) and address else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_loopback(address):
        raise NetworkBlocked(f"tests may not connect to {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if not _is_loopback(address):
        raise NetworkBlocked(f"tests may not connect to {address!r}")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host not in (None, "localhost") and not _is_loopback((host,)):
        raise NetworkBlocked(f"tests may not resolve {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any connection outside loopback fails the test that makes it."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)
    yield


@pytest.fixture(autouse=True)
def _scripts_not_exhausted(request: pytest.FixtureRequest) -> Iterator[None]:
    """A scripted model called more often than scripted fails the test (see tests.fakes)."""
    from tests.fakes import EXHAUSTED

    EXHAUSTED.clear()
    yield
    if EXHAUSTED and request.node.get_closest_marker("exhausts_script") is None:
        raise AssertionError(f"ScriptedLLM exhausted: {EXHAUSTED[0]}")


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("CHATITEGO_DATA_DIR", str(data))
    monkeypatch.setenv("DATA_DIR", str(data))
    from config.settings import get_config
    from config.store import get_store_settings

    get_config.cache_clear()  # the process-wide config must see this test's data dir
    get_store_settings.cache_clear()
    return data


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """``DATABASE_URL`` if set, else a local PostgreSQL started for the session (stopped after)."""
    from tests.backends import prepare_template

    if _DATABASE_URL:
        prepare_template(_DATABASE_URL)
        yield _DATABASE_URL
        return
    from themes.pg.local_server import LocalPostgres

    folder = Path(tempfile.mkdtemp(prefix="chatitego-pg-"))
    with LocalPostgres.start(folder, remove_on_stop=True) as server:
        prepare_template(server.url)
        yield server.url


@pytest.fixture(params=(_CHOSEN_BACKEND,) if _CHOSEN_BACKEND else ("embedded", "postgres"))
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Each backend in turn, also made the process's setting (``VECTOR_BACKEND``)."""
    from tests.backends import open_backend, use_backend

    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    with open_backend(request.param, server) as chosen:
        use_backend(monkeypatch, chosen)
        yield chosen
