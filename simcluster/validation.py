"""Create/update validation with kube-apiserver's field paths and messages (422 Invalid)."""

from __future__ import annotations

import re
from typing import Any

import orjson

from simcluster.downward import check_env
from simcluster.quantity import QuantityError, parse_quantity
from simcluster.selectors import Requirement, SelectorError, matches, selector_from_label_selector

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1035 = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    f"for validation is '{_SUBDOMAIN}')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    f"for validation is '{_LABEL}')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    f"regex used for validation is '{_DNS1035}')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    f"'12345', regex used for validation is '{_LABEL_VALUE}')"
)

NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character"
)
STATEFULSET_FORBIDDEN = (
    "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
    "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' "
    "are forbidden"
)
POD_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
    "to 1 if it was previously negative)"
)

# Which name rule each resource's metadata.name follows.
NAME_RULES = {"namespaces": "label", "services": "dns1035"}


def _quote(value: Any) -> str:
    return orjson.dumps(value).decode()


def check_name(resource: str, name: str, field: str = "metadata.name") -> Causes:
    rule = NAME_RULES.get(resource, "subdomain")
    pattern, message, limit = {
        "label": (_LABEL, LABEL_MSG, 63),
        "dns1035": (_DNS1035, DNS1035_MSG, 63),
        "subdomain": (_SUBDOMAIN, SUBDOMAIN_MSG, 253),
    }[rule]
    causes: Causes = []
    if len(name) > limit:
        causes.append(
            (field, f"Invalid value: {_quote(name)}: must be no more than {limit} characters")
        )
    if not re.fullmatch(pattern, name):
        causes.append((field, f"Invalid value: {_quote(name)}: {message}"))
    return causes


def check_labels(labels: Any, field: str) -> Causes:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [(field, f"Invalid value: {_quote(labels)}: must be a map of strings")]
    causes: Causes = []
    for key, value in labels.items():
        name = key.rsplit("/", 1)[-1]
        if len(name) > 63 or not re.fullmatch(_QUALIFIED_NAME, name):
            causes.append(
                (
                    field,
                    f"Invalid value: {_quote(key)}: {NAME_PART_MSG}",
                )
            )
        if not isinstance(value, str) or len(value) > 63 or not re.fullmatch(_LABEL_VALUE, value):
            causes.append((field, f"Invalid value: {_quote(value)}: {LABEL_VALUE_MSG}"))
    return causes


def check_metadata(resource: str, obj: Obj) -> Causes:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    causes = (
        check_name(resource, name)
        if name
        else [("metadata.name", "Required value: name or generateName is required")]
    )
    causes += check_labels(meta.get("labels"), "metadata.labels")
    return causes


def check_pod_spec(spec: Any, field: str, restart_policies: tuple[str, ...]) -> Causes:
    if not isinstance(spec, dict):
        return [(field, "Required value")]
    containers = spec.get("containers")
    if not containers:
        return [(f"{field}.containers", "Required value")]
    causes, volumes = _check_volumes(spec.get("volumes") or [], f"{field}.volumes")
    seen: set[str] = set()
    for index, container in enumerate(containers):
        where = f"{field}.containers[{index}]"
        causes += _check_container(container, where, seen)
        causes += _check_mounts(
            container.get("volumeMounts") or [], f"{where}.volumeMounts", volumes
        )
    policy = spec.get("restartPolicy", "Always")
    if policy not in restart_policies:
        supported = ", ".join(_quote(p) for p in restart_policies)
        causes.append(
            (
                f"{field}.restartPolicy",
                f"Unsupported value: {_quote(policy)}: supported values: {supported}",
            )
        )
    return causes


VOLUME_SOURCES = (
    "emptyDir", "persistentVolumeClaim", "configMap", "secret", "projected", "downwardAPI",
    "hostPath", "csi", "ephemeral", "nfs", "image",
)  # fmt: skip


def _check_volumes(volumes: list[Obj], field: str) -> tuple[Causes, set[str]]:
    """Names unique DNS labels, one source each, a claim's name, a sizeLimit that parses."""
    causes: Causes = []
    names: set[str] = set()
    for index, volume in enumerate(volumes):
        where, name = f"{field}[{index}]", volume.get("name") or ""
        if not name:
            causes.append((f"{where}.name", "Required value"))
        elif name in names:
            causes.append((f"{where}.name", f"Duplicate value: {_quote(name)}"))
        else:
            causes += check_name("namespaces", name, f"{where}.name")
        names.add(name)
        sources = [key for key in VOLUME_SOURCES if key in volume]
        if not sources:
            causes.append((where, "Required value: must specify a volume type"))
        elif len(sources) > 1:
            causes.append(
                (f"{where}.{sources[1]}", "Forbidden: may not specify more than 1 volume type")
            )
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict) and not claim.get("claimName"):
            causes.append((f"{where}.persistentVolumeClaim.claimName", "Required value"))
        size = (volume.get("emptyDir") or {}).get("sizeLimit")
        if size is not None:
            causes += _quantity(size, f"{where}.emptyDir.sizeLimit")
    return causes, names


def _quantity(value: Any, field: str) -> Causes:
    try:
        if parse_quantity(value) < 0:
            raise QuantityError("must be greater than or equal to 0")
    except QuantityError as error:
        return [(field, f"Invalid value: {_quote(value)}: {error}")]
    return []


