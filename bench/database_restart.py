"""PostgreSQL restarted under load (issue 13, item 2).

A PostgreSQL server of this run's own (initdb in a temporary directory, as the user `postgres`
when run as root: the server refuses root), the console's processes on it as deployed (a beat, a
Celery worker, gunicorn), one simulated cluster in this process. While an operator stops and
resumes Jobs through the API and a client reads /readyz, a Job and a page, the server is stopped
(`pg_ctl stop -m fast`: every connection is cut, as in a restart or a fail-over), left down for
`DOWN` seconds and started again. Nothing else is touched: no process is restarted.

Targets: within a minute of the server's return, /readyz answers 200, a sync completes and the
API accepts operations again; every operation the API accepted (answered 200) is in the
database and applied (none left `accepted`, none failed), and each Job ends in the state its last
accepted operation asked for; every process of the console is still the one started; while the
database is down, requests are answered (an error status), never left hanging.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from django.conf import settings

from bench import scale_out
from bench.load import _collectstatic, production
from bench.scale_out import Stack, _free_port, _wait_for_web, processes
from simcluster.server import SimCluster

JOBS = 4
OPERATE_EVERY = 0.5  # seconds between two operations
READ_EVERY = 0.25
BEFORE, DOWN, AFTER = 10.0, 5.0, 20.0  # seconds of load before, during and after the outage
RECOVERY_TARGET = 60.0
INTERVAL = 2  # seconds between beats
SEED = """
import json, sys
import django
django.setup()
from django.contrib.auth.models import User
from django.core.management import call_command
from console import tokens
from console.models import Cluster, Membership, Project
from jobs import operations
from jobs.spec import parse_job_spec
call_command("add_cluster", "sim", kubeconfig=sys.argv[1])
user = User.objects.create_user("operator")
project = Project.objects.create(name="restart")
project.clusters.add(Cluster.objects.get(name="sim"))
Membership.objects.create(user=user, project=project, role=Membership.Role.MEMBER)
task = {"role": "worker", "replicas": 1, "image": "ghcr.io/trainyard/rlinf-trainer:0.4.2",
        "resources": {"cpu": "1", "memory": "1Gi"}}
jobs = [operations.create_job(user, parse_job_spec(
    {"name": f"restart-{n}", "cluster": "sim", "project": "restart", "tasks": [task]}, user)).pk
    for n in range(int(sys.argv[2]))]
print(json.dumps({"token": tokens.issue(user, "restart", days=1), "jobs": jobs}))
"""


# --- a PostgreSQL server of this run's own ---------------------------------------------------


class Postgres:
    """initdb, pg_ctl start and stop, in `directory`, on `port`."""

    def __init__(self, directory: Path, port: int) -> None:
        self.data, self.port = directory / "pgdata", port
        self.log = directory / "postgres.log"
        self.directory = directory
        self.url = f"postgres://postgres@127.0.0.1:{port}/trainyard"

    def _run(self, *command: str) -> None:
        """As `postgres` when this process is root (the server refuses to run as root)."""
        binary = shutil.which(command[0])
        assert binary, f"this benchmark needs {command[0]} (PostgreSQL's server programs)"
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, binary, *command[1:]], check=True, capture_output=True,
                       timeout=120)  # fmt: skip

    def create(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                  "--no-sync")  # fmt: skip
        self.start()
        with psycopg.connect(self.url.replace("/trainyard", "/postgres"), autocommit=True) as db:
            db.execute("CREATE DATABASE trainyard")

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory} "
                   "-c fsync=off -c max_connections=100")  # fmt: skip
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w",
                  "start")  # fmt: skip

    def stop(self) -> None:
        """Fast shutdown: every session is cut, open transactions are rolled back."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def query(self, sql: str) -> list[tuple[object, ...]]:
        with psycopg.connect(self.url) as db:
            return db.execute(sql).fetchall()


@contextmanager
def own_postgres(directory: Path) -> Iterator[Postgres]:
    server = Postgres(directory, _free_port())
    server.create()
    try:
        yield server
    finally:
        server.stop()


# --- the load --------------------------------------------------------------------------------


@dataclass
class Answer:
    at: float  # time.monotonic()
    kind: str  # "stop", "resume", "readyz", "job", "page"
    status: int  # 0: no answer (connection refused, timeout)
    seconds: float


