"""The workload state: what a Job's training says about itself, beside the Kubernetes phase.

Spec §Job status: a StatefulSet Job never reports Succeeded or Failed, and Running is not
progress; training is judged by the workload's own word (its completion, progress, checkpoints).
That word is a second layer, labelled with its source and age, never written into the Job's
phase. Derived at read time (pure: the folded report, the Job's phase, the policies and the time
in; the state out), because Stalled and Unresponsive are about time passing, not about a message.

The order of the rules, strongest first:
  Succeeded / Failed   the workload reported its completion (kept after its pods are gone);
  Silent               it never said anything in this run;
  Lost                 its pods are gone (Job Stopped, Failed or Succeeded), no completion;
  Starting             its pods are not all up yet (Pending) but it has spoken;
  Unresponsive         no message for 3 heartbeat intervals while its pods run;
  Starting             it waits for its Ray nodes (phase waiting_for_nodes, newer than its
                       last step): a run still gathering its nodes has lost none;
  Degraded             fewer Ray nodes alive than expected: it had its nodes and lost one;
  Starting             its last word is that it (re)starts, newer than its last step;
  Stalled              no step advance within the stall threshold;
  Progressing          it reports steps;
  Starting             it speaks but reports no step yet.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from itertools import pairwise
from typing import Any

from django.utils.dateparse import parse_datetime

from jobs.choices import WORKLOAD_ATTENTION, JobPhase, SignalSource, WorkloadState
from jobs.messages import Message, Param

HEARTBEAT_SECONDS = 30  # default policies.heartbeat_seconds
MISSED_HEARTBEATS = 3  # Unresponsive after this many heartbeat intervals without a message
MIN_THRESHOLD = 5  # seconds: the smallest heartbeat or stall threshold a Job may choose
STALL_FLOOR = 120  # seconds: a derived stall threshold is never shorter
STALL_STEPS = 5  # a derived stall threshold is this many typical step times
RECENT_STEPS = 12  # step advances kept to judge the step time
# While the workload says it checkpoints or evaluates, the stall clock starts from that phase.
PAUSING_PHASES = frozenset({"checkpointing", "evaluating"})
# A process that says it is (re)starting has no step of its own yet, whatever an earlier
# process reported.
STARTING_PHASES = frozenset({"starting", "waiting_for_nodes", "initializing"})
# While the workload says it waits for its Ray nodes, fewer alive than expected is the wait itself.
GATHERING_PHASE = "waiting_for_nodes"


@dataclass(frozen=True)
class Policies:
    """A Job's workload policies (jobs.spec.JobPolicies), with their defaults."""

    stop_on_completion: bool = False
    heartbeat_seconds: int = HEARTBEAT_SECONDS
    stall_after_seconds: int | None = None
    progress_from_logs: bool = False
    stop_when_idle_minutes: int | None = None

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Policies:
        """From a stored Job spec (`Job.spec`); a spec written before policies gets defaults."""
        given = spec.get("policies") or {}
        return cls(**{key: value for key, value in given.items() if key in cls.__annotations__})


@dataclass(frozen=True)
class Report:
    """A WorkloadReport's values (jobs.models.WorkloadReport), read from the row or from
    `values()`: `latest` is {kind: {fields..., "at", "received_at", "source"}}."""

    run: int
    first_received_at: datetime
    last_received_at: datetime
    latest: Mapping[str, Mapping[str, Any]]
    steps: list[list[Any]]

    def time(self, kind: str, key: str = "received_at") -> datetime | None:
        value = (self.latest.get(kind) or {}).get(key)
        return parse_datetime(value) if isinstance(value, str) else None

    # The two clocks below are read once per report: judging a state and foreseeing its next
    # turn both need them (notify.watch judges every Job it watches with both).

    @cached_property
    def stall_clock(self) -> datetime | None:
        """When the last step advance was received, or the workload's last pause (a
        checkpoint or an evaluation) began, whichever is later."""
        advanced = self.time("progress", "advanced_at")
        phase = self.latest.get("phase") or {}
        if phase.get("phase") in PAUSING_PHASES:
            paused = self.time("phase")
            if paused and (advanced is None or paused > advanced):
                return paused
        return advanced

    @cached_property
    def typical_step_seconds(self) -> float | None:
        """One step's typical time in this report: from its recent advances, else as
        reported."""
        return step_seconds(self.steps, (self.latest.get("progress") or {}).get("step_seconds"))


@dataclass(frozen=True)
class Workload:
    """The derived state with everything shown beside it (API `workload`, the Workload panel)."""

    state: WorkloadState
    source: SignalSource | None = None
    reported_at: datetime | None = None
    reason: Message | None = None
    phase: str = ""
    step: int | None = None
    max_steps: int | None = None
    step_seconds: float | None = None
    eta_seconds: float | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    last_heartbeat_at: datetime | None = None
    last_message_at: datetime | None = None
    last_checkpoint: Mapping[str, Any] | None = None
    ray: Mapping[str, Any] | None = None
    completion: Mapping[str, Any] | None = None
    stall_after_seconds: float | None = None

    @property
    def needs_attention(self) -> bool:
        return self.state in WORKLOAD_ATTENTION

    @property
    def progress_percent(self) -> int | None:
        if self.step is None or not self.max_steps:
            return None
        return min(100, round(100 * self.step / self.max_steps))


