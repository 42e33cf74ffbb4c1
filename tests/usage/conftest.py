"""The GPU-hours ledger driven end to end: a frozen simcluster whose clock moves with the
console's (time_machine), so each interval can be checked to the second against the timeline
the test drove."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.core.cache import cache

from console.engine.cycle import SyncResult, sync_cluster
from console.models import Cluster
from jobs.models import Job
from jobs.workload.intake import BATCH
from jobs.workload.report import Recorded, record
from simcluster.server import SimCluster
from tests.conftest import register_sim
from usage.models import GpuInterval, UsageHour

T0 = datetime(2026, 5, 4, 9, 59, 30, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    cache.clear()


@dataclass
class Clock:
    """The console's time and the simulated cluster's, moved together."""

    traveller: Any
    sim: SimCluster

    def now(self) -> datetime:
        return datetime.now(UTC)

    def advance(self, seconds: float) -> None:
        self.sim.advance(seconds)
        self.traveller.shift(timedelta(seconds=seconds))


@pytest.fixture
def clock() -> Iterator[Clock]:
    # The simulated clock starts at time.time(): T0, once travelled.
    with (
        time_machine.travel(T0, tick=False) as traveller,
        SimCluster(nodes=2, gpus_per_node=8, seed=0, speed=0) as sim,
    ):
        yield Clock(traveller, sim)


@pytest.fixture
def sim(clock: Clock) -> SimCluster:
    return clock.sim


@pytest.fixture
def sim_cluster(db: None, sim: SimCluster, tmp_path: Path) -> Cluster:
    return register_sim(sim, tmp_path)


def sync(cluster: Cluster) -> SyncResult:
    """One cycle of the cluster, which must answer."""
    result = sync_cluster(cluster.pk)
    assert result.reachable, result.summary()
    return result


def pod(sim: SimCluster, name: str) -> dict[str, Any]:
    """The pod as the API server holds it (what Kubernetes reports)."""
    with sim.cluster.store.lock:
        found = sim.cluster.store.get("pods", ("default", name))
    assert found is not None, name
    return dict(found)


def seconds(moment: str | datetime) -> int:
    """A Kubernetes time (or a datetime) as whole seconds after T0."""
    value = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
    return round((value - T0).total_seconds())


def bound_at(found: dict[str, Any]) -> int:
    conditions = found["status"]["conditions"]
    scheduled = next(c for c in conditions if c["type"] == "PodScheduled")
    return seconds(scheduled["lastTransitionTime"])


def running_at(found: dict[str, Any]) -> int:
    return seconds(found["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])


def say(job: Job, *messages: dict[str, Any]) -> Recorded:
    """The workload's word, received now."""
    pod_name = f"{job.name}-worker-0"
    items = BATCH.validate_python(
        [{"pod": pod_name, "uid": "u", "seq": n, **m} for n, m in enumerate(messages, SEQ.next())]
    )
    return record(job.pk, job.run, items)


class _Seq:
    value = 0

    def next(self) -> int:
        self.value += 100
        return self.value


SEQ = _Seq()


def timeline(job: Job) -> list[tuple[str, str, int, int | None]]:
    """(pod, class, seconds from T0 it began, seconds from T0 it ended) in order."""
    rows = GpuInterval.objects.filter(job=job).order_by("pod_name", "started_at", "pk")
    return [
        (
            row.pod_name,
            row.usage_class,
            round((row.started_at - T0).total_seconds()),
            round((row.ended_at - T0).total_seconds()) if row.ended_at else None,
        )
        for row in rows
    ]


def rolled_up(job: Job) -> dict[str, float]:
    """GPU-seconds by class, from the hourly roll-ups."""
    totals: dict[str, float] = {}
    for row in UsageHour.objects.filter(job_id=job.pk):
        totals[row.usage_class] = totals.get(row.usage_class, 0.0) + row.gpu_seconds
    return totals


def closed_totals(job: Job) -> dict[str, float]:
    """GPU-seconds by class, from the closed intervals."""
    totals: dict[str, float] = {}
    for row in GpuInterval.objects.filter(job=job, ended_at__isnull=False):
        assert row.ended_at is not None
        seconds_ = row.gpus * (row.ended_at - row.started_at).total_seconds()
        totals[row.usage_class] = totals.get(row.usage_class, 0.0) + seconds_
    return totals
