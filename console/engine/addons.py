"""A registry add-on's attempts and rollout, against the cluster (issue 36, Build 3).

`advance_attempt` is one pass of an install, upgrade or rollback: the first applies the
version's manifests by server-side apply (field manager `trainyard`) and records the answer;
each later one reads the workloads back (and their pods, for crash loops), stores the rollout,
derives the phase (jobs.status.addons), records a transition on a real change, and ends the
attempt once the add-on is Ready or Failed. A pass runs only while the attempt's lease is held
and renews it; a worker that dies leaves a lease that runs out, and the add-on then reads
Failed, never Installing for ever. `observe_addons` keeps the rollout of settled add-ons fresh
so that a Ready add-on losing availability says so.
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
from jobs.status.addons import AttemptFacts, Rollout, addon_phase

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
        _close_expired(attempt_id, now)
        return None
    attempt = AddonAttempt.objects.select_related("addon__cluster").get(pk=attempt_id)
    addon = attempt.addon
    try:
        gateway = gateway_for(addon.cluster)
        if not attempt.applied:
            _apply(gateway, attempt)
        observe(gateway, addon, now)
    except (ClusterUnreachable, KubeconfigRejected) as error:
        logger.info("add-on attempt %s: %s", attempt_id, error)
        return PASS_SECONDS
    return _settle(attempt, addon, now)


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
            answer="; ".join(answers),
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
    outcome: str | None = None
    if phase == Addon.Phase.READY:
        outcome = AddonAttempt.Outcome.SUCCEEDED
    elif phase == Addon.Phase.FAILED:
        outcome = AddonAttempt.Outcome.FAILED
    if outcome is None and now - attempt.started_at > timedelta(seconds=ATTEMPT_SECONDS):
        outcome, reason = AddonAttempt.Outcome.FAILED, "the rollout did not finish in time"
    if outcome is None:
        return PASS_SECONDS
    answer = attempt.answer if outcome == AddonAttempt.Outcome.SUCCEEDED else reason
    AddonAttempt.objects.filter(pk=attempt.pk, outcome=Running).update(
        outcome=outcome, finished_at=now, lease_until=None, answer=answer[:2000]
    )
    record_phase(addon, now)
    return None


def _close_expired(attempt_id: int, now: datetime) -> None:
    """A running attempt whose lease ran out: its phase reads Failed (jobs.status.addons);
    the transition is recorded now."""
    attempt = AddonAttempt.objects.select_related("addon").filter(pk=attempt_id).first()
    if attempt is not None:
        record_phase(attempt.addon, now)


def observe_addons() -> int:
    """The beat's pass over settled registry add-ons: their rollout read again, the phase
    recorded (a Ready add-on that loses availability says why). Returns how many were read."""
    now, count = timezone.now(), 0
    for addon in (
        Addon.objects.filter(managed=True).exclude(applied_version="").select_related("cluster")
    ):
        try:
            observe(gateway_for(addon.cluster), addon, now)
        except (ClusterUnreachable, KubeconfigRejected):
            continue
        record_phase(addon, now)
        count += 1
    return count
