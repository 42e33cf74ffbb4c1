"""Signal intake (issue 10): 1,000 pods (100 Jobs of 10 pods) each posting one message every
10 s for 10 minutes to POST /api/v1/jobs/{id}/signals, against gunicorn as deployed
(bench/load.py's production settings, deploy/gunicorn.conf.py) on PostgreSQL.

The 10 minutes are real ones, at the real arrival rate (100 requests a second). Compressing them
would multiply the arrival rate by the same factor (the number of messages is fixed), and the
latency measured would be that of another load; nothing else needs simulating, since the run
posts `at` as the time it sends and the server's compaction runs on its own clock. What the
table looks like once the keep window has passed is then asked of the same compaction with a
later `now` (`compact_later`).

The mix is a run's (`scenario`): each pod sends heartbeats and progress (3 to 8 metrics) in
turn, a phase when it starts, trains and finalizes; the head pod of each Job also Ray
membership every minute, a checkpoint every two, and the Job's one completion at the end.
The pods are threads of this process, one each; its CPU is reported.

Targets: p95 below 20 ms (as the pods see it), 0 errors (no 429: one message per 10 s is far
under the per-pod rate cap), every message accepted once, one WorkloadReport per Job, and the
rows bounded by the compaction once the keep window has passed.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import resource
import shutil
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.load import ACCESS_FORMAT, busy_seconds, production
from bench.scale_out import Stack, _free_port, _wait_for_web, processes
from console.models import Cluster, Project
from jobs.choices import JobPhase
from jobs.models import Job, Signal, WorkloadReport
from jobs.workload.intake import KEEP_LATEST, compact, signal_token

JOBS, PODS_PER_JOB = 100, 10
INTERVAL = 10  # seconds between one pod's messages
# 10 minutes; fewer on a machine too busy for the whole run (the report says how many)
ROUNDS = 6 * int(os.environ.get("TRAINYARD_BENCH_SIGNAL_MINUTES", "10"))
P95_TARGET_MS = 20.0
TIMEOUT = 30  # seconds a pod waits for an answer (gunicorn's own worker timeout)
NO_ANSWER = 0  # the code counted for a request that got none
METRICS = ("loss", "reward", "entropy", "kl", "grad_norm", "lr", "advantage", "value_loss")
STACK = Stack(workers=0, web=("-c", "deploy/gunicorn.conf.py"))


# --- the scenario ------------------------------------------------------------------------------


def message(job: int, pod: int, round_: int, rounds: int, at: datetime) -> dict[str, Any]:
    """Pod `pod` (0 is the head) of Job `job`, its `round_`-th message of `rounds`."""
    fields: dict[str, Any] = {"kind": "heartbeat"}
    if round_ in (0, 1, rounds - 2):
        fields = {"kind": "phase", "phase": ("starting", "training", "finalizing")[min(round_, 2)]}
    elif pod == 0 and round_ == rounds - 1:
        fields = {"kind": "completion", "outcome": "succeeded", "exit_code": 0}
    elif pod == 0 and round_ % 12 == 6:
        fields = {"kind": "checkpoint", "step": round_, "path": f"/ckpt/global_step_{round_}"}
    elif pod == 0 and round_ % 6 == 3:
        fields = {"kind": "ray", "expected_nodes": PODS_PER_JOB, "alive_nodes": PODS_PER_JOB}
    elif round_ % 2 == 1:
        fields = _progress(pod, round_, rounds)
    return fields | {
        "pod": f"train-{job}-worker-{pod}",
        "uid": str(uuid.UUID(int=job * PODS_PER_JOB + pod)),
        "seq": round_,
        "at": at.isoformat(),
    }


def _progress(pod: int, round_: int, rounds: int) -> dict[str, Any]:
    values = random.Random(pod * 1_000 + round_)
    names = METRICS[: 3 + (pod + round_) % 6]  # 3 to 8 metrics
    return {
        "kind": "progress", "step": round_, "max_steps": rounds, "step_seconds": INTERVAL / 2,
        "metrics": {name: round(values.uniform(-1, 1), 4) for name in names},
    }  # fmt: skip


def scenario(rounds: int = ROUNDS) -> Counter[str]:
    """How many messages of each kind one Job's pods send over `rounds`."""
    at = datetime(2026, 12, 1, tzinfo=UTC)
    return Counter(
        message(1, pod, round_, rounds, at)["kind"]
        for pod in range(PODS_PER_JOB)
        for round_ in range(rounds)
    )


# --- posting -----------------------------------------------------------------------------------


@dataclass
class Posted:
    """What the pods saw: each request's time (ms) and answer."""

    times: list[float] = field(default_factory=list)
    codes: Counter[int] = field(default_factory=Counter)
    accepted: int = 0
    duplicates: int = 0
    late: float = 0.0  # seconds the most late request was sent after its time
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class Pod:
    job: int
    index: int
    token: str
    offset: float  # seconds after the start of each round


