"""What a chart draws from is kept (issue 35): a finished run's progress history after
compaction, and the Stalled / Unresponsive / Degraded spells the fold records."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from console.models import Cluster
from jobs import series
from jobs.choices import JobPhase, WorkloadState
from jobs.downsample import Axis
from jobs.models import Job, SeriesOverview, Signal, WorkloadSpell
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


def test_a_metric_reported_in_every_fifth_message_keeps_2000_points(job: Job) -> None:
    """Compaction counts points per series, not rows: of 12,000 messages, 30 noisy metrics in
    each, `eval/score` in every 5th (2,400 points) and `eval/rare` in every 50th (240): after
    compaction each still has at least 2,000 points, or all of them, spread over the run, and
    the rows stay within the bound."""
    chance = random.Random(12)
    rows = []
    for n in range(12_000):
        metrics = {f"train/m{k}": chance.random() for k in range(30)}
        if n % 5 == 0:
            metrics["eval/score"] = chance.random()
        if n % 50 == 0:
            metrics["eval/rare"] = chance.random()
        at = T0 + timedelta(seconds=7.2 * n)
        rows.append(Signal(job=job, run=1, pod=POD, uid=UID, seq=n, kind="progress", at=at,
                           received_at=at, data={"step": n, "metrics": metrics}))  # fmt: skip
    Signal.objects.bulk_create(rows, batch_size=2000)
    intake.compact(job.pk, 1, T0 + timedelta(days=30))
    kept = list(Signal.objects.filter(job=job, kind="progress").values_list("data", flat=True))
    assert len(kept) <= 4000
    scores = sorted(data["step"] for data in kept if "eval/score" in data["metrics"])
    assert len(scores) >= 2000 and scores[0] == 0 and scores[-1] == 11_995
    assert max(b - a for a, b in pairwise(scores)) <= 20  # no hole
    assert sum(1 for data in kept if "eval/rare" in data["metrics"]) == 240
    assert all(sum(1 for data in kept if f"train/m{k}" in data["metrics"]) >= 2000 for k in (0, 29))


def progress_rows(job: Job, steps: range, spikes: dict[int, dict[str, float]]) -> None:
    chance = random.Random(steps.start)
    rows = []
    for n in steps:
        metrics = {
            "rollout/reward": n / 3000 + chance.gauss(0, 0.05),
            "train/loss": chance.random(),
        }
        metrics.update(spikes.get(n, {}))
        at = T0 + timedelta(minutes=n)
        rows.append(Signal(job=job, run=1, pod=POD, uid=UID, seq=n, kind="progress", at=at,
                           received_at=at, data={"step": n, "metrics": metrics}))  # fmt: skip
    Signal.objects.bulk_create(rows, batch_size=1000)


def test_it_answers_the_whole_run_from_its_overview_with_the_global_min_and_max(
    job: Job, alice: User
) -> None:
    """Over 2,000 progress messages the compaction keeps the run's overview (docs/decisions.md,
    "Charts: the overview"): the whole range is its buckets plus what came since, at most 500
    points a series, with a dip and a spike from before the compaction and a spike after it;
    a zoomed range still reads every stored message in it."""
    progress_rows(job, range(3000), {1234: {"train/loss": -5.0}, 2222: {"rollout/reward": 50.0}})
    intake.compact(job.pk, 1, T0 + timedelta(days=3))
    assert SeriesOverview.objects.get(job=job, run=1).through == Signal.objects.latest("pk").pk
    progress_rows(job, range(3000, 3100), {3050: {"rollout/reward": 99.0}})
    client = Client()
    client.force_login(alice)
    series = client.get(f"/api/v1/jobs/{job.pk}/series").json()["series"]
    by_name = {s["name"]: [value for _t, _step, value in s["points"]] for s in series}
    assert list(by_name) == ["step", "step_rate", "rollout/reward", "train/loss"]
    assert all(len(values) <= 500 for values in by_name.values())
    assert max(by_name["rollout/reward"]) == 99.0 and min(by_name["train/loss"]) == -5.0
    assert (min(by_name["step"]), max(by_name["step"])) == (0, 3099)
    assert by_name["step_rate"] and set(by_name["step_rate"]) == {1.0}
    hour = (T0 + timedelta(minutes=2200)).timestamp()
    zoomed = client.get(
        f"/api/v1/jobs/{job.pk}/series", {"from": str(hour), "to": str(hour + 3600)}
    )
    reward = next(s for s in zoomed.json()["series"] if s["name"] == "rollout/reward")
    assert len(reward["points"]) == 61 and max(p[2] for p in reward["points"]) == 50.0


def test_a_zoom_on_the_step_axis_reads_only_the_stored_messages_of_its_range(
    job: Job, alice: User
) -> None:
    """The overview maps the steps asked to a time span (jobs.downsample.Overview.span), so a
    step range is read from its own rows, not from every stored message of the run; the
    messages stored since the last compaction are found too."""
    progress_rows(job, range(3000), {2222: {"rollout/reward": 50.0}})
    intake.compact(job.pk, 1, T0 + timedelta(days=3))
    progress_rows(job, range(3000, 3100), {3050: {"rollout/reward": 99.0}})
    client = Client()
    client.force_login(alice)

    def reward(start: int, end: int) -> list[list[Any]]:
        params = {"x": "step", "from": str(start), "to": str(end), "names": "rollout/reward"}
        answer = client.get(f"/api/v1/jobs/{job.pk}/series", params).json()
        return list(answer["series"][0]["points"])

    zoomed = reward(2200, 2260)
    assert [p[1] for p in zoomed] == list(range(2200, 2261)) and max(p[2] for p in zoomed) == 50.0
    assert [p[1] for p in reward(3040, 3060)] == list(range(3040, 3061))
    query = series.Query(start=2200, end=2260, axis=Axis.STEP)
    read = Signal.objects.filter(job=job).filter(series._step_window(job, [1], query))
    assert 61 <= read.count() <= 200  # of 3,100 stored


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
