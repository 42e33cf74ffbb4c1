"""`manage.py add_cluster NAME --kubeconfig FILE [--context CTX] [--namespace NS]`
(or `--kubeconfig-path FILE` to keep a reference to the file instead of its content;
`--insecure` to allow a kubeconfig that skips TLS verification).

Registers a cluster, or updates the one of that name. The kubeconfig is validated first (nothing
that runs code or reads files on this host, no proxy, TLS verified unless --insecure, at most
256 KiB), stored encrypted (or read from its path at every use), and never printed back.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug

from console import audit
from console.kubeconfig import MAX_BYTES, KubeconfigRejected, server_of, validate_kubeconfig
from console.models import Cluster


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

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["name"]
        try:
            validate_slug(name)
        except ValidationError:
            raise CommandError(
                f"{name!r} is not a valid cluster name (letters, digits, - and _)."
            ) from None
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
        namespace = options["namespace"] or _context_namespace(config, context) or "default"
        source = (
            {"kubeconfig_path": str(reference), "kubeconfig": ""}
            if reference
            else {"kubeconfig": text, "kubeconfig_path": ""}
        )
        cluster, created = Cluster.objects.update_or_create(
            name=name,
            defaults={
                **source, "context": context, "namespace": namespace,
                "insecure": options["insecure"],
            },
        )  # fmt: skip
        action = audit.Action.CLUSTER_CREATE if created else audit.Action.CLUSTER_CHANGE
        audit.record(action, target=f"cluster {name}", detail="manage.py add_cluster")
        verb = "Registered" if created else "Updated"
        self.stdout.write(
            f"{verb} cluster {cluster.name}: server {server}, context {context}, "
            f"default namespace {namespace}."
        )


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
