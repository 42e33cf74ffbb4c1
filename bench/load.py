"""Load (issue 13, item 4): the console as deployed, under people, operations and pods at once.

The stack is scale-out's (bench/scale_out.py `processes`) with production settings: gunicorn
with deploy/gunicorn.conf.py (its 4 sync workers), one beat (a sync every 10 s), one Celery
worker (`-Q sync,reconcile,default`, concurrency 2), `TRAINYARD_DEBUG=false`, PostgreSQL and
Redis. A simulated cluster (its own process, real-time clock) runs 10,000 pods: 1,000 Jobs of one
10-replica StatefulSet each, made by the console's own reconcile (bench/sync_cycle.py's rows).

locust (bench/locustfile.py, its own virtualenv: requirements-bench.txt) then runs, headless:
- 200 people with a job page open and its worker rows expanded, refreshed as htmx does every
  5 s (with the version of the last answer: 204 when unchanged), the page reloaded once a minute;
- 5 operations a second through the API (stop, later resume, of 200 other Jobs);
- 1,000 pods of 100 running Jobs posting a signal every 10 s with their Job's signal token;
while the beat and worker keep syncing the cluster.

Targets: 0 failed requests; p95 below 300 ms and p99 below 1 s for every request kind.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import F
from django.test import Client

from bench.scale_out import (
    Stack,
    _environment,
    _free_port,
    _wait_for_web,
    processes,
    watch_cycles,
)
from bench.sync_cycle import PER_SET, Sim, _bring_up, _rows
from console import tokens
from console.engine.cycle import sync_cluster
from console.engine.gateways import gateway_for
from console.models import Cluster, Membership, Project
from console.web import POLL_SECONDS
from jobs.choices import Action, JobPhase
from jobs.models import Job
from jobs.status.lifecycle import allowed_actions
from jobs.workload.intake import signal_token
from workers.models import Worker

PODS = 10_000
ACCOUNTS = 20  # people share accounts, each with a session of their own
OPERATED_JOBS = 200  # stopped and resumed in turn
SIGNAL_SECONDS = 10
RUN_SECONDS = 90  # spawning included; figures are counted from its end (--reset-stats)
SPAWN_RATE = 100  # users started per second
INTERVAL = 10  # production's TRAINYARD_SYNC_INTERVAL
P95_TARGET_MS, P99_TARGET_MS = 300, 1000
STACK = Stack(interval=INTERVAL, workers=1, concurrency=2, web=("-c", "deploy/gunicorn.conf.py"))
LOCUST = Path(os.environ.get("TRAINYARD_LOCUST", settings.BASE_DIR / "var/bench/venv/bin/locust"))
ACCESS_FORMAT = "%(r)s %(s)s %(L)s"  # request line, status, seconds in the worker
# On a machine shared with other work: the stack ahead of it, locust ahead of the stack.
STACK_NICENESS, LOCUST_NICENESS = -15, -19
# The simulated cluster stands in for an API server on machines of its own: here it takes only
# the CPU that the console, PostgreSQL, Redis and locust leave.
SIM_NICENESS = 19
# The stack's processes, by a word of their command line.
GROUPS = ("gunicorn", "celery", "simcluster", "locust")


@dataclass(frozen=True)
class Scenario:
    name: str
    people: int  # with a job page open
    operators: int  # one operation a second each
    signal_jobs: int  # of PER_SET pods each, every pod posting

    @property
    def pods(self) -> int:
        return self.signal_jobs * PER_SET

    def asked(self) -> float:
        """Requests a second the scenario asks for: two polls per person every POLL_SECONDS,
        the page and its worker rows once a minute, the operations, the signals."""
        return (
            self.people * (2 / POLL_SECONDS + 2 / 60) + self.operators + self.pods / SIGNAL_SECONDS
        )


# The issue's scenario, then the same with a quarter of the people and pods: what this machine
# holds once it is not short of CPU (both on the same stack, one after the other).
SCENARIOS = (Scenario("full", 200, 5, 100), Scenario("quarter", 50, 5, 25))


@dataclass
class Kind:
    """One request kind of locust's stats CSV (times in ms)."""

    name: str
    requests: int
    failures: int
    median: float
    p95: float
    p99: float
    worst: float
    per_second: float
    served: list[float] = field(default_factory=list)  # gunicorn's own time per request


