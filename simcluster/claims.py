"""PersistentVolumeClaims as a cluster with one dynamic provisioner serves them: validation, the
DefaultStorageClass admission, binding at once to a provisioned volume, and what the scheduler's
VolumeBinding plugin says about a pod whose claim is missing or unbound.

There are no PersistentVolume or StorageClass objects: the one class, `standard`, is the default
(as in kind), its binding mode is Immediate, and a claim naming any other class stays Pending."""

from __future__ import annotations

from typing import Any

import orjson

from simcluster.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

DEFAULT_CLASS = "standard"
PROVISIONER = "rancher.io/local-path"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")


def check_claim(claim: Obj) -> Causes:
    """kube-apiserver's ValidatePersistentVolumeClaimSpec, for the fields callers set."""
    spec = claim.get("spec") or {}
    modes = spec.get("accessModes") or []
    causes: Causes = []
    if not modes:
        causes.append(("spec.accessModes", "Required value: at least 1 access mode is required"))
    for mode in modes:
        if mode not in ACCESS_MODES:
            supported = ", ".join(orjson.dumps(m).decode() for m in ACCESS_MODES)
            causes.append(
                (
                    "spec.accessModes",
                    f"Unsupported value: {orjson.dumps(mode).decode()}: "
                    f"supported values: {supported}",
                )
            )
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if storage is None:
        return [*causes, ("spec.resources[storage]", "Required value")]
    try:
        if parse_quantity(storage) <= 0:
            raise QuantityError("must be greater than zero")
    except QuantityError as error:
        quoted = orjson.dumps(storage).decode()
        causes.append(("spec.resources[storage]", f"Invalid value: {quoted}: {error}"))
    return causes


def admit_claim(claim: Obj) -> None:
    """Defaults, then the provisioner's work: a claim of the default class is Bound at once to a
    volume named after its uid; another class does not exist, so the claim stays Pending."""
    spec = claim.setdefault("spec", {})
    spec.setdefault("storageClassName", DEFAULT_CLASS)
    spec.setdefault("volumeMode", "Filesystem")
    if spec["storageClassName"] != DEFAULT_CLASS:
        claim["status"] = {"phase": "Pending"}
        return
    spec["volumeName"] = f"pvc-{claim['metadata']['uid']}"
    claim["metadata"].setdefault("annotations", {}).update(
        {
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.beta.kubernetes.io/storage-provisioner": PROVISIONER,
            "volume.kubernetes.io/storage-provisioner": PROVISIONER,
        }
    )
    claim["status"] = {
        "phase": "Bound",
        "accessModes": list(spec["accessModes"]),
        "capacity": {"storage": spec["resources"]["requests"]["storage"]},
    }


def provisioning_failure(claim: Obj) -> str:
    """The persistentvolume-controller's ProvisioningFailed message for a claim left Pending."""
    name = claim["spec"].get("storageClassName")
    return "" if name == DEFAULT_CLASS else f'storageclass.storage.k8s.io "{name}" not found'


def claim_names(pod_spec: Obj) -> list[str]:
    return [
        volume["persistentVolumeClaim"].get("claimName", "")
        for volume in pod_spec.get("volumes") or ()
        if isinstance(volume.get("persistentVolumeClaim"), dict)
    ]