def _check_mounts(mounts: list[Obj], field: str, volumes: set[str]) -> Causes:
    """Each mount names a volume of the pod, at a unique path; a subPath stays inside it."""
    causes: Causes = []
    paths: set[str] = set()
    for index, mount in enumerate(mounts):
        where, name, path = f"{field}[{index}]", mount.get("name") or "", mount.get("mountPath")
        if not name:
            causes.append((f"{where}.name", "Required value"))
        elif name not in volumes:
            causes.append((f"{where}.name", f"Not found: {_quote(name)}"))
        if not path:
            causes.append((f"{where}.mountPath", "Required value"))
        elif path in paths:
            causes.append((f"{where}.mountPath", f"Invalid value: {_quote(path)}: must be unique"))
        paths.add(path or "")
        sub_path = mount.get("subPath") or ""
        if sub_path.startswith("/"):
            causes.append(
                (f"{where}.subPath", f"Invalid value: {_quote(sub_path)}: must be a relative path")
            )
        elif ".." in sub_path.split("/"):
            causes.append(
                (f"{where}.subPath", f"Invalid value: {_quote(sub_path)}: must not contain '..'")
            )
    return causes


def _check_container(container: Obj, field: str, seen: set[str]) -> Causes:
    name = container.get("name") or ""
    if not name:
        return [(f"{field}.name", "Required value")]
    causes = check_name("namespaces", name, f"{field}.name")
    if name in seen:
        causes.append((f"{field}.name", f"Duplicate value: {_quote(name)}"))
    seen.add(name)
    if not container.get("image"):
        causes.append((f"{field}.image", "Required value"))
    causes += check_env(container.get("env"), field)
    resources = container.get("resources") or {}
    for section in ("requests", "limits"):
        for resource_name, value in (resources.get(section) or {}).items():
            causes += _quantity(value, f"{field}.resources.{section}[{resource_name}]")
    return causes


def check_non_negative(value: Any, field: str) -> Causes:
    if value is None:
        return []
    if not isinstance(value, int) or value < 0:
        return [(field, f"Invalid value: {_quote(value)}: must be greater than or equal to 0")]
    return []


def check_selector_matches(spec: Obj) -> Causes:
    """apps/v1 workloads need a non-empty selector that selects their own template."""
    selector = spec.get("selector")
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return [("spec.selector", "Required value")]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    try:
        requirements: tuple[Requirement, ...] = selector_from_label_selector(selector)
    except (SelectorError, KeyError) as error:
        return [("spec.selector", f"Invalid value: {_quote(selector)}: {error}")]
    if not matches(requirements, labels):
        shown = (
            "map[string]string{"
            + ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
            + "}"
        )
        return [
            (
                "spec.template.metadata.labels",
                f"Invalid value: {shown}: `selector` does not match template `labels`",
            )
        ]
    return []


def check_workload(resource: str, obj: Obj) -> Causes:
    """Spec rules for the apps/v1 and batch/v1 kinds simcluster runs."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "Required value")]
    template = spec.get("template") or {}
    if resource == "jobs":
        causes = check_pod_spec(template.get("spec"), "spec.template.spec", ("OnFailure", "Never"))
        for name in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
            causes += check_non_negative(spec.get(name), f"spec.{name}")
        return causes
    causes = check_pod_spec(template.get("spec"), "spec.template.spec", ("Always",))
    causes += check_labels(
        (template.get("metadata") or {}).get("labels"), "spec.template.metadata.labels"
    )
    causes += check_selector_matches(spec)
    if resource != "daemonsets":
        causes += check_non_negative(spec.get("replicas"), "spec.replicas")
    return causes


STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def check_update(resource: str, old: Obj, new: Obj) -> Causes:
    """The immutable-field rules callers trip over most."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if resource == "statefulsets":
        frozen = {k: v for k, v in old_spec.items() if k not in STATEFULSET_MUTABLE}
        changed = {k: v for k, v in new_spec.items() if k not in STATEFULSET_MUTABLE}
        if frozen != changed:
            return [
                (
                    "spec",
                    STATEFULSET_FORBIDDEN,
                )
            ]
    workloads = ("deployments", "daemonsets", "replicasets", "statefulsets", "jobs")
    if resource in workloads and old_spec.get("selector") != new_spec.get("selector"):
        return [
            (
                "spec.selector",
                f"Invalid value: {_quote(new_spec.get('selector'))}: field is immutable",
            )
        ]
    if resource == "jobs" and old_spec.get("template") != new_spec.get("template"):
        return [
            (
                "spec.template",
                f"Invalid value: {_quote(new_spec.get('template'))}: field is immutable",
            )
        ]
    if resource == "pods":
        return _check_pod_update(old_spec, new_spec)
    return []


def _check_pod_update(old_spec: Obj, new_spec: Obj) -> Causes:
    """Pods allow changing images, activeDeadlineSeconds and adding tolerations; nothing else."""

    def comparable(spec: Obj) -> Obj:
        copy = orjson.loads(orjson.dumps(spec))
        for container in copy.get("containers") or []:
            container.pop("image", None)
        copy.pop("activeDeadlineSeconds", None)
        copy.pop("tolerations", None)
        return copy

    if comparable(old_spec) != comparable(new_spec):
        return [
            (
                "spec",
                POD_FORBIDDEN,
            )
        ]
    return []
