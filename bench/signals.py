"""Signal intake (issue 10): 1,000 pods each posting one message every 10 s for 10 simulated
minutes to POST /api/v1/jobs/{id}/signals; the server-side latency of each request (p50, p95,
max; target p95 under 20 ms) and the rows kept after compaction.

Requests go through Django's test client in this process (middleware, token check, validation,
insert, compaction: the whole server side, without a network or gunicorn); simulated time moves
in 10 s steps (time_machine), so 60,000 requests take minutes, not ten.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from datetime import UTC, datetime, timedelta

import time_machine
from django.test import Client

from console.models import Cluster, Project
from jobs.models import Job, Signal
from jobs.signals import signal_token

PODS = 1_000
ROUNDS = 60  # 10 minutes at one message every 10 s
TARGET_MS = 20.0
KINDS = ("heartbeat", "progress", "heartbeat", "ray", "heartbeat", "progress")


def run() -> str:
    job = _job()
    headers = {"Authorization": f"Bearer {signal_token(job.pk, job.run)}"}
    client, path, timings = Client(HTTP_HOST="localhost"), f"/api/v1/jobs/{job.pk}/signals", []
    with time_machine.travel(datetime(2026, 12, 1, tzinfo=UTC), tick=False) as clock:
        for round_ in range(ROUNDS):
            for pod in range(PODS):
                body = json.dumps(_message(pod, round_))
                started = time.perf_counter()
                response = client.post(path, body, "application/json", headers=headers)
                timings.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 202, response.content
            clock.shift(timedelta(seconds=10))
    return _report(timings, Signal.objects.filter(job=job).count())


def _job() -> Job:
    project = Project.objects.create(name="bench")
    cluster = Cluster.objects.create(name="bench", kubeconfig="-")
    return Job.objects.create(
        project=project, cluster=cluster, name="bench", namespace="rl", spec={"tasks": []}
    )


def _message(pod: int, round_: int) -> dict[str, object]:
    kind = KINDS[round_ % len(KINDS)]
    fields: dict[str, object] = {}
    if kind == "progress":
        fields = {"step": round_, "max_steps": 1000, "metrics": {"loss": 0.5, "reward": 1.0}}
    elif kind == "ray":
        fields = {"expected_nodes": 4, "alive_nodes": 4}
    return {"kind": kind, "pod": f"bench-w-{pod}", "uid": f"uid-{pod}", "seq": round_, **fields}


def _report(timings: list[float], rows: int) -> str:
    ordered = sorted(timings)
    p95 = ordered[int(len(ordered) * 0.95)]
    verdict = "PASS" if p95 <= TARGET_MS else "FAIL"
    return "\n".join([
        "## Signal intake",
        "",
        f"{PODS:,} pods each post one message (heartbeat, progress or Ray) every 10 s for "
        f"{ROUNDS * 10 / 60:g} simulated minutes: {len(timings):,} requests to "
        "`POST /api/v1/jobs/{id}/signals` through Django's test client in one process (the "
        "whole server side, no network or gunicorn); wall time per request in ms. 1-minute load "
        f"average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores.",
        "",
        "| p50 ms | p95 ms | max ms | rows kept |",
        "|---:|---:|---:|---:|",
        f"| {statistics.median(ordered):.1f} | {p95:.1f} | {ordered[-1]:.1f} | {rows:,} |",
        "",
        f"- {verdict}: p95 {p95:.1f} ms (target ≤ {TARGET_MS:.0f} ms)",
        f"- rows kept: {rows:,} for {len(timings):,} messages (nothing younger than "
        "TRAINYARD_SIGNAL_KEEP_SECONDS is compacted, so 10 minutes keep most of them)",
    ])  # fmt: skip