def step_seconds(steps: list[list[Any]], reported: float | None = None) -> float | None:
    """The typical time of one step: the median over the recent advances (time per step, so a
    report every k steps counts right), else what the workload reported."""
    rates = []
    for (t0, s0), (t1, s1) in pairwise(steps):
        if s1 > s0 and t1 > t0:
            rates.append((t1 - t0) / (s1 - s0))
    if rates:
        return statistics.median(rates)
    return reported


def stall_threshold(policies: Policies, typical: float | None) -> float:
    """The Job's own `stall_after_seconds`, else STALL_STEPS typical steps, at least STALL_FLOOR."""
    if policies.stall_after_seconds is not None:
        return float(policies.stall_after_seconds)
    return max(float(STALL_FLOOR), STALL_STEPS * typical) if typical else float(STALL_FLOOR)


def _source(report: Report, kind: str) -> SignalSource:
    return SignalSource((report.latest.get(kind) or {}).get("source", SignalSource.SIGNAL))


def derive(
    report: Report | None, job_phase: JobPhase, run: int, policies: Policies, now: datetime
) -> Workload:
    """Spec §Job status (the workload's own completion signal): the state and its facts."""
    state, kind, reason = judge(report, job_phase, run, policies, now)
    if report is None or state == WorkloadState.SILENT:
        return Workload(state, reason=reason)
    latest = report.latest
    progress = latest.get("progress") or {}
    typical = report.typical_step_seconds
    step, max_steps = progress.get("step"), progress.get("max_steps")
    eta = None
    if typical is not None and step is not None and max_steps:
        eta = max(0.0, (max_steps - step) * typical)
    facts = {
        "phase": (latest.get("phase") or {}).get("phase", ""),
        "step": step,
        "max_steps": max_steps,
        "step_seconds": typical,
        "eta_seconds": eta,
        "metrics": progress.get("metrics") or {},
        "last_heartbeat_at": report.time("heartbeat"),
        "last_message_at": report.last_received_at,
        "last_checkpoint": latest.get("checkpoint"),
        "ray": latest.get("ray"),
        "completion": latest.get("completion"),
        "stall_after_seconds": stall_threshold(policies, typical) if "progress" in latest else None,
    }
    source = _source(report, kind) if kind else None
    reported_at = report.time(kind, "at") if kind else report.last_received_at
    return Workload(state, source, reported_at, reason, **facts)


def judge(
    report: Report | None, job_phase: JobPhase, run: int, policies: Policies, now: datetime
) -> tuple[WorkloadState, str, Message]:
    """(state, the kind of message that decided it, why): the rules in the module's order, without
    the facts shown beside the state (what a page judging hundreds of Jobs at once needs)."""
    if report is None or report.run != run:
        return WorkloadState.SILENT, "", Message("workload.silent")
    latest = report.latest
    completion = latest.get("completion")
    if completion:
        outcome = completion.get("outcome")
        state = WorkloadState.SUCCEEDED if outcome == "succeeded" else WorkloadState.FAILED
        return state, "completion", _completion_reason(completion)
    if job_phase in (JobPhase.STOPPED, JobPhase.FAILED, JobPhase.SUCCEEDED):
        return WorkloadState.LOST, "", Message("workload.lost", {"phase": str(job_phase)})
    if job_phase == JobPhase.PENDING:
        return WorkloadState.STARTING, _newest_kind(latest), Message("workload.pods_starting")
    quiet = (now - report.last_received_at).total_seconds()
    limit = MISSED_HEARTBEATS * policies.heartbeat_seconds
    if quiet > limit:
        quiet_for = Message("workload.quiet", {"seconds": round(quiet), "limit": limit})
        return WorkloadState.UNRESPONSIVE, _newest_kind(latest), quiet_for
    ray = latest.get("ray")
    if ray and degraded(ray):
        alive = {"alive": ray["alive_nodes"], "expected": ray["expected_nodes"]}
        if gathering(latest):
            return WorkloadState.STARTING, "ray", Message("workload.gathering", alive)
        return WorkloadState.DEGRADED, "ray", Message("workload.degraded", alive)
    phase = latest.get("phase") or {}
    if phase.get("phase") in STARTING_PHASES and phase["at"] > latest.get("progress", phase)["at"]:
        return WorkloadState.STARTING, "phase", Message("workload.phase", {"phase": phase["phase"]})
    if "progress" in latest:
        since = report.stall_clock
        idle = (now - since).total_seconds() if since else 0.0
        threshold = stall_threshold(policies, report.typical_step_seconds)
        step = int(latest["progress"].get("step", 0))
        if idle > threshold:
            stalled = {"step": step, "seconds": round(idle), "limit": round(threshold)}
            return WorkloadState.STALLED, "progress", Message("workload.stalled", stalled)
        at_step = Message("workload.progressing", {"step": step})
        return WorkloadState.PROGRESSING, "progress", at_step
    return WorkloadState.STARTING, _newest_kind(latest), Message("workload.no_steps")