@dataclass
class Figures:
    scenario: Scenario
    kinds: list[Kind]
    codes: dict[str, int]
    seconds: float  # locust's run
    cycles: int
    mean_gap: float
    longest_gap: float
    pods_reported: int
    load: list[float] = field(default_factory=list)  # 1-minute load average, sampled
    cpu: dict[str, float] = field(default_factory=dict)  # cores used per process group
    busy: float = 0.0  # cores the whole machine used
    locust_niceness: int = 0

    def total(self) -> Kind:
        return next(kind for kind in self.kinds if kind.name == "Aggregated")

    def held(self) -> bool:
        return all(
            kind.failures == 0 and kind.p95 < P95_TARGET_MS and kind.p99 < P99_TARGET_MS
            for kind in self.kinds
        )

    def web_ms(self) -> float:
        """gunicorn's CPU time per request answered."""
        return 1000 * self.cpu.get("gunicorn", 0) / max(self.total().per_second, 1e-9)


# --- preparing -------------------------------------------------------------------------------


def _cluster(sim: Sim) -> Cluster:
    """The 1,000 Jobs applied by one reconcile, brought up, and synced until all are Running."""
    sets = PODS // PER_SET
    cluster = Cluster.objects.create(
        name="load", kubeconfig=sim.kubeconfig.read_text(), namespace="bench"
    )
    _rows(cluster, sets)
    Project.objects.get(name="bench").clusters.add(cluster)
    sync_cluster(cluster.pk)
    _bring_up(sim, gateway_for(cluster), sets)
    deadline = time.monotonic() + 120
    while Job.objects.filter(cluster=cluster).exclude(phase=JobPhase.RUNNING).exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the Jobs did not all turn Running")
        sync_cluster(cluster.pk)
    return cluster


def _people() -> list[User]:
    project = Project.objects.get(name="bench")
    people = [User.objects.create_user(f"person-{index:02d}") for index in range(ACCOUNTS)]
    Membership.objects.bulk_create(
        Membership(user=user, project=project, role=Membership.Role.MEMBER) for user in people
    )
    return people


def _plan(cluster: Cluster, people: list[User], scenario: Scenario) -> dict[str, object]:
    """What locust needs: sessions and pages, operators' tokens and Jobs (each with the
    operation its state allows first), pods and their tokens."""
    jobs = list(Job.objects.filter(cluster=cluster).order_by("pk").prefetch_related("tasks"))
    operated = jobs[:OPERATED_JOBS]
    posting = jobs[OPERATED_JOBS : OPERATED_JOBS + scenario.signal_jobs]
    watched = random.Random(0).choices(jobs[OPERATED_JOBS:], k=scenario.people)
    return {
        "poll_seconds": POLL_SECONDS,
        "signal_seconds": SIGNAL_SECONDS,
        "session_cookie": settings.SESSION_COOKIE_NAME,
        "pages": [_page(people[index % ACCOUNTS], job) for index, job in enumerate(watched)],
        "operators": [
            {
                "token": tokens.issue(people[index], "load", days=1),
                "jobs": _operated(operated[index :: scenario.operators]),
            }
            for index in range(scenario.operators)
        ],
        "pods": _pods(posting),
    }


def _operated(jobs: list[Job]) -> list[tuple[int, str]]:
    """Each Job with the operation its phase allows first (spec §Job status)."""
    return [
        (job.pk, "stop" if Action.STOP in allowed_actions(JobPhase(job.phase), job.stopped)
         else "resume")
        for job in jobs
    ]  # fmt: skip


def _pods(jobs: list[Job]) -> list[dict[str, object]]:
    workers = Worker.objects.filter(task__job__in=jobs).select_related("task__job")
    return [
        {"job": worker.task.job_id, "pod": worker.pod_name, "uid": worker.pod_uid,
         "token": signal_token(worker.task.job_id, worker.task.job.run)}
        for worker in workers
    ]  # fmt: skip


