"""The autouse guard really blocks the network (a guard that cannot fail is no guard)."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import NetworkBlocked


def test_public_address_is_blocked() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, pytest.raises(NetworkBlocked):
        s.connect(("1.1.1.1", 443))


def test_host_name_resolution_is_blocked() -> None:
    with pytest.raises(NetworkBlocked):
        socket.getaddrinfo("api.mistral.ai", 443)


def test_loopback_is_allowed() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
        client.connect(("127.0.0.1", port))
    server.close()