def gathering(latest: Mapping[str, Mapping[str, Any]]) -> bool:
    """The workload's last phase is waiting_for_nodes, said before any step or after the last
    one (a re-created head gathers its nodes again): fewer nodes alive is the wait, not a loss.
    Degraded is a run that had its nodes and lost one (issue 31; spec §Job status). The fold asks
    it too, so a wait begins and ends no Degraded spell (jobs.workload.report)."""
    phase, progress = latest.get("phase") or {}, latest.get("progress")
    if phase.get("phase") != GATHERING_PHASE:
        return False
    return progress is None or phase["at"] > progress["at"]


def next_turn_at(
    report: Report | None, job_phase: JobPhase, run: int, policies: Policies, now: datetime
) -> datetime | None:
    """When time alone may next change what `judge` says, nothing else changing: the first
    turning point not yet passed; None when no clock runs (no report of this run, a
    completion, a Job not Running). Who judges many Jobs every cycle judges one again only once
    a fact of it changed or this moment came (notify.watch)."""
    if job_phase != JobPhase.RUNNING:
        return None
    coming = [point for point in turning_points(report, run, policies) if point >= now]
    return min(coming) if coming else None


# Messages that only keep the state as it is, unless they end a spell (jobs.status.spells): a
# heartbeat, a step (a step advance ending a stall ends a spell). Any other kind (a phase, a
# checkpoint, a Ray report, a completion) may turn it by itself.
STEADY_KINDS = frozenset({"heartbeat", "progress"})


def may_turn(kinds: Iterable[str], ended_spell: bool, new_run: bool) -> bool:
    """Whether messages just folded may have turned what `judge` says, otherwise than by time
    (which next_turn_at foresees): a new run, a spell they ended, or a kind that is not steady."""
    return new_run or ended_spell or any(kind not in STEADY_KINDS for kind in kinds)


def degraded(ray: Mapping[str, Any] | None) -> bool:
    """A Ray report naming fewer nodes alive than expected."""
    if not ray:
        return False
    return bool(ray.get("alive_nodes", 0) < ray.get("expected_nodes", 0))


# Just after a turning point: the rules compare with `>`, so at the point itself nothing moved.
JUST_AFTER = timedelta(microseconds=1)
# What the idle policy judges idle (issue "stop_when_idle_minutes"): never Silent.
IDLE_STATES = frozenset(
    {WorkloadState.STALLED, WorkloadState.UNRESPONSIVE, WorkloadState.SUCCEEDED,
     WorkloadState.FAILED}
)  # fmt: skip


def turning_points(report: Report | None, run: int, policies: Policies) -> list[datetime]:
    """The moments the state changes by time alone while no message arrives: the stall
    threshold passing since the last step advance, and the heartbeat limit passing since the
    last message. Only `judge` says what the state is then (judged just after the point)."""
    if report is None or report.run != run or report.latest.get("completion"):
        return []
    limit = MISSED_HEARTBEATS * policies.heartbeat_seconds
    points = [report.last_received_at + timedelta(seconds=limit)]
    since = report.stall_clock if "progress" in report.latest else None
    if since is not None:
        threshold = stall_threshold(policies, report.typical_step_seconds)
        points.append(since + timedelta(seconds=threshold))
    return sorted(points)


def idle_since(
    report: Report | None, job_phase: JobPhase, run: int, policies: Policies, now: datetime
) -> datetime | None:
    """Since when the workload has been idle without a break (Stalled, Unresponsive, or its
    completion reported while its pods still run); None when it is not idle now. Never Silent:
    a run that never signalled is not judged idle."""
    state = judge(report, job_phase, run, policies, now)[0]
    if report is None or state not in IDLE_STATES:
        return None
    if state in (WorkloadState.SUCCEEDED, WorkloadState.FAILED):
        return report.time("completion") or report.last_received_at
    idle = [
        point
        for point in turning_points(report, run, policies)
        if point <= now
        and judge(report, job_phase, run, policies, point + JUST_AFTER)[0] in IDLE_STATES
    ]
    return min(idle, default=now)


def _newest_kind(latest: Mapping[str, Mapping[str, Any]]) -> str:
    """The kind whose message was received last (its source labels the state)."""
    return max(latest, key=lambda kind: str(latest[kind].get("received_at", "")), default="")


def _completion_reason(completion: Mapping[str, Any]) -> Message:
    params: dict[str, Param] = {"outcome": str(completion.get("outcome", ""))}
    detail = str(completion.get("message") or completion.get("reason") or "")
    if completion.get("exit_code") is not None:
        params["exit_code"] = int(completion["exit_code"])
        return Message("workload.completed_code", params | {"detail": detail})
    return Message("workload.completed", params | {"detail": detail})
