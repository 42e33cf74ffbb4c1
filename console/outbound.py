"""Where the console may send a request on an operator's word (a cluster's API server; issue
36, Build 1): checked like an outbound webhook. Link-local addresses (cloud metadata services
live there), the known metadata addresses and names, multicast, unspecified and reserved
addresses are refused; private and loopback ones are allowed, since API servers live there.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlparse

from django.utils.translation import gettext as _

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "metadata.goog"})
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str], Iterable[str]]


class AddressRefused(ValueError):
    """The message names the host and why, never a credential."""


def address_problem(address: Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return _("a cloud metadata address")
    if address.is_link_local:
        return _("a link-local address")
    if address.is_loopback:
        return None  # ::1 is also in IPv6's "reserved" ::/8, yet an API server may listen there
    if address.is_multicast or address.is_unspecified or address.is_reserved:
        return _("not a unicast address")
    return None


def peer_refusal(address: str) -> str | None:
    """Why the engine may not talk to the address a connection reached (the kube client asks
    at every connect, `console.kube.client`): the server URL's check at entry repeated on what
    DNS answered this time. The same rule, so private and loopback addresses pass."""
    return address_problem(ipaddress.ip_address(address.split("%")[0]))


def resolve(host: str) -> list[str]:
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def check_server(url: str, resolver: Resolver = resolve) -> None:
    """Raises AddressRefused unless every address the server's host resolves to is allowed."""
    host = (urlparse(url).hostname or "").rstrip(".").lower()
    if not host:
        raise AddressRefused(_("The server URL names no host."))
    if host in METADATA_NAMES:
        raise AddressRefused(_("The server %(host)s is a cloud metadata service.") % {"host": host})
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            addresses = [ipaddress.ip_address(a.split("%")[0]) for a in resolver(host)]
        except OSError:
            message = _("The server %(host)s cannot be resolved.") % {"host": host}
            raise AddressRefused(message) from None
    for address in addresses:
        problem = address_problem(address)
        if problem:
            raise AddressRefused(
                _("The server %(host)s is %(problem)s (%(address)s): refused.")
                % {"host": host, "problem": problem, "address": address}
            )
