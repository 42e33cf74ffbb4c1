"""A registry add-on's attempts and rollout, against the cluster (issue 36, Build 3).

`advance_attempt` is one pass of an install, upgrade or rollback: the first applies the
version's manifests by server-side apply (field manager `trainyard`) and records the answer;
each later one reads the workloads back (and their pods, for crash loops), stores the rollout,
derives the phase (jobs.status.addons), records a transition on a real change, and ends the
attempt once the add-on is Ready or Failed. A pass runs only while the attempt's lease is held
and renews it; a worker that dies leaves a lease that runs out, and the add-on then reads
Failed, never Installing for ever: the attempt's row is closed failed with that reason by the
next look at it (a late pass, or the beat's `observe_addons`, which also keeps the rollout of
settled add-ons fresh so that a Ready add-on losing availability says so).

An attempt has a deadline (ATTEMPT_SECONDS) whether its cluster answers or not: passes that
cannot reach the cluster are retried until then, and the attempt ends Failed naming the
cluster. An attempt on a retired cluster ends Failed at its next pass.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from console.addon_manifests import parse_manifest
from console.engine.gateways import gateway_for
from console.kube.gateway import (
    DAEMONSETS,
    DEPLOYMENTS,
    PODS,
    ApplyError,
    ClusterUnreachable,
    Gateway,
    Resource,
    parsed,
)
from console.kube.observations import parse_addon, parse_pod
from console.kubeconfig import KubeconfigRejected
from console.models import Addon, AddonAttempt, AddonTransition
from jobs.status.addons import LEASE_RAN_OUT, AttemptFacts, Rollout, addon_phase

logger = logging.getLogger(__name__)
FIELD_MANAGER = "trainyard"
LEASE_SECONDS = 60
PASS_SECONDS = 2.0
ATTEMPT_SECONDS = 15 * 60  # a DaemonSet has no progress deadline: the attempt has one
KINDS: dict[str, Resource] = {"Deployment": DEPLOYMENTS, "DaemonSet": DAEMONSETS}
Running = AddonAttempt.Outcome.RUNNING


def attempt_facts(attempt: AddonAttempt | None, now: datetime) -> AttemptFacts | None:
    if attempt is None:
        return None
    running = attempt.outcome == Running
    # Queued and not started within a lease's time, or started and its lease ran out.
    lease = attempt.lease_until or attempt.started_at + timedelta(seconds=LEASE_SECONDS)
    expired = running and lease < now
    return AttemptFacts(
        kind=attempt.kind, from_version=attempt.from_version, to_version=attempt.to_version,
        running=running, failed=attempt.outcome == AddonAttempt.Outcome.FAILED,
        applied=attempt.applied, answer=attempt.answer, lease_expired=expired,
        reason=attempt.reason,
    )  # fmt: skip


def rollouts_of(addon: Addon) -> list[Rollout]:
    return [Rollout(**item) for item in addon.rollout or ()]


def phase_of(addon: Addon, now: datetime) -> tuple[str, str]:
    """The derived phase and reason, from the stored facts (pages and the API call this)."""
    attempt = addon.attempts.order_by("-started_at", "-pk").first()
    facts = attempt_facts(attempt, now)
    return addon_phase(addon.applied_version, addon.desired_version, facts, rollouts_of(addon))


def record_phase(addon: Addon, now: datetime) -> tuple[str, str]:
    """The phase written on the row (the Add-ons page lists it) and, on a real change, a
    transition."""
    phase, reason = phase_of(addon, now)
    if (addon.phase, addon.message) != (phase, reason):
        Addon.objects.filter(pk=addon.pk).update(phase=phase, message=reason, observed_at=now)
        last = addon.transitions.order_by("-at", "-pk").first()
        if last is None or (last.phase, last.reason) != (phase, reason):
            AddonTransition.objects.create(addon=addon, phase=phase, reason=reason[:500], at=now)
        addon.phase, addon.message = phase, reason
    return phase, reason


# --- an attempt, pass by pass ------------------------------------------------------------------


def _hold(attempt_id: int, now: datetime) -> bool:
    """Takes the lease on the first pass, renews it on the next ones; a lease that ran out
    is not taken again: the worker that held it died, and the attempt reads Failed."""
    until = now + timedelta(seconds=LEASE_SECONDS)
    queued = Q(lease_until__isnull=True, started_at__gte=now - timedelta(seconds=LEASE_SECONDS))
    ours = queued | Q(lease_until__gte=now)
    running = AddonAttempt.objects.filter(ours, pk=attempt_id, outcome=Running)
    return running.update(lease_until=until) == 1


def advance_attempt(attempt_id: int) -> float | None:
    now = timezone.now()
    if not _hold(attempt_id, now):
        close_expired(now, attempt_id)
        return None
    attempt = AddonAttempt.objects.select_related("addon__cluster").get(pk=attempt_id)
    addon = attempt.addon
    if addon.cluster.retired_at is not None:
        _end(attempt, addon, now, f"cluster {addon.cluster.name} was retired")
        return None
    try:
        gateway = gateway_for(addon.cluster)
        if not attempt.applied:
            _apply(gateway, attempt)
        observe(gateway, addon, now)
    except (ClusterUnreachable, KubeconfigRejected) as error:
        logger.info("add-on attempt %s: %s", attempt_id, error)
        if _overdue(attempt, now):
            reason = f"cluster {addon.cluster.name} could not be reached in time: {error}"
            _end(attempt, addon, now, reason)
            return None
        return PASS_SECONDS
    return _settle(attempt, addon, now)


def _overdue(attempt: AddonAttempt, now: datetime) -> bool:
    return now - attempt.started_at > timedelta(seconds=ATTEMPT_SECONDS)


def _apply(gateway: Gateway, attempt: AddonAttempt) -> None:
    addon = attempt.addon
    manifest = addon.versions.get(version=attempt.to_version).manifest
    answers = []
    try:
        for obj in parse_manifest(manifest, addon.name, addon.namespace):
            status, _body = gateway.apply(
                KINDS[obj["kind"]], addon.namespace, obj["metadata"]["name"], obj, FIELD_MANAGER
            )
            answers.append(f"{obj['kind']} {obj['metadata']['name']}: {status}")
    except ApplyError as error:
        answers.append(error.message)
        AddonAttempt.objects.filter(pk=attempt.pk).update(
            outcome=AddonAttempt.Outcome.FAILED, finished_at=timezone.now(),
            answer="; ".join(answers), reason=f"the apply was refused: {error.message}"[:500],
        )  # fmt: skip
        attempt.refresh_from_db()
        return
    AddonAttempt.objects.filter(pk=attempt.pk).update(applied=True, answer="; ".join(answers))
    Addon.objects.filter(pk=addon.pk).update(applied_version=attempt.to_version)
    attempt.refresh_from_db()
    addon.refresh_from_db()


def observe(gateway: Gateway, addon: Addon, now: datetime) -> None:
    """The add-on's workloads (those of its applied version) read back, with crash loops."""
    version = addon.versions.filter(version=addon.applied_version).first()
    objects = parse_manifest(version.manifest, addon.name, addon.namespace) if version else []
    rollout = [_rollout(gateway, addon.namespace, obj) for obj in objects]
    Addon.objects.filter(pk=addon.pk).update(rollout=rollout)
    addon.rollout = rollout


