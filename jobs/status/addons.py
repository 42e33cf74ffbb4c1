"""A registry add-on's phase (issue 36, Build 3; spec §Node and Addon status), derived — never
set — from what the console applied, its last attempt and the rollout observed. Pure.

    Pending     never applied
    Installing  the first version applying, or rolling out
    Upgrading   a newer desired version applying or rolling out (a rollback too)
    Ready       applied version == desired, and every workload rolled out by kubectl's rule:
                observedGeneration current, updated = desired = available replicas
    Failed      the apply was refused, a rollout exceeded its progress deadline, pods crash-
                loop, a running attempt's lease ran out (its worker died), or the attempt
                ended failed for a reason it recorded (its deadline passed, the cluster could
                not be reached all that time, or the cluster was retired)

A Ready add-on whose workloads lose availability stays Ready (its version is reached) with the
reason beside it, instead of staying silently green.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobs.choices import AddonPhase

LEASE_RAN_OUT = "the attempt's worker stopped before it finished (its lease ran out)"


@dataclass(frozen=True)
class Rollout:
    """One workload of the add-on as last observed (`found` False: not there at all)."""

    kind: str
    name: str
    found: bool
    generation: int = 0
    observed_generation: int = 0
    desired: int = 0
    updated: int = 0
    available: int = 0
    deadline_exceeded: bool = False
    crash_looping: int = 0
    message: str = ""
    total: int | None = None  # status.replicas, old pods included (None: as `updated`)


@dataclass(frozen=True)
class AttemptFacts:
    kind: str  # install, upgrade, rollback
    from_version: str
    to_version: str
    running: bool
    failed: bool
    applied: bool
    answer: str
    lease_expired: bool
    reason: str = ""  # why a failed attempt failed (the console's words), "" when not said


def rolled_out(rollout: Rollout) -> bool:
    """kubectl rollout status: the controller saw the latest spec, every replica is updated,
    no old replica is left, and every updated one is available."""
    total = rollout.updated if rollout.total is None else rollout.total
    return (
        rollout.found
        and rollout.observed_generation >= rollout.generation
        and rollout.updated == rollout.desired == rollout.available
        and total == rollout.updated
    )


def _rolling_phase(attempt: AttemptFacts | None) -> AddonPhase:
    first = attempt is None or not attempt.from_version
    return AddonPhase.INSTALLING if first else AddonPhase.UPGRADING


def _failure(attempt: AttemptFacts | None, rollouts: Sequence[Rollout]) -> str | None:
    if attempt is not None and attempt.running and attempt.lease_expired:
        return LEASE_RAN_OUT
    if attempt is not None and attempt.failed and not attempt.applied:
        return attempt.reason or f"the apply was refused: {attempt.answer}"
    for rollout in rollouts:  # a condition of an older spec says nothing of the current one
        if rollout.deadline_exceeded and rollout.observed_generation >= rollout.generation:
            return f"{rollout.kind} {rollout.name}: ProgressDeadlineExceeded {rollout.message}"
        if rollout.crash_looping:
            return f"{rollout.kind} {rollout.name}: {rollout.crash_looping} pods crash-looping"
    if attempt is not None and attempt.failed:
        return attempt.reason or attempt.answer or "the attempt failed"
    return None


def addon_phase(
    applied_version: str, desired_version: str, attempt: AttemptFacts | None,
    rollouts: Sequence[Rollout],
) -> tuple[AddonPhase, str]:  # fmt: skip
    """The phase and the reason shown beside it ("" when there is nothing to add)."""
    if not applied_version and (attempt is None or not attempt.running):
        failure = _failure(attempt, rollouts)
        return (AddonPhase.FAILED, failure) if failure else (AddonPhase.PENDING, "never applied")
    failure = _failure(attempt, rollouts)
    if failure:
        return AddonPhase.FAILED, failure
    at_desired = applied_version == desired_version
    if at_desired and rollouts and all(rolled_out(r) for r in rollouts):
        return AddonPhase.READY, ""
    if at_desired and attempt is not None and not attempt.running and rollouts:
        short = [r for r in rollouts if not rolled_out(r)]
        lost = ", ".join(f"{r.kind} {r.name}: {r.available}/{r.desired} available" for r in short)
        return AddonPhase.READY, f"availability lost: {lost}"
    if not at_desired and (attempt is None or not attempt.running):
        return AddonPhase.UPGRADING, f"{desired_version} is not applied yet"
    return _rolling_phase(attempt), ""