def _page(user: User, job: Job) -> dict[str, str]:
    """A session of its own, and the job page with the worker rows of its Task."""
    client = Client()
    client.force_login(user)
    task = job.tasks.all()[0]
    return {
        "session": client.cookies[settings.SESSION_COOKIE_NAME].value,
        "page": f"/jobs/{job.pk}/",
        "workers": f"/jobs/{job.pk}/tasks/{task.pk}/workers/",
    }


def production(directory: Path) -> dict[str, str]:
    """The settings of docs/operations.md for a production console, on plain HTTP here."""
    return {
        "TRAINYARD_DEBUG": "false",
        "TRAINYARD_SECURE_SSL_REDIRECT": "false",
        "TRAINYARD_SECURE_COOKIES": "false",
        "TRAINYARD_ALLOWED_HOSTS": "127.0.0.1",
        "TRAINYARD_STATIC_ROOT": str(directory / "static"),
        "PROMETHEUS_MULTIPROC_DIR": str(directory / "prometheus"),
        # The reconciles of this run plan what the first one applied: the same signal URL.
        "TRAINYARD_PUBLIC_URL": settings.TRAINYARD_PUBLIC_URL,
    }


def _collectstatic(env: dict[str, str]) -> None:
    """As the image does at build time: out of debug mode, pages name the hashed files."""
    command = [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"]
    subprocess.run(command, env=env, cwd=settings.BASE_DIR, check=True, timeout=120)


# --- measuring -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Process:
    pid: int
    parent: int
    command: str
    seconds: float  # CPU time (user + system) used so far


def processes_now() -> dict[int, Process]:
    """Every process of the machine with the CPU time it has used (/proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        used = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        found[int(proc.name)] = Process(int(proc.name), int(fields[1]), command, used)
    return found


def _ours(found: dict[int, Process]) -> set[int]:
    """This process and every process it started, however deep."""
    ours, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, process in found.items() if process.parent in ours} - ours
        ours |= more
        grew = bool(more)
    return ours


def group_of(process: Process, ours: set[int], database: str) -> str:
    """The stack's processes by name; PostgreSQL's backends of this database and Redis, which
    serve this run (the servers may serve other work too); anything else is other work."""
    if process.pid == os.getpid():
        return "this benchmark process"
    if process.pid in ours:
        return next((name for name in GROUPS if name in process.command), "other of ours")
    if process.command.startswith("postgres:") and f" {database} " in process.command:
        return "postgres"
    if process.command.startswith("redis-server"):
        return "redis"
    return "other work on the machine"


def cpu_used(before: dict[int, Process], after: dict[int, Process]) -> dict[str, float]:
    """CPU seconds used between the two readings, per group (processes alive at the end; one
    started in between counts from its start)."""
    database = str(settings.DATABASES["default"]["NAME"])
    ours, used = _ours(after), defaultdict[str, float](float)
    for pid, process in after.items():
        earlier = before.get(pid)
        spent = process.seconds - (earlier.seconds if earlier else 0)
        used[group_of(process, ours, database)] += max(spent, 0.0)
    return used


def busy_seconds() -> tuple[float, float]:
    """CPU time the whole machine has used (every core: /proc/stat), and of it the kernel's
    interrupt handling (network packets: irq, softirq), which no process is charged for."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split()[1:9]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields) - idle) / tick, (fields[5] + fields[6]) / tick


def _sample_load(stop: threading.Event, load: list[float]) -> None:
    while not stop.wait(5):
        load.append(os.getloadavg()[0])


def ahead_of_other_work() -> None:
    """This process and all it starts at STACK_NICENESS, and so is its scheduling group: with
    autogroups (Linux's default for desktops and many servers) the CPU is first shared between
    sessions, whatever the niceness inside each, so other sessions' work would take its share
    however nice the stack. Left as they are without the privilege."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, STACK_NICENESS)
    with contextlib.suppress(OSError), Path("/proc/self/autogroup").open("w") as autogroup:
        autogroup.write(str(STACK_NICENESS))


def _ahead_of_other_work(stop: threading.Event) -> None:
    """The console's processes (gunicorn, Celery) and PostgreSQL's backends of this database
    at STACK_NICENESS (the simulated cluster stays at SIM_NICENESS),
    every second (gunicorn replaces a worker, Django reopens a connection after CONN_MAX_AGE):
    on a machine shared with other work, as a dedicated one would give them the CPU. Left as
    they are without the privilege."""
    while not stop.wait(1):
        found = processes_now()
        ours, database = _ours(found), str(settings.DATABASES["default"]["NAME"])
        for process in found.values():
            if group_of(process, ours, database) in ("gunicorn", "celery", "postgres"):
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, process.pid, STACK_NICENESS)


def _ahead_of_the_stack() -> None:
    """In locust's process before it starts: a higher priority than the stack's, so that
    when they compete for a CPU locust still reads each answer as it arrives (its times are
    the clients' waits, not its own). Left as is without the privilege to raise it."""
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, LOCUST_NICENESS)


def niceness(pid: int) -> int:
    return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[16])