def _pods(jobs: list[Job]) -> list[Pod]:
    """Every pod, its first message spread evenly over the first interval."""
    count = len(jobs) * PODS_PER_JOB
    return [
        Pod(
            job.pk,
            index,
            signal_token(job.pk, job.run),
            INTERVAL * (n * PODS_PER_JOB + index) / count,
        )
        for n, job in enumerate(jobs)
        for index in range(PODS_PER_JOB)
    ]


def _post(pod: Pod, port: int, rounds: int, started: float, posted: Posted) -> None:
    """One pod's messages at their times. gunicorn's sync workers close every connection
    after answering, so each request opens its own, as a pod's client would."""
    server = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    headers = {"Authorization": f"Bearer {pod.token}", "Content-Type": "application/json"}
    for round_ in range(rounds):
        when = started + pod.offset + INTERVAL * round_
        time.sleep(max(0.0, when - time.monotonic()))
        late = time.monotonic() - when
        body = json.dumps(message(pod.job, pod.index, round_, rounds, datetime.now(UTC)))
        sent = time.perf_counter()
        try:
            server.request("POST", f"/api/v1/jobs/{pod.job}/signals", body, headers)
            response = server.getresponse()
            status, answer = response.status, response.read()
        except (OSError, http.client.HTTPException):  # no answer within the timeout: an error
            server.close()
            status, answer = NO_ANSWER, b""
        spent = (time.perf_counter() - sent) * 1000
        counts = json.loads(answer) if status == 202 else {}
        with posted.lock:
            posted.times.append(spent)
            posted.codes[status] += 1
            posted.accepted += counts.get("accepted", 0)
            posted.duplicates += counts.get("duplicates", 0)
            posted.late = max(posted.late, late)
    server.close()


