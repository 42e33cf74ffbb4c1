"""`manage.py add_cluster NAME --kubeconfig FILE [--context CTX] [--namespace NS]
[--prometheus-url URL] [--project PROJECT ...]` (or `--kubeconfig-path FILE` to keep a reference
to the file instead of its content; `--insecure` to allow a kubeconfig that skips TLS
verification; a plain http:// server is taken as --insecure and shown so).

Registers a cluster, or updates the one of that name; the same values again change nothing (and
record nothing), so a deployment script may run it on every start. The kubeconfig is validated
first (nothing that runs code or reads files on this host, no proxy, TLS verified unless
--insecure, at most 256 KiB), stored encrypted (or read from its path at every use), and never
printed back. Each `--project` (which must exist) may then use the cluster, as with
`manage.py allow_cluster`. `--prometheus-url` names the Prometheus that scrapes the cluster's
DCGM exporter (GPU utilisation, docs/usage.md); without it the stored one is kept, and `""`
clears it (TRAINYARD_PROMETHEUS_URL then applies).
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug

from console import audit
from console.kubeconfig import (
    MAX_BYTES,
    KubeconfigRejected,
    server_of,
    speaks_plain_http,
    validate_kubeconfig,
)
from console.management.commands.allow_cluster import allow
from console.management.names import project_named
from console.models import Cluster, validate_http_url

VIA = "manage.py add_cluster"


class Command(BaseCommand):
    help = "Register a data-plane cluster from a kubeconfig (or update the one of that name)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="the cluster's name in the console (a slug)")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--kubeconfig", type=Path, help="the kubeconfig file, stored encrypted")
        source.add_argument(
            "--kubeconfig-path",
            type=Path,
            help="an absolute path, read at every use (e.g. a Kubernetes Secret mounted there)",
        )
        parser.add_argument(
            "--insecure",
            action="store_true",
            help="allow insecure-skip-tls-verify (the Clusters page shows the cluster as such)",
        )
        parser.add_argument("--context", default="", help="the context (default: current-context)")
        parser.add_argument("--namespace", default="", help="default namespace for new jobs")
        parser.add_argument(
            "--prometheus-url",
            default=None,
            help="the Prometheus scraping the cluster's DCGM exporter, for GPU utilisation",
        )
        parser.add_argument(
            "--project",
            action="append",
            default=[],
            dest="projects",
            metavar="PROJECT",
            help="a project whose Jobs may run on the cluster (repeat for more)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["name"]
        try:
            validate_slug(name)
        except ValidationError:
            raise CommandError(
                f"{name!r} is not a valid cluster name (letters, digits, - and _)."
            ) from None
        projects = [project_named(project) for project in options["projects"]]
        reference = options["kubeconfig_path"]
        text = _read(Path(reference or options["kubeconfig"]))
        try:
            if reference and not Path(reference).is_absolute():
                raise KubeconfigRejected(
                    f"The kubeconfig path {str(reference)!r} must be absolute."
                )
            config = validate_kubeconfig(text, options["context"], insecure=options["insecure"])
            server = server_of(text, options["context"])
        except KubeconfigRejected as error:
            raise CommandError(str(error)) from None
        context = options["context"] or config["current-context"]
        # A plain http:// server in the operator's own kubeconfig is their word, as --insecure
        # is: accepted, and the cluster shown insecure (docs/decisions.md, "Plain http").
        insecure = options["insecure"] or speaks_plain_http(text, options["context"])
        namespace = options["namespace"] or _context_namespace(config, context) or "default"
        source = (
            {"kubeconfig_path": str(reference), "kubeconfig": ""}
            if reference
            else {"kubeconfig": text, "kubeconfig_path": ""}
        )
        fields = {
            **source, "context": context, "namespace": namespace, "insecure": insecure,
        }  # fmt: skip
        if options["prometheus_url"] is not None:
            fields["prometheus_url"] = _prometheus_url(options["prometheus_url"])
        cluster, verb = _registered(name, fields)
        facts = f"server {server}, context {context}, default namespace {namespace}"
        facts += ", insecure (TLS not verified)" if insecure else ""
        if verb:
            self.stdout.write(f"{verb} cluster {cluster.name}: {facts}.")
        else:
            self.stdout.write(
                f"Cluster {cluster.name} is registered so ({facts}): nothing changed."
            )
        for project in projects:
            for line in allow(project, [cluster], VIA):
                self.stdout.write(line)


def _registered(name: str, fields: dict[str, Any]) -> tuple[Cluster, str]:
    """The cluster with these fields, and what was done ("" for nothing): a change is audited,
    no change is not."""
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is not None and all(getattr(cluster, key) == value for key, value in fields.items()):
        return cluster, ""
    cluster, created = Cluster.objects.update_or_create(name=name, defaults=fields)
    action = audit.Action.CLUSTER_CREATE if created else audit.Action.CLUSTER_CHANGE
    audit.record(action, target=f"cluster {name}", detail=VIA)
    return cluster, "Registered" if created else "Updated"


def _prometheus_url(value: str) -> str:
    """An http(s) URL, or "" to clear it."""
    if not value:
        return ""
    try:
        validate_http_url(value)
    except ValidationError:
        raise CommandError(f"--prometheus-url {value!r} is not an http(s) URL.") from None
    return value.rstrip("/")


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_BYTES:
            raise CommandError("The kubeconfig is larger than 256 KiB.")
        return path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"Cannot read {path}: {type(error).__name__}.") from None


def _context_namespace(config: dict[str, Any], context: str) -> str:
    for entry in config.get("contexts") or ():
        if isinstance(entry, dict) and entry.get("name") == context:
            return str((entry.get("context") or {}).get("namespace") or "")
    return ""
