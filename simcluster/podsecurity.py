"""Pod Security admission, as kube-apiserver runs it on every pod create: a namespace labelled
`pod-security.kubernetes.io/enforce: baseline` or `restricted` refuses a pod that breaks that
level of the Pod Security Standards, with the API server's own 403 message:

    pods "train-worker-0" is forbidden: violates PodSecurity "restricted:latest":
    allowPrivilegeEscalation != false (container "main" must set
    securityContext.allowPrivilegeEscalation=false), ...

A workload controller (StatefulSet, Job) gets that answer when it creates the pod and records it
as a FailedCreate event. The checks here are those of the standards' current version; `warn` and
`audit` labels have no effect (simcluster has no warnings header nor audit log).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Obj = dict[str, Any]

ENFORCE = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
LEVELS = ("privileged", "baseline", "restricted")
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip


def violation(namespace_labels: dict[str, str], pod: Obj) -> str | None:
    """The 403 message for a pod the namespace's enforced level refuses, or None."""
    level = namespace_labels.get(ENFORCE, "privileged")
    if level not in ("baseline", "restricted"):
        return None
    spec = pod.get("spec") or {}
    broken = _baseline(spec) + (_restricted(spec) if level == "restricted" else [])
    if not broken:
        return None
    version = namespace_labels.get(ENFORCE_VERSION, "latest")
    name = (pod.get("metadata") or {}).get("name", "")
    return f'pods "{name}" is forbidden: violates PodSecurity "{level}:{version}": ' + ", ".join(
        broken
    )


def _containers(spec: Obj) -> list[Obj]:
    return [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]


def _context(container: Obj) -> Obj:
    return container.get("securityContext") or {}


def _names(containers: Iterable[Obj]) -> str:
    """`container "a"` or `containers "a", "b"`, as the API server words them."""
    quoted = [f'"{c.get("name", "")}"' for c in containers]
    return ("container " if len(quoted) == 1 else "containers ") + ", ".join(quoted)


def _baseline(spec: Obj) -> list[str]:
    broken = []
    hosts = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    if hosts:
        broken.append(f"host namespaces ({', '.join(hosts)})")
    privileged = [c for c in _containers(spec) if _context(c).get("privileged")]
    if privileged:
        broken.append(
            f"privileged ({_names(privileged)} must not set securityContext.privileged=true)"
        )
    added = [
        (c, cap)
        for c in _containers(spec)
        for cap in (_context(c).get("capabilities") or {}).get("add") or ()
        if cap not in BASELINE_CAPABILITIES
    ]
    if added:
        parts = [f'{_names([c])} must not include "{cap}"' for c, cap in added]
        broken.append(
            f"non-default capabilities ({', '.join(parts)} in securityContext.capabilities.add)"
        )
    host_paths = [v.get("name", "") for v in spec.get("volumes") or () if "hostPath" in v]
    if host_paths:
        broken.append(f"hostPath volumes ({_volumes(host_paths)})")
    ports = [
        (c, port["hostPort"])
        for c in _containers(spec)
        for port in c.get("ports") or ()
        if port.get("hostPort")
    ]
    if ports:
        broken.append(
            "hostPort (" + ", ".join(f"{_names([c])} uses hostPort {p}" for c, p in ports) + ")"
        )
    return broken


def _volumes(names: list[str]) -> str:
    return ("volume " if len(names) == 1 else "volumes ") + ", ".join(f'"{n}"' for n in names)


def _restricted(spec: Obj) -> list[str]:
    broken = []
    odd = [
        (v.get("name", ""), kind)
        for v in spec.get("volumes") or ()
        for kind in v
        if kind != "name" and kind not in RESTRICTED_VOLUMES and kind != "hostPath"
    ]
    if odd:
        parts = [f'volume "{name}" uses restricted volume type "{kind}"' for name, kind in odd]
        broken.append(f"restricted volume types ({', '.join(parts)})")
    containers = _containers(spec)
    escalating = [c for c in containers if _context(c).get("allowPrivilegeEscalation") is not False]
    if escalating:
        broken.append(
            f"allowPrivilegeEscalation != false ({_names(escalating)} must set "
            "securityContext.allowPrivilegeEscalation=false)"
        )
    undropped = [c for c in containers if "ALL" not in _capabilities(c, "drop")]
    parts = [f'{_names(undropped)} must set securityContext.capabilities.drop=["ALL"]'] * bool(
        undropped
    )
    parts += [
        f'{_names([c])} must not include "{cap}" in securityContext.capabilities.add'
        for c in containers
        for cap in _capabilities(c, "add")
        if cap != "NET_BIND_SERVICE"
    ]
    if parts:
        broken.append(f"unrestricted capabilities ({'; '.join(parts)})")
    pod = spec.get("securityContext") or {}
    parts = ["pod must not set securityContext.runAsNonRoot=false"] * (
        pod.get("runAsNonRoot") is False
    )
    if denied := [c for c in containers if _context(c).get("runAsNonRoot") is False]:
        parts.append(f"{_names(denied)} must not set securityContext.runAsNonRoot=false")
    unset = [c for c in containers if _context(c).get("runAsNonRoot") is None]
    if pod.get("runAsNonRoot") is not True and unset:
        parts.append(f"pod or {_names(unset)} must set securityContext.runAsNonRoot=true")
    if parts:
        broken.append(f"runAsNonRoot != true ({'; '.join(parts)})")
    if pod.get("runAsUser") == 0:
        broken.append("runAsUser=0 (pod must not set runAsUser=0)")
    root = [c for c in containers if _context(c).get("runAsUser") == 0]
    if root:
        broken.append(f"runAsUser=0 ({_names(root)} must not set runAsUser=0)")
    if not _seccomp_ok(pod):
        unset = [c for c in containers if not _seccomp_ok(_context(c))]
        if unset:
            broken.append(
                f"seccompProfile (pod or {_names(unset)} must set "
                'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
            )
    return broken


def _capabilities(container: Obj, which: str) -> list[str]:
    return list((_context(container).get("capabilities") or {}).get(which) or ())


def _seccomp_ok(context: Obj) -> bool:
    return (context.get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost")