def _rollout(gateway: Gateway, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    kind, name = obj["kind"], obj["metadata"]["name"]
    found = gateway.get(KINDS[kind], namespace, name)
    if found is None:
        return {"kind": kind, "name": name, "found": False}
    seen = parse_addon(found, kind)
    labels = ((found.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    pods = parsed(gateway.list(PODS, selector, namespace), parse_pod) if selector else []
    return {
        "kind": kind, "name": name, "found": True, "generation": seen.generation,
        "observed_generation": seen.observed_generation, "desired": seen.desired,
        "updated": seen.updated, "available": seen.available,
        "deadline_exceeded": seen.progress_deadline_exceeded, "message": seen.message,
        "crash_looping": sum(1 for p in pods if p.waiting_reason == "CrashLoopBackOff"),
        "total": _total(kind, found),
    }  # fmt: skip


def _total(kind: str, found: dict[str, Any]) -> int | None:
    """A Deployment's replicas, old ones included (`status.replicas`); a DaemonSet has one pod
    per node and no such count."""
    if kind != "Deployment":
        return None
    replicas = (found.get("status") or {}).get("replicas", 0)
    return replicas if isinstance(replicas, int) else 0


def _settle(attempt: AddonAttempt, addon: Addon, now: datetime) -> float | None:
    phase, reason = record_phase(addon, now)
    if phase == Addon.Phase.READY:
        AddonAttempt.objects.filter(pk=attempt.pk, outcome=Running).update(
            outcome=AddonAttempt.Outcome.SUCCEEDED, finished_at=now, lease_until=None
        )
        record_phase(addon, now)
        return None
    if phase == Addon.Phase.FAILED:
        _end(attempt, addon, now, reason)
    elif _overdue(attempt, now):
        _end(attempt, addon, now, "the rollout did not finish in time")
    else:
        return PASS_SECONDS
    return None


def _end(attempt: AddonAttempt, addon: Addon, now: datetime, reason: str) -> None:
    """The attempt closed failed with `reason` (unless it ended meanwhile), the phase recorded."""
    AddonAttempt.objects.filter(pk=attempt.pk, outcome=Running).update(
        outcome=AddonAttempt.Outcome.FAILED, finished_at=now, lease_until=None,
        reason=reason[:500],
    )  # fmt: skip
    record_phase(addon, now)


def _expired(now: datetime) -> Q:
    """Running attempts whose lease ran out, or queued ones never started within a lease."""
    queued_long_ago = Q(
        lease_until__isnull=True, started_at__lt=now - timedelta(seconds=LEASE_SECONDS)
    )
    return Q(outcome=Running) & (Q(lease_until__lt=now) | queued_long_ago)


def close_expired(now: datetime, attempt_id: int | None = None) -> list[int]:
    """Attempts whose worker died are closed failed with that reason (one conditional UPDATE
    each: a pass that still holds its lease is left alone), and their add-ons' phase recorded.
    Returns the add-ons touched."""
    found = AddonAttempt.objects.filter(_expired(now))
    if attempt_id is not None:
        found = found.filter(pk=attempt_id)
    closed = []
    for attempt in found.select_related("addon"):
        ended = AddonAttempt.objects.filter(_expired(now), pk=attempt.pk).update(
            outcome=AddonAttempt.Outcome.FAILED, finished_at=now, reason=LEASE_RAN_OUT
        )
        if ended:
            record_phase(attempt.addon, now)
            closed.append(attempt.addon_id)
    return closed


def observe_addons() -> int:
    """The beat's pass over registry add-ons: attempts whose worker died closed; every add-on's
    phase recorded (one never applied too: its first attempt may have died before its first
    pass); the rollout of applied ones read again (a Ready add-on that loses availability
    says why). Returns how many rollouts were read."""
    now, count = timezone.now(), 0
    close_expired(now)
    live = Addon.objects.filter(managed=True, cluster__retired_at__isnull=True)
    for addon in live.select_related("cluster"):
        if addon.applied_version:
            try:
                observe(gateway_for(addon.cluster), addon, now)
            except (ClusterUnreachable, KubeconfigRejected):
                continue
            count += 1
        record_phase(addon, now)
    return count
