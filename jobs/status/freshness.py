"""Freshness of what a cluster reported, derived at read time (values in, values out; how old is
stale is the TRAINYARD_STALE_AFTER setting, read when called).

The sync writes a row only when something about it changed, so a row's own `observed_at` /
`last_reported_at` / `last_seen_at` is the time of its last *change*. While the cluster keeps
answering, an unchanged row was confirmed by every sync since: its "observed at" is therefore
the later of its own time and the cluster's `last_synced_at` (docs/decisions.md). When the
cluster stops answering, `last_synced_at` stops moving and every age grows until it is stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings


@dataclass(frozen=True)
class Freshness:
    observed_at: datetime | None
    age_seconds: float | None
    stale: bool


def is_stale(observed_at: datetime | None, now: datetime) -> bool:
    """Older than TRAINYARD_STALE_AFTER seconds, or never observed at all."""
    if observed_at is None:
        return True
    return (now - observed_at).total_seconds() > settings.TRAINYARD_STALE_AFTER


def age_seconds(observed_at: datetime | None, now: datetime) -> float | None:
    return None if observed_at is None else max(0.0, (now - observed_at).total_seconds())


def freshness(observed_at: datetime | None, now: datetime) -> Freshness:
    return Freshness(observed_at, age_seconds(observed_at, now), is_stale(observed_at, now))


def observed_at(
    own: datetime | None, last_synced_at: datetime | None, since: datetime | None = None
) -> datetime | None:
    """When the cluster last reported on a row: max(own change time, last successful sync).
    A sync before `since` (the row's creation) cannot have reported on it."""
    times = [t for t in (own, last_synced_at) if t is not None and (since is None or t >= since)]
    return max(times) if times else None


def job_freshness(job: Any, now: datetime) -> Freshness:
    """Of a Job (with `job.cluster` loaded). Never observed: stale only once it has waited
    longer than TRAINYARD_STALE_AFTER since its creation."""
    seen = observed_at(job.observed_at, job.cluster.last_synced_at, job.created_at)
    if seen is None:
        waited = (now - job.created_at).total_seconds()
        return Freshness(None, None, waited > settings.TRAINYARD_STALE_AFTER)
    return freshness(seen, now)


def task_freshness(task: Any, cluster: Any, now: datetime) -> Freshness:
    if task.observed_at is None:
        return Freshness(None, None, is_stale(cluster.last_synced_at, now))
    return freshness(observed_at(task.observed_at, cluster.last_synced_at), now)


def cluster_freshness(cluster: Any, now: datetime) -> Freshness:
    return freshness(cluster.last_synced_at, now)


def worker_missing(worker: Any, task: Any) -> bool:
    """The pod was not in the last sync that changed anything about its Task (the sync writes a
    Task's `observed_at` and its present Workers' `last_reported_at` together)."""
    return task.observed_at is not None and worker.last_reported_at < task.observed_at


def worker_last_reported_at(worker: Any, task: Any, cluster: Any) -> datetime:
    """A present Worker was reported by every sync since its row last changed."""
    if worker_missing(worker, task) or cluster.last_synced_at is None:
        return worker.last_reported_at  # type: ignore[no-any-return]
    return max(worker.last_reported_at, cluster.last_synced_at)  # type: ignore[no-any-return]


def instance_last_seen_at(instance: Any, cluster: Any) -> datetime:
    """A PodInstance still listed (`gone_at` empty) was seen by the last successful sync."""
    if instance.gone_at is not None or cluster.last_synced_at is None:
        return instance.last_seen_at  # type: ignore[no-any-return]
    return max(instance.last_seen_at, cluster.last_synced_at)  # type: ignore[no-any-return]


def decided_after_report(decided_at: datetime | None, observed_at: datetime | None) -> bool:
    """A phase the console set itself (stop, resume: spec §Job status) is its decision, not an
    observation, until the cluster reports after it: the report must be the newer fact."""
    if decided_at is None:
        return False
    return observed_at is None or observed_at < decided_at