def run_locust(
    plan: dict[str, object], scenario: Scenario, port: int, directory: Path
) -> tuple[float, int]:
    """locust, headless, for RUN_SECONDS; returns its wall time and the niceness it ran at."""
    (directory / "plan.json").write_text(json.dumps(plan))
    users = scenario.people + scenario.operators + scenario.pods
    env = dict(
        os.environ,
        TRAINYARD_LOAD_PLAN=str(directory / "plan.json"),
        TRAINYARD_LOAD_CODES=str(directory / "codes.json"),
    )
    command = [str(LOCUST), "-f", str(settings.BASE_DIR / "bench/locustfile.py"), "--headless",
               "-u", str(users), "-r", str(SPAWN_RATE), "-t", f"{RUN_SECONDS}s", "--reset-stats",
               "--only-summary", "--csv", str(directory / scenario.name), "--exit-code-on-error",
               "0", "--stop-timeout", "5", "--host", f"http://127.0.0.1:{port}"]  # fmt: skip
    started = time.monotonic()
    with (directory / f"locust-{scenario.name}.log").open("wb") as log:
        locust = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  preexec_fn=_ahead_of_the_stack)  # fmt: skip
        ran_at = niceness(locust.pid)
        if locust.wait(timeout=RUN_SECONDS + 120):
            raise RuntimeError(f"locust failed: see {log.name}")
    return time.monotonic() - started, ran_at


def read_stats(path: Path) -> list[Kind]:
    """The kinds answered at least once after the spawning (locust writes N/A for the others)."""
    with path.open() as stats:
        return [
            Kind(
                name=row["Name"], requests=int(row["Request Count"]),
                failures=int(row["Failure Count"]), median=float(row["50%"]),
                p95=float(row["95%"]), p99=float(row["99%"]), worst=float(row["Max Response Time"]),
                per_second=float(row["Requests/s"]),
            )
            for row in csv.DictReader(stats)
            if row["50%"] != "N/A"
        ]  # fmt: skip


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def kind_of(method: str, path: str) -> str:
    """The locustfile's name for a request, from gunicorn's access log."""
    if path.endswith("/signals"):
        return "signal"
    if path.startswith("/api/"):
        return f"operation ({path.rstrip('/').rsplit('/', 1)[-1]})"
    if "part=status" in path:
        return "status poll"
    if "/workers/" in path:
        return "worker rows poll" if "v=" in path else "worker rows"
    return "job page" if path.startswith("/jobs/") else ""


def served(kinds: list[Kind], log: Path, offset: int) -> list[Kind]:
    """Each kind with gunicorn's own times (ms, from parsing to the last byte written) for the
    requests logged after `offset` (spawning included): what the console took, apart from any
    wait before a worker took the request."""
    times: dict[str, list[float]] = defaultdict(list)
    with log.open() as lines:
        lines.seek(offset)
        for line in lines:
            parts = line.strip().strip("'").split()
            name = kind_of(parts[0], parts[1]) if len(parts) >= 3 else ""
            if name:
                times[name].append(float(parts[-1]) * 1000)
                times["Aggregated"].append(float(parts[-1]) * 1000)
    for kind in kinds:
        kind.served = sorted(times.get(kind.name, []))
    return kinds


def _percentile(ordered: list[float], share: float) -> str:
    return f"{ordered[min(len(ordered) - 1, int(share * len(ordered)))]:.0f} ms" if ordered else ""