@dataclass
class Figures:
    answers: list[Answer] = field(default_factory=list)
    down_at: float = 0.0
    up_at: float = 0.0
    synced_after: float | None = None  # seconds from the server's return to a completed sync
    accepted: int = 0  # operations answered 200
    stored: Counter[str] = field(default_factory=Counter)  # Operation rows by result
    expected: dict[int, bool] = field(default_factory=dict)  # Job -> stopped, as last accepted
    ended: dict[int, bool] = field(default_factory=dict)  # Job -> stopped, in the database
    alive: bool = False  # every process still the one started

    def first_ok_after_up(self, kinds: tuple[str, ...]) -> float | None:
        oks = [a.at - self.up_at for a in self.answers
               if a.kind in kinds and a.status == 200 and a.at >= self.up_at]  # fmt: skip
        return min(oks) if oks else None

    def during(self, phase: str) -> list[Answer]:
        bounds = {"before": (0.0, self.down_at), "down": (self.down_at, self.up_at),
                  "after": (self.up_at, float("inf"))}[phase]  # fmt: skip
        return [a for a in self.answers if bounds[0] <= a.at < bounds[1]]

    def held(self) -> bool:
        ready, operating = (
            self.first_ok_after_up(("readyz",)),
            self.first_ok_after_up(("stop", "resume")),
        )
        recovered = all(
            seconds is not None and seconds <= RECOVERY_TARGET
            for seconds in (ready, operating, self.synced_after)
        )
        unanswered = sum(1 for a in self.answers if a.status == 0)
        nothing_lost = (
            self.stored["applied"] >= self.accepted
            and self.stored["accepted"] == 0
            and self.stored["failed"] == 0
            and self.ended == self.expected
        )
        return recovered and nothing_lost and self.alive and unanswered == 0


def _ask(method: str, url: str, token: str = "") -> tuple[int, float]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()
            status = answer.status
    except urllib.error.HTTPError as error:
        status = error.code
    except OSError:
        status = 0
    return status, time.monotonic() - started


def operate(base: str, token: str, jobs: list[int], stop: threading.Event,
            figures: Figures) -> None:  # fmt: skip
    """Stop, then resume, each Job in turn; what the API accepted is what each Job must end as."""
    stopped = dict.fromkeys(jobs, False)
    index = 0
    while not stop.wait(OPERATE_EVERY):
        job = jobs[index % len(jobs)]
        action = "resume" if stopped[job] else "stop"
        status, seconds = _ask("POST", f"{base}/api/v1/jobs/{job}/{action}", token)
        figures.answers.append(Answer(time.monotonic(), action, status, seconds))
        if status == 200:
            stopped[job] = action == "stop"
            figures.accepted += 1
        index += 1
    figures.expected = stopped


READS = [("readyz", "/readyz"), ("job", "/api/v1/jobs/{job}"), ("page", "/accounts/login/")]


def read(base: str, token: str, job: int, stop: threading.Event, figures: Figures) -> None:
    index = 0
    while not stop.wait(READ_EVERY):
        kind, path = READS[index % len(READS)]
        status, seconds = _ask("GET", base + path.format(job=job), token if kind == "job" else "")
        figures.answers.append(Answer(time.monotonic(), kind, status, seconds))
        index += 1


# --- the run ---------------------------------------------------------------------------------


def measure(before: float = BEFORE, down: float = DOWN, after: float = AFTER) -> Figures:
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        server = stack.enter_context(own_postgres(directory))
        sim = stack.enter_context(SimCluster(nodes=2, gpus_per_node=8, speed=10))
        kubeconfig = sim.write_kubeconfig(directory / "sim.kubeconfig", namespace="default")
        env = scale_out._environment(directory, INTERVAL) | production(directory)
        env |= {"DATABASE_URL": server.url}
        _collectstatic(env)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v", "0"],
            env=env,
            cwd=settings.BASE_DIR,
            check=True,
            capture_output=True,
            timeout=300,
        )
        seeded = subprocess.run([sys.executable, "-c", SEED, str(kubeconfig), str(JOBS)], env=env,
                                cwd=settings.BASE_DIR, check=True, capture_output=True,
                                timeout=120)  # fmt: skip
        plan = json.loads(seeded.stdout.decode().strip().splitlines()[-1])
        port = _free_port()
        web = ("-c", "deploy/gunicorn.conf.py", "-w", "2")
        deployed = Stack(interval=INTERVAL, workers=1, concurrency=2, web=web, env=env)
        started = stack.enter_context(processes(directory, port, deployed))
        _wait_for_web(port)
        _wait_for_sync(server, datetime.min.replace(tzinfo=UTC), timeout=120)
        figures = _load(server, f"http://127.0.0.1:{port}", plan, (before, down, after))
        _converge(server, figures)
        figures.alive = all(process.poll() is None for process in started)
        return figures
    raise AssertionError("unreachable")


def _last_sync(server: Postgres) -> datetime | None:
    try:
        rows = server.query("SELECT last_synced_at FROM console_cluster")
    except psycopg.Error:
        return None
    return rows[0][0] if rows else None  # type: ignore[return-value]