def post_all(jobs: list[Job], port: int, rounds: int) -> tuple[Posted, float]:
    """Every pod's messages, one thread per pod; (what they saw, wall seconds)."""
    posted, started = Posted(), time.monotonic() + 1
    threads = [
        threading.Thread(target=_post, args=(pod, port, rounds, started, posted), daemon=True)
        for pod in _pods(jobs)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return posted, time.monotonic() - started


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Figures:
    posted: Posted
    seconds: float
    rounds: int
    served: list[float]  # gunicorn's own time per request (ms), in the order answered
    cpu: dict[str, float]  # cores used per process group, the client included
    rows: int  # Signal rows at the end
    kept_later: dict[str, int]  # rows of each kind once the keep window has passed
    reports: int
    compact_seconds: float
    queries: tuple[int, int]  # of a heartbeat that compacts, of one that does not
    reports_size: str  # the WorkloadReport table on disk at the end, and PostgreSQL's autovacuum


def _jobs() -> list[Job]:
    project = Project.objects.create(name="bench")
    cluster = Cluster.objects.create(name="bench", kubeconfig="-")
    return Job.objects.bulk_create(
        Job(project=project, cluster=cluster, name=f"train-{n:03d}", namespace="rl",
            spec={"tasks": []}, phase=JobPhase.RUNNING)
        for n in range(JOBS)
    )  # fmt: skip


def compact_later(jobs: list[Job]) -> float:
    """The compaction a request would run once the keep window has passed since the last
    message, for every kind and pod of every Job; its seconds."""
    later = datetime.now(UTC) + timedelta(seconds=settings.TRAINYARD_SIGNAL_KEEP_SECONDS + 1)
    started = time.perf_counter()
    for job in jobs:
        compact(job.pk, job.run, later)
    return time.perf_counter() - started


def _served(log: Path) -> list[float]:
    """gunicorn's time (ms) per signal request, from its access log (bench/load.py's format)."""
    times = []
    for line in log.read_text().splitlines():
        parts = line.strip().strip("'").split()
        if len(parts) >= 3 and parts[1].endswith("/signals"):
            times.append(float(parts[-1]) * 1000)
    return times


def measure(rounds: int = ROUNDS) -> Figures:
    directory = settings.BASE_DIR / "var" / "bench" / "signals"  # kept: the processes' logs
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    jobs = _jobs()
    access = directory / "access.log"
    web = (*STACK.web, "--access-logfile", str(access), "--access-logformat", ACCESS_FORMAT)
    port = _free_port()
    with processes(directory, port, Stack(STACK.interval, 0, 1, web, production(directory))):
        _wait_for_web(port)
        before = {"web": _used(resource.RUSAGE_CHILDREN), "client": _used(resource.RUSAGE_SELF)}
        busy = busy_seconds()[0]
        posted, seconds = post_all(jobs, port, rounds)
        cpu = {
            "PostgreSQL (this database's backends)": _database_cpu(),
            "client (this process)": _used(resource.RUSAGE_SELF) - before["client"],
            "machine": busy_seconds()[0] - busy,
        }
    cpu["web (gunicorn, the beat)"] = _used(resource.RUSAGE_CHILDREN) - before["web"]
    rows = Signal.objects.count()
    queries = count_queries(jobs[0], rounds)
    compact_seconds = compact_later(jobs)
    figures = Figures(
        posted, seconds, rounds, _served(access),
        {group: used / seconds for group, used in cpu.items()}, rows, _kept(),
        WorkloadReport.objects.count(), compact_seconds, queries, _reports_size(),
    )  # fmt: skip
    connection.close()
    return figures


def count_queries(job: Job, rounds: int) -> tuple[int, int]:
    """The queries of two more heartbeats of one pod, in this process: the first compacts its
    Job's older signals (its report made to say it is due), the second is plain."""
    WorkloadReport.objects.filter(job=job).update(compacted_at=None)
    client = Client(HTTP_HOST="localhost")
    headers = {"Authorization": f"Bearer {signal_token(job.pk, job.run)}"}
    counted = []
    for seq in (rounds, rounds + 1):
        body = message(job.pk, 1, 2, 2, datetime.now(UTC)) | {"seq": seq}  # a heartbeat
        with CaptureQueriesContext(connection) as queries:
            response = client.post(
                f"/api/v1/jobs/{job.pk}/signals", json.dumps(body), "application/json",
                headers=headers,
            )  # fmt: skip
        assert response.status_code == 202, response.content
        counted.append(len(queries.captured_queries))
    return counted[0], counted[1]


def _reports_size() -> str:
    """The reports' table as it ended (every signal rewrites its Job's row), and whether the
    server vacuums by itself: the table must not grow with the messages either way."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('jobs_workloadreport')), "
            "current_setting('autovacuum')"
        )
        size, autovacuum = cursor.fetchone()
    return f"{size} on disk (PostgreSQL's autovacuum {autovacuum} on this machine)"


def _by_minute(served: list[float], rounds: int) -> str:
    """gunicorn's p50 / p95 (ms) minute by minute, in the order answered: flat when nothing
    grows with the messages stored."""
    minutes = max(1, rounds * INTERVAL // 60)
    size = max(1, len(served) // minutes)
    chunks = [sorted(served[n * size : (n + 1) * size]) for n in range(minutes)]
    return ", ".join(
        f"{_percentile(chunk, 0.5):.0f}/{_percentile(chunk, 0.95):.0f}" for chunk in chunks if chunk
    )


def _kept() -> dict[str, int]:
    return dict(Signal.objects.order_by().values_list("kind").annotate(rows=Count("pk")))


def _used(who: int) -> float:
    """CPU seconds of this process (RUSAGE_SELF) or of its children ended and waited for."""
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime


def _database_cpu() -> float:
    """CPU seconds the PostgreSQL backends of this database (the web workers' connections,
    kept between requests) have used, from /proc: the server is shared with other databases."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        pids = [pid for (pid,) in cursor.fetchall()]
    used = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone, or on another machine
            continue
        used += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return used


# --- the report --------------------------------------------------------------------------------


def _percentile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def _cpu(figures: Figures) -> str:
    used = sorted(figures.cpu.items(), key=lambda item: -item[1])
    return ", ".join(f"{group} {cores:.2f}" for group, cores in used if group != "machine")


def _others(figures: Figures) -> float:
    ours = sum(cores for group, cores in figures.cpu.items() if group != "machine")
    return max(0.0, figures.cpu["machine"] - ours)


def _by_kind(rows: dict[str, int]) -> str:
    return ", ".join(f"{kind} {count:,}" for kind, count in sorted(rows.items()))


def _kinds(rounds: int) -> str:
    return ", ".join(f"{kind} {count * JOBS:,}" for kind, count in scenario(rounds).most_common())


def report(figures: Figures) -> str:
    posted, sent = figures.posted, len(figures.posted.times)
    seen, served = sorted(posted.times), sorted(figures.served)
    p95 = _percentile(seen, 0.95)
    errors = sent - posted.codes[202]
    held = p95 < P95_TARGET_MS and errors == 0 and posted.accepted == sent
    kept = figures.kept_later
    compacted = kept.get("heartbeat") == JOBS * PODS_PER_JOB and kept.get("ray") == JOBS
    held = held and figures.reports == JOBS and compacted
    codes = ", ".join(
        f"{code or 'no answer'}: {count:,}" for code, count in sorted(posted.codes.items())
    )
    web = figures.cpu["web (gunicorn, the beat)"] * figures.seconds
    minutes = figures.rounds * INTERVAL / 60
    return "\n".join([
        "## Signal intake",
        "",
        f"{JOBS * PODS_PER_JOB:,} pods ({JOBS} Jobs of {PODS_PER_JOB}) each post one message "
        f"every {INTERVAL} s for {minutes:g} minute{'' if minutes == 1 else 's'} to "
        "`POST /api/v1/jobs/{id}/signals`, "
        "against gunicorn with `deploy/gunicorn.conf.py` (4 sync workers) and the production "
        "settings of the load benchmark, on PostgreSQL (no Celery worker: a signal needs none). "
        f"Messages sent: {_kinds(figures.rounds)}; progress carries 3 to 8 metrics. The minutes "
        "are real ones at the real arrival rate: compressing them would multiply the arrival "
        "rate (the messages are as many), and measure another load. Each message's `at` is "
        "when it was sent, and the server compacts on its own clock, so the compaction sees the "
        "whole span. The pods are threads of this process, one each, every request on a "
        "connection of its own (gunicorn's sync workers close it after answering).",
        "",
        "| Requests | Per second | p50 | p95 | p99 | Max | In gunicorn: p50 | p95 | p99 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {sent:,} | {sent / figures.seconds:.1f} | {_percentile(seen, 0.5):.1f} ms "
        f"| {p95:.1f} ms | {_percentile(seen, 0.99):.1f} ms | {seen[-1]:.0f} ms "
        f"| {_percentile(served, 0.5):.1f} ms | {_percentile(served, 0.95):.1f} ms "
        f"| {_percentile(served, 0.99):.1f} ms |",
        "",
        f"- Targets ({'held' if held else 'NOT held'}): p95 below {P95_TARGET_MS:.0f} ms as "
        f"the pods saw it ({p95:.1f} ms); 0 errors ({errors}; answers {codes}); every message "
        f"accepted once ({posted.accepted:,} accepted, {posted.duplicates} duplicates); "
        f"{figures.reports} WorkloadReport rows for {JOBS} Jobs; the rows bounded (below).",
        "- In gunicorn, minute by minute (p50/p95 ms): "
        f"{_by_minute(figures.served, figures.rounds)}. "
        f"The {JOBS} WorkloadReport rows, each rewritten by every signal of its Job: "
        f"{figures.reports_size}.",
        f"- Signal rows at the end: {figures.rows:,} for {sent:,} messages: nothing received "
        f"within `TRAINYARD_SIGNAL_KEEP_SECONDS` ({settings.TRAINYARD_SIGNAL_KEEP_SECONDS} s) "
        "is compacted, so a run as long as the window keeps them all. Once the window has "
        "passed, the same compaction (run here with a `now` one window later, "
        f"{figures.compact_seconds:.1f} s for all {JOBS} Jobs) keeps {sum(kept.values()):,}: "
        f"{_by_kind(kept)}. That is the newest heartbeat of each pod and Ray report of each "
        "head pod, every progress point (fewer than `TRAINYARD_SIGNAL_PROGRESS_POINTS`, "
        f"{settings.TRAINYARD_SIGNAL_PROGRESS_POINTS}, per Job run: thinned beyond), and the "
        f"phases, checkpoints and completions (the latest {KEEP_LATEST} of each per Job run): "
        "however long the run, at most that plus the messages of the last window.",
        f"- Statements per request: {figures.queries[1]} for a heartbeat (the token's Job; "
        "then BEGIN, the insert, the report locked and updated, COMMIT), "
        f"{figures.queries[0]} for one that also compacts its Job's older signals (each Job "
        "run at most once a minute, whichever web process folds the message that finds it due; "
        "after the commit, in transactions of their own).",
        f"- CPU over the {figures.seconds:.0f} s, in cores: {_cpu(figures)}; gunicorn "
        f"{1000 * web / max(sent, 1):.1f} ms per request. A pod waits for its answer before "
        f"its next message: the latest left {figures.posted.late:.2f} s after its time. The "
        f"machine ({os.cpu_count()} cores) was busy {figures.cpu['machine']:.2f} cores on average, "
        f"{_others(figures):.2f} of them for other work sharing it; its 1-minute load average was "
        f"{os.getloadavg()[0]:.2f} at the end: the latency includes waiting for a CPU.",
        "- Reproduce: `make bench`, or this one alone: `DATABASE_URL=postgres://postgres@"
        "127.0.0.1:5432/trainyard_bench REDIS_URL=redis://127.0.0.1:6379/3 .venv/bin/python "
        "-m bench signal_intake` (about 11 minutes; `TRAINYARD_BENCH_SIGNAL_MINUTES=1` for a "
        "one-minute run).",
    ])  # fmt: skip


def run() -> str:
    if not str(settings.DATABASES["default"]["ENGINE"]).endswith("postgresql"):
        return (
            "## Signal intake\n\nNot run: it needs PostgreSQL (DATABASE_URL, as `make bench` "
            "sets it)."
        )
    return report(measure())
