"""A registry add-on's manifests (issue 36, Build 3): YAML read like a job's (no aliases,
bounded size and nesting: console.yaml_input), one object or a list of them (or a `List`),
only apps/v1 Deployments and DaemonSets, placed in the add-on's namespace and labelled as
the console's. Pure: text in, objects out."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from console.yaml_input import YamlRefused, load_yaml

MAX_BYTES = 256 * 1024
MAX_NODES = 20_000
KINDS = ("Deployment", "DaemonSet")
MANAGED_LABEL = "trainyard.io/managed-addon"


class ManifestRefused(ValueError):
    pass


def _objects(document: Any) -> list[Any]:
    if isinstance(document, dict) and document.get("kind") == "List":
        return list(document.get("items") or [])
    return list(document) if isinstance(document, list) else [document]


def _checked(obj: Any, addon: str, namespace: str) -> dict[str, Any]:
    if not isinstance(obj, dict) or obj.get("apiVersion") != "apps/v1":
        raise ManifestRefused(_("Each object must be an apps/v1 Deployment or DaemonSet."))
    if obj.get("kind") not in KINDS:
        raise ManifestRefused(_("Each object must be an apps/v1 Deployment or DaemonSet."))
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ManifestRefused(_("Each object needs metadata.name."))
    if meta.get("namespace") not in (None, namespace):
        raise ManifestRefused(
            _("%(name)s names another namespace than the add-on's (%(namespace)s).")
            % {"name": meta["name"], "namespace": namespace}
        )
    found = meta.get("labels")
    labels: dict[str, Any] = found if isinstance(found, dict) else {}
    metadata = {**meta, "namespace": namespace, "labels": {**labels, MANAGED_LABEL: addon}}
    return {**obj, "metadata": metadata}


def parse_manifest(text: str, addon: str, namespace: str) -> list[dict[str, Any]]:
    try:
        document = load_yaml(text, _("manifest"), MAX_BYTES, MAX_NODES)
    except YamlRefused as refused:
        raise ManifestRefused(str(refused)) from None
    objects = [_checked(obj, addon, namespace) for obj in _objects(document)]
    if not objects:
        raise ManifestRefused(_("The manifest holds no object."))
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    if len(set(names)) != len(names):
        raise ManifestRefused(_("The manifest names the same object twice."))
    return objects
