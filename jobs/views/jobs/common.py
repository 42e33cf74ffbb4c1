"""What the Jobs pages share: how far to trust a cluster's data, who may operate a Job, and the
job page's Task rows (the page and its text record both read them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from console.models import Cluster
from jobs.access import User, operates_in
from jobs.models import Job, Task
from jobs.status import freshness as status


@dataclass(frozen=True)
class ClusterState:
    """How much to trust what a cluster last reported (ARCHITECTURE: staleness is derived at
    read time; an unreachable cluster freezes its objects' observed state, never hides it).
    `waiting`: no sync has even been tried yet (a cluster just registered), nothing is known."""

    reachable: bool
    stale: bool
    last_synced_at: datetime | None
    waiting: bool = False


def cluster_state(cluster: Cluster, now: datetime) -> ClusterState:
    """Stale when the last successful sync is too old, or when the last attempt failed."""
    if cluster.last_attempt_at is None and cluster.last_synced_at is None:
        return ClusterState(reachable=True, stale=False, last_synced_at=None, waiting=True)
    stale = status.cluster_freshness(cluster, now).stale or not cluster.reachable
    return ClusterState(cluster.reachable, stale, cluster.last_synced_at)


def can_operate(user: User, job: Job) -> bool:
    """Members operate on their project's Jobs; viewers only look (jobs.access decides)."""
    return operates_in(user, job.project_id)


@dataclass(frozen=True)
class ShownTask:
    """A Task with its Worker counts and when the cluster last reported on it. `worker_count`
    counts the pods in the last report only; `unreported_count` the rows missing from it."""

    task: Task
    observed_at: datetime | None
    worker_count: int
    unreported_count: int