def _wait_for_a_sync(cluster: Cluster, timeout: float = 60) -> None:
    """The stack's own beat and worker have synced the cluster once (a new last_synced_at)."""
    before = Cluster.objects.get(pk=cluster.pk).last_synced_at
    deadline = time.monotonic() + timeout
    while Cluster.objects.get(pk=cluster.pk).last_synced_at == before:
        if time.monotonic() > deadline:
            raise RuntimeError("the stack's worker did not sync the cluster")
        time.sleep(0.2)


def measure() -> list[Figures]:
    directory = settings.BASE_DIR / "var" / "bench" / "load"  # kept: the processes' logs
    ahead_of_other_work()
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    with ExitStack() as stack:
        sim = Sim(directory, nodes=PODS // 100 + 2, speed=1, niceness=SIM_NICENESS)
        stack.callback(sim.stop)
        cluster = _cluster(sim)
        people = _people()
        stack_env = production(directory)
        _collectstatic(_environment(directory, INTERVAL) | stack_env)
        port = _free_port()
        web = (*STACK.web, "--access-logfile", str(directory / "access.log"),
               "--access-logformat", ACCESS_FORMAT)  # fmt: skip
        deployed = Stack(STACK.interval, STACK.workers, STACK.concurrency, web, stack_env)
        stack.enter_context(processes(directory, port, deployed))
        _wait_for_web(port)
        _wait_for_a_sync(cluster)
        return [
            _observe(cluster, scenario, _plan(cluster, people, scenario), port, directory)
            for scenario in SCENARIOS
            if scenario.name in os.environ.get("TRAINYARD_LOAD_SCENARIOS", scenario.name)
        ]
    raise AssertionError("unreachable")


def _observe(
    cluster: Cluster, scenario: Scenario, plan: dict[str, object], port: int, directory: Path
) -> Figures:
    seen: dict[str, list[datetime]] = {"load": []}
    load: list[float] = []
    stop = threading.Event()
    threads = [
        threading.Thread(target=watch_cycles, args=({cluster.pk: "load"}, stop, seen)),
        threading.Thread(target=_sample_load, args=(stop, load)),
        threading.Thread(target=_ahead_of_other_work, args=(stop,)),
    ]
    for thread in threads:
        thread.start()
    before, busy_before = processes_now(), busy_seconds()
    logged = _size(directory / "access.log")
    locust_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        seconds, locust_niceness = run_locust(plan, scenario, port, directory)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    after, busy_after = processes_now(), busy_seconds()
    locust = resource.getrusage(resource.RUSAGE_CHILDREN)  # locust has ended: counted here
    cpu = {group: used / seconds for group, used in cpu_used(before, after).items()}
    cpu["locust"] = (
        locust.ru_utime + locust.ru_stime - locust_before.ru_utime - locust_before.ru_stime
    ) / seconds
    busy = (busy_after[0] - busy_before[0]) / seconds
    cpu["kernel (interrupts)"] = (busy_after[1] - busy_before[1]) / seconds
    cpu["processes that ended"] = max(0.0, busy - sum(cpu.values()))
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(seen["load"])]
    return Figures(
        scenario=scenario,
        kinds=served(read_stats(directory / f"{scenario.name}_stats.csv"),
                     directory / "access.log", logged),
        codes=json.loads((directory / "codes.json").read_text()),
        seconds=seconds, cycles=max(0, len(seen["load"]) - 1),
        mean_gap=statistics.mean(gaps) if gaps else seconds, longest_gap=max(gaps, default=seconds),
        pods_reported=_pods_reported(cluster), load=load, cpu=cpu, busy=busy,
        locust_niceness=locust_niceness,
    )  # fmt: skip


def _pods_reported(cluster: Cluster) -> int:
    """Worker rows in their Task's last report (stopped Jobs' pods are gone from it)."""
    workers = Worker.objects.filter(task__job__cluster=cluster)
    count = workers.filter(last_reported_at__gte=F("task__observed_at")).count()
    connection.close()
    return count


# --- the report ------------------------------------------------------------------------------