def _wait_for_sync(server: Postgres, after: datetime, timeout: float) -> float | None:
    """Seconds until the cluster's last sync is later than `after`; None past `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        synced = _last_sync(server)
        if synced is not None and synced > after:
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def _load(
    server: Postgres, base: str, plan: dict[str, object], spans: tuple[float, float, float]
) -> Figures:
    """The load for `before` seconds, the server stopped for `down`, then `after` more."""
    before, down, after = spans
    figures, stop = Figures(), threading.Event()
    token, jobs = str(plan["token"]), list(plan["jobs"])  # type: ignore[call-overload]
    threads = [
        threading.Thread(target=operate, args=(base, token, jobs, stop, figures)),
        threading.Thread(target=read, args=(base, token, jobs[0], stop, figures)),
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(before)
        figures.down_at = time.monotonic()
        server.stop()
        time.sleep(down)
        server.start()
        figures.up_at, up = time.monotonic(), datetime.now(UTC)
        figures.synced_after = _wait_for_sync(server, up, timeout=RECOVERY_TARGET)
        time.sleep(max(0.0, figures.up_at + after - time.monotonic()))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return figures


def _converge(server: Postgres, figures: Figures) -> None:
    """Waits (at most the recovery target) until no operation is left accepted, then reads
    what the database holds."""
    waiting = "SELECT count(*) FROM jobs_operation WHERE result = 'accepted'"
    deadline = time.monotonic() + RECOVERY_TARGET
    while server.query(waiting)[0][0] and time.monotonic() < deadline:
        time.sleep(0.5)
    rows = server.query(
        "SELECT result, count(*) FROM jobs_operation WHERE action IN ('stop', 'resume') "
        "GROUP BY result"
    )
    figures.stored = Counter({str(result): int(count) for result, count in rows})  # type: ignore[call-overload]
    jobs = server.query("SELECT id, stopped FROM jobs_job")
    figures.ended = {int(pk): bool(stopped) for pk, stopped in jobs}  # type: ignore[call-overload]


# --- the report ------------------------------------------------------------------------------

KINDS = [
    ("operations (stop, resume)", ("stop", "resume")),
    ("a Job read through the API", ("job",)),
    ("`/readyz`", ("readyz",)),
    ("the login page", ("page",)),
]
PHASES = {"before": "before", "down": "while down", "after": "after its return"}


def _statuses(answers: list[Answer]) -> str:
    counted = Counter("no answer" if a.status == 0 else str(a.status) for a in answers)
    return ", ".join(f"{status}: {count}" for status, count in sorted(counted.items())) or "—"


def table(figures: Figures) -> str:
    rows = [
        "| Requests | " + " | ".join(PHASES.values()) + " |",
        "|---|---|---|---|",
    ]
    for label, kinds in KINDS:
        cells = [_statuses([a for a in figures.during(p) if a.kind in kinds]) for p in PHASES]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    slowest = max((a.seconds for a in figures.during("down")), default=0.0)
    rows += ["", f"The slowest answer while the server was down took {slowest:.2f} s."]
    return "\n".join(rows)


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def section(figures: Figures) -> str:
    verdict = "held" if figures.held() else "NOT held"
    ready = _seconds(figures.first_ok_after_up(("readyz",)))
    operating = _seconds(figures.first_ok_after_up(("stop", "resume")))
    synced = _seconds(figures.synced_after)
    stored = ", ".join(f"{result} {count}" for result, count in sorted(figures.stored.items()))
    same = sum(figures.ended.get(pk) == stopped for pk, stopped in figures.expected.items())
    restarted = "none" if figures.alive else "one or more did"
    setup = (
        f"A PostgreSQL server of the benchmark's own, stopped (`pg_ctl stop -m fast`: every "
        f"connection cut) {BEFORE:.0f} s into the load and started again {DOWN:.0f} s later, "
        f"under a Celery worker (concurrency 2), a beat every {INTERVAL} s and gunicorn (2 "
        f"workers, production settings), with one simulated cluster. Meanwhile an operator "
        f"stops and resumes {JOBS} Jobs through the API (one operation every {OPERATE_EVERY} s) "
        f"and a client asks for `/readyz`, a Job through the API and the login page in turn "
        f"(one request every {READ_EVERY} s). Answers by status (`python -m bench "
        f"database_restart`; CI-sized in `tests/console/test_database_restart.py`):"
    )
    targets = (
        f"- Targets ({verdict}): within {RECOVERY_TARGET:.0f} s of the server's return, "
        f"`/readyz` answered 200 ({ready}), a sync completed ({synced}) and the API accepted "
        f"an operation ({operating}); every operation accepted was applied ({figures.accepted} "
        f"answered 200; stored: {stored}); each Job ended as its last accepted operation left "
        f"it ({same} of {len(figures.expected)}); no process restarted ({restarted}); every "
        f"request answered."
    )
    meanwhile = (
        "- While the database is down, every request is answered at once (nothing listens, "
        "so a connection attempt fails fast): 503 with `Retry-After` and a message saying the "
        "database is not answering (console.errors), `/readyz` 503 naming the database. The "
        "worker's cycle fails and gives its lease back as soon as the database answers "
        "(console.engine.cycle.release), so the first tick after that syncs the cluster. "
        'Nothing has to be restarted (docs/operations.md, "Restarts").'
    )
    title = "## PostgreSQL restarted under load"
    return "\n".join([title, "", setup, "", table(figures), "", targets, meanwhile])


def run() -> str:
    return section(measure())
