"""The series endpoint (issue 35, "Show"): a run of 1,000,000 progress messages of 32 metrics,
read as the Metrics tab reads it.

What a run stores is bounded by the compaction (jobs.workload.intake;
tests/jobs/test_series_history.py): at most TRAINYARD_SIGNAL_PROGRESS_POINTS progress rows
before the older ones are thinned to half as many, plus whatever arrived within
TRAINYARD_SIGNAL_KEEP_SECONDS. A run that posted 1,000,000 messages over three days (3.9 a second)
therefore never stores more than 8,000 + 2,315 rows, the most just before a compaction. The bench
stores exactly that state: 8,000 rows spread over the three days (the thinned history and what came
since) and the last ten minutes at the full rate, each with a step, a step time and 32 metrics; then
it asks `GET /api/v1/jobs/{id}/series` as the tab does: the whole run, a zoomed hour, the whole run
on the step axis, one series, and the live poll that finds nothing new (204). Server time through
Django's test client (no network), median of REPEAT requests.

Target: at most 100 ms for the whole range and for a zoomed one (issue 35). The first paint of
the tab in Chromium is not measured here.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from console.models import Cluster, Membership, Project
from jobs.choices import JobPhase
from jobs.models import Job, Signal

MESSAGES = 1_000_000
METRICS = 32
RUN_SECONDS = 3 * 86400
REPEAT = 7
TARGET_MS = 100.0
END = datetime(2026, 12, 1, tzinfo=UTC)


def _stored_rows() -> list[tuple[datetime, int]]:
    """(time, step) of each stored row at the compaction's bound: the history, then the window."""
    rate = MESSAGES / RUN_SECONDS
    window = settings.TRAINYARD_SIGNAL_KEEP_SECONDS
    recent = int(rate * window)
    history = settings.TRAINYARD_SIGNAL_PROGRESS_POINTS
    start = END - timedelta(seconds=RUN_SECONDS)
    span = RUN_SECONDS - window
    rows = [start + timedelta(seconds=span * n / history) for n in range(history)]
    rows += [END - timedelta(seconds=window * (recent - n) / recent) for n in range(recent)]
    return [(at, int((at - start).total_seconds() * rate)) for at in rows]


def _data(step: int, chance: random.Random) -> dict[str, Any]:
    learned = 1 - math.exp(-step / 200_000)
    metrics = {
        f"{('env', 'train', 'rollout', 'time')[k % 4]}/m{k:02d}": round(
            learned * (k + 1) + chance.gauss(0, 0.05 * (k + 1)), 5
        )
        for k in range(METRICS)
    }
    return {"step": step, "max_steps": MESSAGES, "step_seconds": 0.26, "metrics": metrics}


def _fill() -> tuple[Client, Job]:
    project = Project.objects.create(name="bench-series")
    user = User.objects.create_user("bench-series")
    Membership.objects.create(user=user, project=project)
    cluster = Cluster.objects.create(name="bench-series")
    job = Job.objects.create(
        project=project, cluster=cluster, name="grpo-1m", namespace="default", owner=user,
        spec={"tasks": []}, phase=JobPhase.RUNNING,
    )  # fmt: skip
    chance = random.Random(35)
    rows = [
        Signal(job=job, run=1, pod="grpo-1m-head-0", uid="u", seq=n, kind="progress", at=at,
               received_at=at, data=_data(step, chance))
        for n, (at, step) in enumerate(_stored_rows())
    ]  # fmt: skip
    Signal.objects.bulk_create(rows, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client, job


def _median_ms(client: Client, path: str, params: dict[str, str]) -> tuple[float, int, int]:
    """(median milliseconds, status, points in the answer)."""
    times, status, points = [], 0, 0
    for _ in range(REPEAT):
        started = time.perf_counter()
        response = client.get(path, params)
        times.append((time.perf_counter() - started) * 1000)
        status = response.status_code
        if status == 200:
            points = sum(len(series["points"]) for series in response.json()["series"])
    return statistics.median(times), status, points


def run() -> str:
    client, job = _fill()
    load = os.getloadavg()[0]
    path = f"/api/v1/jobs/{job.pk}/series"
    hour_from = (END - timedelta(hours=30)).timestamp()
    cursor = client.get(path).json()["cursor"]
    asked = [
        ("the whole run (time axis)", {}, True),
        ("a zoomed hour", {"from": str(hour_from), "to": str(hour_from + 3600)}, True),
        ("the whole run (step axis)", {"x": "step"}, False),
        ("one series, whole run", {"names": "train/m01"}, False),
        ("the live poll, nothing new (204)", {"after": cursor}, False),
    ]
    rows = []
    for label, params, targeted in asked:
        median, status, points = _median_ms(client, path, params)
        verdict = ("PASS" if median <= TARGET_MS else "FAIL") if targeted else "-"
        rows.append(f"| {label} | {status} | {points:,} | {median:.0f} | {verdict} |")
    stored = Signal.objects.filter(job=job).count()
    return "\n".join(
        [
            "## Series endpoint (`bench/series.py`)",
            "",
            f"A run of {MESSAGES:,} progress messages of {METRICS} metrics over three days, "
            f"stored as the compaction bounds it: {stored:,} rows (the most, just before a "
            "compaction). `GET /api/v1/jobs/{id}/series` through Django's test client, median "
            f"of {REPEAT}; 1-minute load average {load:.2f}. Target: at most {TARGET_MS:.0f} ms "
            "for the whole range and for a zoomed one (issue 35).",
            "",
            "| request | status | points answered | median ms | target |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "- Where the time goes: an answer for the whole run reads every stored row of the "
            "run (each a JSON document of 32 metrics, decoded by orjson), makes a column of each "
            "series and reduces each bucket with the built-in min and max; the rows' transfer "
            "and decoding are most of it, and it grows with the stored rows, not with the "
            "answer. A zoomed hour reads only that hour's rows. The whole-range target is not "
            "met on this shared machine; what would meet it is an overview per run kept by the "
            "compaction (the whole run's buckets, read as one row), not built yet.",
        ]
    )