def table(figures: Figures) -> str:
    rows = [
        "| Request kind | Requests | Per second | Failures | Median | p95 | p99 | Max "
        "| In gunicorn: median | p95 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in figures.kinds:
        name = "**all**" if kind.name == "Aggregated" else kind.name
        rows.append(
            f"| {name} | {kind.requests:,} | {kind.per_second:.1f} | {kind.failures} | "
            f"{kind.median:.0f} ms | {kind.p95:.0f} ms | {kind.p99:.0f} ms | {kind.worst:.0f} ms "
            f"| {_percentile(kind.served, 0.5)} | {_percentile(kind.served, 0.95)} |"
        )
    return "\n".join(rows)


def _rate(figures: Figures, prefix: str) -> float:
    return sum(kind.per_second for kind in figures.kinds if kind.name.startswith(prefix))


def _codes(figures: Figures) -> str:
    return ", ".join(f"{name}: {count:,}" for name, count in sorted(figures.codes.items()))


def _cpu(figures: Figures) -> str:
    used = sorted(figures.cpu.items(), key=lambda item: -item[1])
    return ", ".join(f"{group} {cores:.2f}" for group, cores in used if cores >= 0.01)


def section(figures: Figures) -> str:
    scenario, total = figures.scenario, figures.total()
    load = figures.load or [os.getloadavg()[0]]
    verdict = "held" if figures.held() else "NOT held"
    return "\n".join([
        f"### {scenario.people} people, {scenario.pods:,} pods posting, {scenario.operators} "
        "operations a second",
        "",
        table(figures),
        "",
        f"- Targets ({verdict}): 0 failures ({total.failures}); for every request kind p95 below "
        f"{P95_TARGET_MS} ms and p99 below {P99_TARGET_MS / 1000:g} s (all: p95 "
        f"{total.p95:.0f} ms, p99 {total.p99:.0f} ms).",
        f"- Asked for {scenario.asked():.0f} requests a second, answered {total.per_second:.0f}: "
        f"operations {_rate(figures, 'operation'):.1f} a second (asked {scenario.operators}), "
        f"signals {_rate(figures, 'signal'):.1f} (asked {scenario.pods / SIGNAL_SECONDS:.0f}). "
        "A user waits for an answer before its next request, as a browser tab does, so slow "
        "answers lower the rate.",
        f"- Answers by status: {_codes(figures)}.",
        f"- The poller meanwhile: {figures.cycles} sync cycles of the cluster (mean gap "
        f"{figures.mean_gap:.1f} s, longest {figures.longest_gap:.1f} s, interval {INTERVAL} s); "
        f"{figures.pods_reported:,} pods of {PODS:,} in the last report at the end (the pods of "
        "Jobs stopped at that moment are gone from it).",
        f"- Machine: {figures.busy:.2f} of {os.cpu_count()} cores busy; 1-minute load average "
        f"{min(load):.1f} to {max(load):.1f}. Cores used: {_cpu(figures)}. The stack's "
        "processes are counted by process tree, PostgreSQL by its backends of this database; "
        '"other work on the machine" is every other process alive at the end, "processes '
        'that ended" what the machine used beside all these (short-lived processes). locust '
        f"ran at niceness {figures.locust_niceness}, the console (gunicorn, Celery) and its "
        f"scheduling group at {STACK_NICENESS}; PostgreSQL and Redis, servers shared with the "
        "other work, in their own scheduling groups (only this database's backends reniced); "
        "the simulated cluster, which stands in for an API server on machines of its own, at "
        f"{SIM_NICENESS} in a scheduling group of its own: it takes only the CPU the others "
        "leave. gunicorn used "
        f"{figures.web_ms():.1f} ms of CPU per request answered.",
        f"- Time in gunicorn (its access log: from parsing the request to the last byte "
        f"written) against the time locust saw, medians of all requests: "
        f"{_percentile(total.served, 0.5) or '—'} against {total.median:.0f} ms. The "
        "difference is spent before a worker takes the request (gunicorn's listen queue, "
        "waiting for a CPU) or in locust, not in the console's work.",
    ])  # fmt: skip


OTHER_WORK = ("other work on the machine", "processes that ended")


def unchanged_share(figures: Figures) -> float:
    """The share of polls answered 204 (nothing changed)."""
    polls = {name: count for name, count in figures.codes.items() if " poll " in name}
    unchanged = sum(count for name, count in polls.items() if name.endswith(" 204"))
    return unchanged / max(sum(polls.values()), 1)


def why(results: list[Figures]) -> str:
    """Where an answer's time goes: the CPU the web server alone would need for the whole
    scenario, from its measured cost, beside what the rest of the stack and other work used."""
    full = results[0]
    needed = full.scenario.asked() * full.web_ms() / 1000
    other = sum(full.cpu.get(group, 0) for group in OTHER_WORK)
    stack = sum(full.cpu.values()) - other - full.cpu.get("gunicorn", 0)
    shares = ", ".join(
        f"{unchanged_share(figures):.0%} in the {figures.scenario.name} scenario"
        for figures in results
    )
    return (
        f"- Where the time goes: the console's own work is the time in gunicorn above; the rest "
        "of an answer's time is spent before a web process takes the request (gunicorn's "
        f"listen queue, a turn on a CPU). At {full.web_ms():.1f} ms of CPU per request, the "
        f"{full.scenario.asked():.0f} requests a second of the full scenario need "
        f"{needed:.2f} cores for gunicorn alone, beside {stack:.2f} cores for locust, "
        f"PostgreSQL, Celery, the simulated cluster and this process, and {other:.2f} cores "
        f"that other work on this shared machine took, on a machine of {os.cpu_count()} cores. "
        f"Polls answered 204 (unchanged): {shares}; a 204 is decided from the version's facts "
        'alone ("Jobs pages" above: its queries and CPU), and a poll that re-renders does so '
        "for a change or for the 30 s age step. Signals are the most frequent request "
        '("Signal intake" above).'
    )


def _machine() -> str:
    """The processor's model and the machine's cores and memory."""
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.startswith("model name")), "an unknown processor")  # fmt: skip
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores of {model}, {memory:.0f} GiB of memory"


