"""Which hosts and addresses a fetched URL may reach: the guard against SSRF.

Every hop of a fetch is resolved and checked against the address policy (no private, loopback,
link-local... networks, no cloud metadata service), and the connection is then *pinned* to the
checked address, so a DNS answer that changes between the check and the connection (DNS
rebinding) cannot redirect the request.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from themes.readers.errors import RejectedURL

if TYPE_CHECKING:
    import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

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


def default_resolver(host: str) -> list[str]:
    """All addresses the system resolver returns for host (both IPv4 and IPv6)."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    # Drop IPv6 zone identifiers ("fe80::1%eth0"): the policy refuses link-local anyway.
    return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))


def check_url(url: httpx.URL, original: str, allowed_ports: Collection[int]) -> None:
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


def pinned_address(
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
