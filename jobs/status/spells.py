"""Spells: the times a run's workload was Stalled, Unresponsive or Degraded, as a chart shades
them on its time axis (issue 35).

Pure, like the state they come from (jobs.status.workload): the same thresholds and clocks, so
a band on a chart begins exactly when the Job's page began to say Stalled, Unresponsive or
Degraded. A spell that ended is found when the message that ends it arrives (the fold records it,
jobs.workload.report); a spell still going on is the state derived now, never stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime

from jobs.choices import WorkloadState
from jobs.status.workload import (
    MISSED_HEARTBEATS,
    Policies,
    Report,
    degraded,
    gathering,
    stall_threshold,
)


@dataclass(frozen=True)
class Spell:
    state: WorkloadState
    started_at: datetime
    ended_at: datetime | None  # None: still going on


def quiet_limit(policies: Policies) -> timedelta:
    """How long a workload may say nothing before it is Unresponsive (as `judge` decides)."""
    return timedelta(seconds=MISSED_HEARTBEATS * policies.heartbeat_seconds)


def ended_quiet(last_received_at: datetime, now: datetime, policies: Policies) -> Spell | None:
    """A message received `now` after a silence longer than the limit ends an Unresponsive
    spell, which began when the limit passed."""
    began = last_received_at + quiet_limit(policies)
    return Spell(WorkloadState.UNRESPONSIVE, began, now) if now > began else None


def ended_stall(
    report: Report, policies: Policies, now: datetime, until: datetime | None = None
) -> Spell | None:
    """A step advance received `now` ends a Stalled spell when the stall clock (the last
    advance or pause, `stall_clock`) is older than the threshold. `until`: an Unresponsive spell
    in the same time began then, and the state was Unresponsive from there (judge's order)."""
    clock = report.stall_clock
    if clock is None:
        return None
    threshold = stall_threshold(policies, report.typical_step_seconds)
    began, ended = clock + timedelta(seconds=threshold), min(now, until or now)
    return Spell(WorkloadState.STALLED, began, ended) if ended > began else None


def degraded_since(ray: Mapping[str, Any]) -> datetime | None:
    """When a Ray report that is still degraded first said so (kept on the report by the fold)."""
    value = ray.get("degraded_since") or ray.get("received_at")
    return parse_datetime(value) if isinstance(value, str) else None


def ended_degraded(
    previous: Mapping[str, Any] | None, ray: Mapping[str, Any], now: datetime
) -> Spell | None:
    """A Ray report with every expected node alive ends a Degraded spell begun by an earlier one."""
    if previous is None or not degraded(previous) or degraded(ray):
        return None
    began = degraded_since(previous)
    return Spell(WorkloadState.DEGRADED, began, now) if began and now > began else None


def ended_by_gathering(
    latest: Mapping[str, Mapping[str, Any]], phase: Mapping[str, Any], now: datetime
) -> Spell | None:
    """A phase received `now` saying the workload gathers its Ray nodes again (a re-created
    head) ends a Degraded spell: from then on fewer nodes alive is its wait, Starting, not
    Degraded (`judge`'s order), and a Ray report while it gathers ends nothing."""
    ray = latest.get("ray")
    if not ray or not degraded(ray) or gathering(latest):
        return None
    if not gathering({**latest, "phase": phase}):
        return None
    began = degraded_since(ray)
    return Spell(WorkloadState.DEGRADED, began, now) if began and now > began else None


def ongoing(state: WorkloadState, report: Report, policies: Policies) -> Spell | None:
    """The spell the workload is in now, open-ended, when its derived state is one."""
    began: datetime | None = None
    if state == WorkloadState.UNRESPONSIVE:
        began = report.last_received_at + quiet_limit(policies)
    elif state == WorkloadState.DEGRADED:
        began = degraded_since(report.latest.get("ray") or {})
    elif state == WorkloadState.STALLED:
        clock = report.stall_clock
        threshold = stall_threshold(policies, report.typical_step_seconds)
        began = clock + timedelta(seconds=threshold) if clock else None
    return Spell(state, began, None) if began else None