def report(results: list[Figures]) -> str:
    return "\n".join([
        "## Load",
        "",
        f"Run at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {_machine()}.",
        "",
        "gunicorn with `deploy/gunicorn.conf.py` (4 sync workers), one Celery worker "
        f"(concurrency {STACK.concurrency}) and one beat (a sync every {INTERVAL} s), "
        "`TRAINYARD_DEBUG=false`, PostgreSQL and Redis, all on this machine with the simulated "
        f"cluster ({PODS:,} pods: {PODS // PER_SET:,} Jobs of one {PER_SET}-replica "
        "StatefulSet) and locust (FastHttpUser, `bench/locustfile.py`). Each person has a job "
        f"page open with its worker rows expanded, both refreshed every {POLL_SECONDS} s as "
        "htmx does (`HX-Request`, the version of the last answer: 204 when unchanged), and "
        "reloads the page once a minute; each operator makes one operation a second (stop, "
        f"then resume, through the API); each pod posts a signal every {SIGNAL_SECONDS} s "
        "(heartbeats, a progress report every third). Each person, operator and pod starts at "
        "a random moment within its period and keeps its own pace from there, as people and "
        "pods that started independently do (not in step with the others). The issue's "
        "scenario first, then the "
        "same with a quarter of the people and pods, on the same stack. locust runs "
        f"{RUN_SECONDS} s each time; the figures count from the end of its spawning "
        "(`--reset-stats`).",
        "",
        *(section(figures) + "\n" for figures in results),
        why(results),
        "- Reproduce: `make bench` (every benchmark), or this one alone: `make bench-tools` "
        "(locust, requirements-bench.txt), then "
        "`DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard_bench "
        "REDIS_URL=redis://127.0.0.1:6379/3 .venv/bin/python -m bench load` "
        "(docs/operations.md, \"Load test\").",
    ])  # fmt: skip


def run() -> str:
    engine = str(settings.DATABASES["default"]["ENGINE"])
    if not (engine.endswith("postgresql") and settings.REDIS_URL):
        return (
            "## Load\n\nNot run: it needs PostgreSQL and Redis (DATABASE_URL and REDIS_URL, as "
            "`make bench` sets them)."
        )
    return report(measure())
