"""What a chart draws from is kept (issue 35): a finished run's progress history after
compaction, and the Stalled / Unresponsive / Degraded spells the fold records."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.cache import cache

from console.models import Cluster
from jobs.choices import JobPhase, WorkloadState
from jobs.models import Job, Signal, WorkloadSpell
from jobs.workload import intake
from jobs.workload.intake import BATCH
from jobs.workload.report import record

T0 = datetime(2026, 11, 1, tzinfo=UTC)
POD, UID = "ppo-head-0", "uid-a"


@pytest.fixture(autouse=True)
def _fresh_rate() -> None:
    cache.clear()


@pytest.fixture
def job(alice: User, cluster: Cluster) -> Job:
    return Job.objects.create(
        project=alice.memberships.get().project, cluster=cluster, name="ppo",
        namespace="default", owner=alice, spec={"tasks": [], "policies": {}},
        phase=JobPhase.RUNNING,
    )  # fmt: skip


def test_it_compacts_a_finished_run_to_at_least_2000_points_of_every_series(job: Job) -> None:
    """A month-old run of 12,000 progress points over a day, 32 noisy metrics each: after
    compaction at most TRAINYARD_SIGNAL_PROGRESS_POINTS / 2 rows stay, every series keeps at
    least 2,000 points, and a one-point spike in one metric survives."""
    chance = random.Random(11)
    rows = []
    for n in range(12_000):
        metrics = {f"train/m{k}": chance.random() for k in range(32)}
        if n == 7_345:
            metrics["train/m7"] = 80.0
        data = {"step": n, "step_seconds": 8.6, "metrics": metrics}
        at = T0 + timedelta(seconds=7.2 * n)
        rows.append(Signal(job=job, run=1, pod=POD, uid=UID, seq=n, kind="progress", at=at,
                           received_at=at, data=data))  # fmt: skip
    Signal.objects.bulk_create(rows, batch_size=2000)
    intake.compact(job.pk, 1, T0 + timedelta(days=30))
    kept = list(Signal.objects.filter(job=job, kind="progress").values_list("data", flat=True))
    assert len(kept) <= 4000
    for k in range(32):
        assert sum(1 for data in kept if f"train/m{k}" in data["metrics"]) >= 2000
    assert max(data["metrics"]["train/m7"] for data in kept) == 80.0
    steps = [data["step"] for data in kept]
    assert min(steps) == 0 and max(steps) == 11_999


def say(job: Job, at: datetime, *messages: dict[str, Any]) -> None:
    with time_machine.travel(at, tick=False):
        items = BATCH.validate_python([{"pod": POD, "uid": UID, **m} for m in messages])
        record(job.pk, job.run, items)


def test_the_fold_records_a_stall_a_silence_and_a_degradation_when_they_end(job: Job) -> None:
    """Spec §Job status (judge the run by the workload's word): each spell begins when the
    Job's page began to show the state (jobs.status.workload) and ends with the message that
    ended it. Steps every 10 s, then none for 5 minutes while heartbeats come (Stalled from the
    last advance + the 120 s floor), then silence for 4 minutes (Unresponsive after 3 missed
    30 s heartbeats), then a Ray node lost for a minute (Degraded)."""
    seq = iter(range(10_000))
    at = T0
    for step in range(10):
        at = T0 + timedelta(seconds=10 * step)
        say(job, at, {"kind": "progress", "seq": next(seq), "step": step})
    last_advance = at
    for beat in range(1, 11):
        say(
            job,
            last_advance + timedelta(seconds=30 * beat),
            {"kind": "heartbeat", "seq": next(seq)},
        )
    resumed = last_advance + timedelta(seconds=301)
    say(job, resumed, {"kind": "progress", "seq": next(seq), "step": 10})
    back = resumed + timedelta(minutes=4)
    say(job, back, {"kind": "heartbeat", "seq": next(seq)})
    lost = back + timedelta(seconds=10)
    say(job, lost, {"kind": "ray", "seq": next(seq), "expected_nodes": 4, "alive_nodes": 3})
    say(job, lost + timedelta(seconds=30), {"kind": "ray", "seq": next(seq), "expected_nodes": 4,
                                            "alive_nodes": 3})  # fmt: skip
    healed = lost + timedelta(seconds=60)
    say(job, healed, {"kind": "ray", "seq": next(seq), "expected_nodes": 4, "alive_nodes": 4})
    spells = list(WorkloadSpell.objects.filter(job=job).order_by("started_at").values_list(
        "run", "state", "started_at", "ended_at"))  # fmt: skip
    assert spells == [
        (1, WorkloadState.STALLED, last_advance + timedelta(seconds=120), resumed),
        (1, WorkloadState.UNRESPONSIVE, resumed + timedelta(seconds=90), back),
        (1, WorkloadState.DEGRADED, lost, healed),
    ]
