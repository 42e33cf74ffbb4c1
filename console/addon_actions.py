"""An operator's actions on a cluster's add-on registry (issue 36, Build 3): register an add-on
(name, namespace, manifests per version, desired version), add versions, change the desired
version (an install or upgrade attempt), roll back to the previous version. The pages and the
API call these; they reach the engine only through here (`console.engine.addons`).
Operator-only and audited, refused ones too.

An install, upgrade or rollback is refused (403) while the console's credentials on the cluster
lack server-side apply of the version's kinds in the add-on's namespace (the last permission
check, `console.permissions.addon_missing`), and every action on a retired cluster (409).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _

from console import audit, permissions
from console.addon_manifests import ManifestRefused, parse_manifest
from console.cluster_actions import check_not_retired
from console.engine import addons as engine
from console.models import Addon, AddonAttempt, AddonVersion, AuditEvent, Cluster
from console.node_actions import ActionRefused, check_operator
from jobs.access import User

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # a DNS label, as Kubernetes names
SHOWN = 10  # attempts and transitions in an answer
Kind = AddonAttempt.Kind


def _refused(field: str, message: str, status: int = 422) -> ActionRefused:
    return ActionRefused(status, message, errors={field: message})


def _versions(body: Mapping[str, Any], name: str, namespace: str) -> dict[str, str]:
    versions = body.get("versions", {})
    if not isinstance(versions, dict) or not all(
        isinstance(k, str) and k and len(k) <= 128 and isinstance(v, str)
        for k, v in versions.items()
    ):
        raise _refused("versions", _("versions maps each version to its manifest YAML."))
    for version, text in versions.items():
        try:
            parse_manifest(text, name, namespace)
        except ManifestRefused as error:
            raise _refused(f"versions.{version}", str(error)) from None
    return versions


def registry(user: User, cluster: Cluster) -> list[Addon]:
    check_operator(user)
    return list(cluster.addons.filter(managed=True).order_by("name"))


def addon_of(user: User, cluster: Cluster, name: str) -> Addon:
    check_operator(user)
    addon = cluster.addons.filter(managed=True, name=name).first()
    if addon is None:
        raise ActionRefused(404, _("No add-on %(name)s is registered here.") % {"name": name})
    return addon


def create_addon(
    user: User, cluster: Cluster, body: Mapping[str, Any], request: HttpRequest | None = None
) -> Addon:
    check_operator(user)
    with _refusals(request, user, f"{cluster.name}/{body.get('name')}"):
        name, namespace, versions, desired = _new_addon(cluster, body)
        asked = (
            namespace == permissions.ADDON_NAMESPACE
            or cluster.addons.filter(managed=True, namespace=namespace).exists()
        )
        with transaction.atomic():
            addon = Addon.objects.create(
                cluster=cluster, name=name, namespace=namespace, managed=True,
                desired_version=desired, phase=Addon.Phase.PENDING, message="never applied",
            )  # fmt: skip
            AddonVersion.objects.bulk_create(
                AddonVersion(addon=addon, version=v, manifest=t) for v, t in versions.items()
            )
            _audit(request, user, AuditEvent.Action.ADDON_CHANGE, addon, "registered")
            if desired:
                _start(user, addon, desired, request)
            if not asked:  # a namespace no permission check asked about yet
                _ask_access_again(cluster)
    return addon


def _new_addon(cluster: Cluster, body: Mapping[str, Any]) -> tuple[str, str, dict[str, str], str]:
    """A new add-on's name, namespace, versions and desired version, checked."""
    check_not_retired(cluster)
    name, namespace = body.get("name"), body.get("namespace", permissions.ADDON_NAMESPACE)
    if not isinstance(name, str) or not NAME.match(name):
        raise _refused("name", _("An add-on's name is a DNS label (a-z, 0-9 and -)."))
    if not isinstance(namespace, str) or not NAME.match(namespace):
        raise _refused("namespace", _("The namespace is a DNS label (a-z, 0-9 and -)."))
    if cluster.addons.filter(name=name).exists():
        raise ActionRefused(409, _("An add-on named %(name)s exists already.") % {"name": name})
    versions = _versions(body, name, namespace)
    desired = body.get("desired_version", "")
    if desired and desired not in versions:
        raise _refused("desired_version", _("The desired version must be one of versions."))
    return name, namespace, versions, desired or ""


def change_addon(
    user: User, addon: Addon, body: Mapping[str, Any], request: HttpRequest | None = None
) -> Addon:
    """New versions are added (a version's manifest never changes once given: 409); a new
    desired version starts an install or upgrade attempt."""
    check_operator(user)
    with _refusals(request, user, _target(addon)):
        check_not_retired(addon.cluster)
        versions = _versions(body, addon.name, addon.namespace)
        known = dict(addon.versions.values_list("version", "manifest"))
        for version, text in versions.items():
            if version in known and known[version] != text:
                raise _refused(f"versions.{version}", _("Version %(v)s exists with another "
                               "manifest.") % {"v": version}, 409)  # fmt: skip
        desired = body.get("desired_version", addon.desired_version)
        if not isinstance(desired, str) or (desired and desired not in {*known, *versions}):
            raise _refused("desired_version", _("The desired version must be one of versions."))
        with transaction.atomic():
            AddonVersion.objects.bulk_create(
                AddonVersion(addon=addon, version=v, manifest=t)
                for v, t in versions.items() if v not in known
            )  # fmt: skip
            if desired != addon.desired_version:
                _start(user, addon, desired, request)
    addon.refresh_from_db()
    return addon


