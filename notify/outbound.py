"""Every request that leaves the console for a channel (ARCHITECTURE §Principles: bounded):
HTTPS only, no redirects, a 10 s timeout, the answer read up to 64 KiB, and the resolved
address checked before connecting, and connected to as checked (no second DNS answer).

The address must not be loopback, private, link-local, a metadata address or otherwise not
global, unless it falls in TRAINYARD_NOTIFY_ALLOWED_NETWORKS (comma-separated CIDRs, empty by
default); plain HTTP is allowed only to those networks (issue 32 §Build 4)."""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import urllib3
from django.conf import settings

TIMEOUT_SECONDS = 10.0
MAX_ANSWER_BYTES = 64 * 1024
# Cloud metadata services, refused even when a network around them is allowed.
METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "100.100.100.200", "fd00:ec2::254")
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefused(Exception):
    """The URL may not be called: a configuration error, never retried."""


class Unreachable(Exception):
    """The request did not get an answer (connection, TLS, timeout): retried."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: Mapping[str, str] = field(default_factory=dict)
    latency_ms: int = 0


def allowed(address: IPAddress) -> bool:
    networks = [
        ipaddress.ip_network(n, strict=False) for n in settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS
    ]
    return address not in METADATA and any(address in network for network in networks)


def refusal(address: IPAddress) -> str | None:
    """Why the address may not be called, None when it may."""
    if address in METADATA:
        return "a cloud metadata address"
    if allowed(address):
        return None
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_private or not address.is_global:
        return "a private or reserved address"
    return None


def resolve(url: str) -> tuple[str, str, int, IPAddress]:
    """(scheme, host, port, the address to connect to), checked; AddressRefused otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise AddressRefused("The URL must be an https:// URL with a host.")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except OSError as error:
        raise AddressRefused(f"The host {parts.hostname} does not resolve: {error}.") from None
    addresses = [ipaddress.ip_address(info[4][0]) for info in found]
    for address in addresses:
        why = refusal(address)
        if why:
            raise AddressRefused(f"{parts.hostname} resolves to {why} ({address}).")
    if parts.scheme == "http" and not all(allowed(a) for a in addresses):
        raise AddressRefused("Plain http:// is allowed only to TRAINYARD_NOTIFY_ALLOWED_NETWORKS.")
    return parts.scheme, parts.hostname, port, addresses[0]


# Kept-alive connections per checked address (and the name its certificate must carry): a
# backlog to one receiver is sent over a few connections, not one each.
_POOLS: dict[tuple[str, str, int, str], urllib3.HTTPConnectionPool] = {}
MAX_POOLS = 64


def _pool(scheme: str, host: str, port: int, address: IPAddress) -> urllib3.HTTPConnectionPool:
    key = (scheme, host, port, str(address))
    found = _POOLS.get(key)
    if found is not None:
        return found
    if len(_POOLS) >= MAX_POOLS:
        forget_pools()
    timeout = urllib3.Timeout(connect=TIMEOUT_SECONDS, read=TIMEOUT_SECONDS)
    pool: urllib3.HTTPConnectionPool
    if scheme == "https":
        pool = urllib3.HTTPSConnectionPool(
            str(address), port, timeout=timeout, retries=False, server_hostname=host,
            assert_hostname=host, maxsize=4,
        )  # fmt: skip
    else:
        pool = urllib3.HTTPConnectionPool(
            str(address), port, timeout=timeout, retries=False, maxsize=4
        )
    _POOLS[key] = pool
    return pool


def forget_pools() -> None:
    for pool in list(_POOLS.values()):
        pool.close()
    _POOLS.clear()


def post(url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
    """POSTs once, following no redirect. Unreachable when no answer came."""
    scheme, host, port, address = resolve(url)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    pool = _pool(scheme, host, port, address)
    sent = {"Host": host if parts.port is None else f"{host}:{port}", **headers}
    started = time.monotonic()
    try:
        response = pool.urlopen(
            "POST", path, body=body, headers=sent, redirect=False, retries=False,
            preload_content=False,
        )  # fmt: skip
        data = response.read(MAX_ANSWER_BYTES, decode_content=True)
        response.release_conn()
    except urllib3.exceptions.HTTPError as error:
        raise Unreachable(f"No answer from {host}: {type(error).__name__}.") from None
    latency = round((time.monotonic() - started) * 1000)
    text = data[:MAX_ANSWER_BYTES].decode("utf-8", "replace")
    return Answer(response.status, text, dict(response.headers), latency)
