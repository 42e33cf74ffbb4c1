"""An API client per Cluster, from its parsed kubeconfig, and the timeouts of every call.

The kubeconfig arrives parsed and already checked by its caller (`console.kubeconfig`, the
console's rule of what a kubeconfig may contain, applied before every use): this package never
reads YAML and never judges a credential, it only builds the client from what it is given.

Likewise the caller's `refusal` judges addresses: every connection asks it about the address it
actually reached, right after the TCP connect and before TLS or any byte of a request (so a DNS
answer that changed since the server URL was checked cannot lead the token elsewhere).
"""

from __future__ import annotations

import hashlib
import socket
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from kubernetes.client import ApiClient, Configuration
from kubernetes.config import new_client_from_config_dict
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry

from console.kube.gateway import PeerRefused

# Why the console may not talk to an address (a connected peer's IP), or None when it may.
Refusal = Callable[[str], str | None]


class ClientConfigError(ValueError):
    """The client library refused the kubeconfig; the message names the error's type only."""


# One client per (cluster, kubeconfig, context): its connection pool is reused between syncs.
_clients: dict[tuple[int, str], ApiClient] = {}
_clients_lock = threading.Lock()


def fingerprint(text: str, context: str) -> str:
    return hashlib.sha256(f"{context}\n{text}".encode()).hexdigest()


def anywhere(address: str) -> str | None:
    return None


def _checked(refusal: Refusal, sock: socket.socket) -> socket.socket:
    address = str(sock.getpeername()[0])
    problem = refusal(address)
    if problem is not None:
        sock.close()
        raise PeerRefused(address, problem)
    return sock


def _pool_classes(refusal: Refusal) -> dict[str, type[HTTPConnectionPool]]:
    """urllib3 pools whose connections are checked by `refusal` once connected. The HTTPS pool
    does not warn of an unverified request: only a Cluster an operator marked insecure makes
    one (`console.kubeconfig`), and its pages say so for ever after instead of the log."""

    class Connection(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return _checked(refusal, super()._new_conn())

    class TLSConnection(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            return _checked(refusal, super()._new_conn())

    class Pool(HTTPConnectionPool):
        ConnectionCls = Connection

    class TLSPool(HTTPSConnectionPool):
        ConnectionCls = TLSConnection

        def _validate_conn(self, conn: Any) -> None:
            if conn.is_closed:
                conn.connect()

    return {"http": Pool, "https": TLSPool}


def _new_client(config: dict[str, Any], context: str, refusal: Refusal) -> ApiClient:
    configuration = Configuration()
    # One quick retry of a refused connection; never re-send a read that timed out (a sync
    # must fail within its timeouts) and never retry on a status (the sync decides).
    configuration.retries = Retry(
        total=1, connect=1, read=0, status=0, redirect=0, other=0,
        respect_retry_after_header=False,
    )  # fmt: skip
    try:
        client = new_client_from_config_dict(
            config_dict=config,
            context=context or None,
            persist_config=False,
            client_configuration=configuration,
        )
    except Exception as error:  # the loader's messages may quote the file: name the type only
        raise ClientConfigError(
            f"The kubeconfig cannot be loaded ({type(error).__name__})."
        ) from None
    client.rest_client.pool_manager.pool_classes_by_scheme = _pool_classes(refusal)
    return client


def api_client(
    cluster_id: int, text: str, context: str, parse: Callable[[str, str], dict[str, Any]],
    refusal: Refusal = anywhere,
) -> ApiClient:  # fmt: skip
    """The API client of a Cluster, cached while its kubeconfig's text and context are
    unchanged. `parse` (the caller's check of the text, which raises on a refused one) runs
    only to build a client: the same text gets the same verdict, so a text checked once is not
    parsed again at every sync, and a changed text is checked before it is used."""
    key = (cluster_id, fingerprint(text, context))
    with _clients_lock:
        client = _clients.get(key)
    if client is not None:
        return client
    config = parse(text, context)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            for stale in [k for k in _clients if k[0] == cluster_id]:
                _clients.pop(stale).close()
            client = _clients[key] = _new_client(config, context, refusal)
        return client


def one_off_client(config: dict[str, Any], context: str, refusal: Refusal = anywhere) -> ApiClient:
    """A client for credentials not stored yet (a registration's or a rotation's connection
    test): never cached; the caller closes it."""
    return _new_client(config, context, refusal)


def timeouts() -> tuple[int, int]:
    """(connect, read) seconds for every call to a cluster."""
    return settings.TRAINYARD_KUBE_CONNECT_TIMEOUT, settings.TRAINYARD_KUBE_READ_TIMEOUT