def rollback(user: User, addon: Addon, request: HttpRequest | None = None) -> Addon:
    """Back to the version applied before the current one."""
    check_operator(user)
    with _refusals(request, user, _target(addon)):
        check_not_retired(addon.cluster)
        current = addon.attempts.filter(applied=True, to_version=addon.applied_version).first()
        previous = current.from_version if current else ""
        if not previous:
            raise ActionRefused(409, _("There is no previous version to roll back to."))
        with transaction.atomic():
            _start(user, addon, previous, request, Kind.ROLLBACK)
    addon.refresh_from_db()
    return addon


def kinds_of(addon: Addon, version: str | None = None) -> set[str]:
    """The kinds the add-on's manifests hold: of one version, or of every version."""
    manifests = addon.versions.all()
    if version is not None:
        manifests = manifests.filter(version=version)
    return {
        obj["kind"]
        for text in manifests.values_list("manifest", flat=True)
        for obj in parse_manifest(text, addon.name, addon.namespace)
    }


def missing(addon: Addon, version: str | None = None) -> list[str]:
    """The permissions an apply of the add-on (one version, or any) lacks, by the last check."""
    kinds = kinds_of(addon, version)
    return permissions.addon_missing(addon.namespace, kinds, addon.cluster.access)


def missing_to_install(cluster: Cluster, namespace: str = permissions.ADDON_NAMESPACE) -> list[str]:
    """What an install of a new add-on in `namespace` would lack (its kinds unknown yet: a
    Deployment, the kind every add-on page asks for)."""
    return permissions.addon_missing(namespace, ("Deployment",), cluster.access)


def _lacks(addon: Addon, version: str) -> ActionRefused | None:
    lacking = missing(addon, version)
    if not lacking:
        return None
    message = _("The console's credentials on cluster %(cluster)s lack %(missing)s: the "
                "add-on cannot be applied.") % {"cluster": addon.cluster.name,
                                               "missing": ", ".join(lacking)}  # fmt: skip
    return ActionRefused(403, message, missing=lacking)


@contextmanager
def _refusals(request: HttpRequest | None, user: User, target: str) -> Iterator[None]:
    """A refused action is audited as such (after its transaction rolled back), then raised."""
    try:
        yield
    except ActionRefused as refused:
        audit.record(AuditEvent.Action.ADDON_CHANGE, user=user, request=request, target=target,
                     result=AuditEvent.Result.REFUSED, detail=refused.message)  # fmt: skip
        raise


def _ask_access_again(cluster: Cluster) -> None:
    from console import tasks

    transaction.on_commit(lambda: tasks.check_access.delay(cluster.pk), robust=True)


def _start(
    user: User, addon: Addon, version: str, request: HttpRequest | None, kind: str = ""
) -> AddonAttempt:
    from console import tasks

    check_not_retired(addon.cluster)
    latest = engine.attempt_facts(addon.attempts.first(), timezone.now())
    if latest is not None and latest.running and not latest.lease_expired:
        raise ActionRefused(409, _("An attempt on this add-on is running: wait for its end."))
    lacking = _lacks(addon, version)
    if lacking is not None:
        raise lacking
    kind = kind or (Kind.UPGRADE if addon.applied_version else Kind.INSTALL)
    Addon.objects.filter(pk=addon.pk).update(desired_version=version)
    attempt = AddonAttempt.objects.create(
        addon=addon, kind=kind, from_version=addon.applied_version, to_version=version,
        requested_by_name=user.get_username(),
    )  # fmt: skip
    action = (
        AuditEvent.Action.ADDON_ROLLBACK if kind == Kind.ROLLBACK else AuditEvent.Action.ADDON_APPLY
    )
    _audit(request, user, action, addon, f"{kind} {addon.applied_version or '-'} -> {version}",
           AuditEvent.Result.ACCEPTED)  # fmt: skip
    transaction.on_commit(lambda: tasks.apply_addon.delay(attempt.pk), robust=True)
    return attempt


def _audit(
    request: HttpRequest | None, user: User, action: AuditEvent.Action, addon: Addon,
    detail: str, result: AuditEvent.Result = AuditEvent.Result.SUCCEEDED,
) -> None:  # fmt: skip
    audit.record(action, user=user, request=request, target=_target(addon), result=result,
                 detail=detail)  # fmt: skip


def _target(addon: Addon) -> str:
    return f"{addon.cluster.name}/{addon.name}"


def addon_json(addon: Addon) -> dict[str, Any]:
    """The add-on with its derived phase and reason, its versions, workloads, last attempts
    and last transitions (issue 36's answer)."""
    addon.refresh_from_db()
    phase, reason = engine.phase_of(addon, timezone.now())
    attempts = [
        {"kind": a.kind, "from_version": a.from_version, "to_version": a.to_version,
         "requested_by": a.requested_by_name, "started_at": a.started_at,
         "finished_at": a.finished_at, "outcome": a.outcome, "answer": a.answer,
         "reason": a.reason,
         # For the page, in the reader's language (the API's schema leaves them out).
         "kind_label": a.get_kind_display(), "outcome_label": a.get_outcome_display()}
        for a in addon.attempts.all()[:SHOWN]
    ]  # fmt: skip
    transitions = [
        {"phase": t.phase, "reason": t.reason, "at": t.at} for t in addon.transitions.all()[:SHOWN]
    ]
    return {
        "name": addon.name, "namespace": addon.namespace, "phase": phase, "reason": reason,
        "message": addon.message, "desired_version": addon.desired_version,
        "applied_version": addon.applied_version,
        "versions": list(addon.versions.values_list("version", flat=True)),
        "workloads": addon.rollout, "attempts": attempts, "transitions": transitions,
    }  # fmt: skip
