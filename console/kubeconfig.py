"""Registered kubeconfigs: what the console accepts as a Cluster's credentials (text in, parsed
values or a refusal out; no cluster is contacted here, and no file is read but the one a
Cluster names by path, `read_kubeconfig_file`).

A kubeconfig can run code (`exec`, `auth-provider`) or make the console read files on its own
host (`tokenFile`, `certificate-authority`, `client-certificate`, `client-key`, any `*-file`).
Those are refused at registration and again before every use (the stored text may have been
edited since). Inline `*-data` fields and `token` are fine. No message here ever quotes the
kubeconfig: a YAML error names only the line.

A cluster entry that skips TLS verification (`insecure-skip-tls-verify: true`) is refused unless
the Cluster is flagged insecure by an operator, and one with a `proxy-url` is always refused: the
API server's identity, or the path to it, would be someone else's to decide. A kubeconfig may
also be a reference, a file read at every use (`read_kubeconfig_file`, e.g. a mounted Secret).

The admin, the Cluster field and the commands check entries here; the engine checks the stored
text here again before every use and hands the parsed result to the gateway
(`console.kube.client`), which never reads YAML itself (docs/decisions.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from django.utils.translation import gettext

from console.yaml_input import YamlRefused, load_yaml

MAX_BYTES = 256 * 1024
# A kubeconfig of a hundred contexts stays far below this; composing it costs milliseconds.
MAX_NODES = 20_000
FORBIDDEN_KEYS = frozenset(
    {
        "exec",
        "auth-provider",
        "tokenFile",
        "token-file",
        "certificate-authority",
        "client-certificate",
        "client-key",
    }
)


class KubeconfigRejected(ValueError):
    """The kubeconfig cannot be used; the message is safe to show (it quotes no credential)."""


def _forbidden(key: object) -> bool:
    text = str(key)
    return text in FORBIDDEN_KEYS or text.endswith(("-file", "File"))


def _named(config: dict[str, Any], section: str, name: object) -> dict[str, Any]:
    for entry in config.get(section) or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(section[:-1])
            if isinstance(body, dict):
                return body
    raise KubeconfigRejected(f"The kubeconfig has no {section[:-1]} named {name!r}.")


def _check_keys(section: str, body: dict[str, Any]) -> None:
    bad = sorted(str(key) for key in body if _forbidden(key))
    if bad:
        raise KubeconfigRejected(
            f"The kubeconfig's {section} uses {', '.join(bad)}: it could run code or read files "
            "on the console's host. Use a token or inline *-data fields instead."
        )


def _check_transport(name: object, body: dict[str, Any], insecure: bool) -> None:
    if body.get("proxy-url"):
        raise KubeconfigRejected(
            f"The kubeconfig's cluster {name!r} sets proxy-url: its requests and credentials "
            "would go through another host. Reach the API server directly."
        )
    if body.get("insecure-skip-tls-verify") is True and not insecure:
        raise KubeconfigRejected(
            f"The kubeconfig's cluster {name!r} skips TLS verification "
            "(insecure-skip-tls-verify): anyone on the path could pose as its API server. Give "
            "its certificate-authority-data, or have an operator mark the cluster insecure."
        )


def _load(text: str) -> dict[str, Any]:
    """Read like a job spec (console.yaml_input): no anchors or aliases, bounded nesting and
    size; the refusal names a line and column, never the text."""
    try:
        config = load_yaml(text, "kubeconfig", MAX_BYTES, MAX_NODES)
    except YamlRefused as refused:
        raise KubeconfigRejected(f"The kubeconfig is not accepted. {refused}") from None
    if not isinstance(config, dict):
        raise KubeconfigRejected("The kubeconfig is not a YAML mapping.")
    return config


def validate_kubeconfig(text: str, context: str = "", *, insecure: bool = False) -> dict[str, Any]:
    """The parsed kubeconfig, or KubeconfigRejected. Every cluster and user entry is checked,
    not only the ones of the chosen context: the stored text must be safe as a whole.
    `insecure` is the Cluster's flag that allows skipping TLS verification."""
    config = _load(text)
    for section in ("clusters", "users"):
        for entry in config.get(section) or ():
            body = entry.get(section[:-1]) if isinstance(entry, dict) else None
            if isinstance(body, dict):
                _check_keys(section[:-1], body)
                if section == "clusters":
                    _check_transport(entry.get("name"), body, insecure)
    chosen = context or config.get("current-context") or ""
    if not isinstance(chosen, str):
        raise KubeconfigRejected("The kubeconfig's current-context must be a name (a string).")
    if not chosen:
        raise KubeconfigRejected("The kubeconfig has no current-context; name one with --context.")
    ctx = _named(config, "contexts", chosen)
    cluster = _named(config, "clusters", ctx.get("cluster"))
    _named(config, "users", ctx.get("user"))
    server = urlparse(str(cluster.get("server", "")))
    if server.scheme not in ("http", "https") or not server.hostname:
        raise KubeconfigRejected(f"The cluster of context {chosen!r} has no http(s) server URL.")
    return config


def check_insecure_flag(text: str, insecure: bool) -> None:
    """Refuses a kubeconfig that skips TLS verification while the Cluster is not flagged
    insecure; any other fault is left to `validate_kubeconfig` when the client is built."""
    try:
        config = _load(text)
    except KubeconfigRejected:
        return
    for entry in config.get("clusters") or ():
        body = entry.get("cluster") if isinstance(entry, dict) else None
        if isinstance(body, dict):
            _check_transport(entry.get("name"), body, insecure)


def read_kubeconfig_file(path: str) -> str:
    """A kubeconfig given by reference (e.g. a Kubernetes Secret mounted as a file), read at
    every use so that a rotated Secret takes effect. The message names the path, never text."""
    file = Path(path)
    if not file.is_absolute():
        raise KubeconfigRejected(f"The kubeconfig path {path!r} must be absolute.")
    try:
        if file.stat().st_size > MAX_BYTES:
            raise KubeconfigRejected(f"The kubeconfig file {path!r} is larger than 256 KiB.")
        return file.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise KubeconfigRejected(
            f"The kubeconfig file {path!r} cannot be read ({type(error).__name__})."
        ) from None


def server_of(text: str, context: str = "") -> str:
    """`scheme://host:port` of the context's API server, without any user-info: safe to show."""
    config = validate_kubeconfig(text, context, insecure=True)
    ctx = _named(config, "contexts", context or config.get("current-context"))
    server = urlparse(str(_named(config, "clusters", ctx.get("cluster")).get("server")))
    port = f":{server.port}" if server.port else ""
    return f"{server.scheme}://{server.hostname}{port}"


def speaks_plain_http(text: str, context: str = "") -> bool:
    """Whether the context's API server is an http:// URL: its token travels in clear."""
    return server_of(text, context).startswith("http://")


def check_plain_http(text: str, context: str, insecure: bool) -> None:
    """A plain http:// server is accepted only on an operator's word (`insecure`), as skipping
    TLS verification is; `add_cluster` and `demo_cluster` take the URL as that word
    (docs/decisions.md, "Plain http")."""
    if speaks_plain_http(text, context) and not insecure:
        raise KubeconfigRejected(
            gettext(
                "The server %(server)s speaks plain http://: its token would travel in clear. "
                "Use https://, or mark the cluster insecure (it is then shown so)."
            )
            % {"server": server_of(text, context)}
        )
