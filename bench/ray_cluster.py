"""Ray cluster (issue 31, item 3): the RLinf template's pod commands on a real Ray.

`ray[default]` from the package index, in a virtualenv of its own (`make ray-tools`:
requirements-ray.txt, var/bench/ray-venv). On this machine, as processes on the loopback
(no containers): a head and a worker run the scripts `jobs.rlinf` writes, under `bash -c` as
their containers do, with only what a machine shared with others needs changed — Ray's ports
(the GCS and the dashboard on the ports below instead of 6379 and 8265, every other port of
Ray's named, so nothing collides with other work), the head's address (the loopback instead
of its Service's DNS name) and where the driver wrapper lives (client/ here, /opt/trainyard
in an image). The head's driver wrapper runs bench/ray_entry.py, a tiny entry that runs a task
on each Ray node and prints five steps, and posts its signals to a receiver here that hands
them to the console's own intake (POST /api/v1/jobs/{id}/signals) and derives the Job's
workload state after each batch, as the pages do.

Each round:
1. the head starts; once its wrapper has reported Ray membership (1 of 2 nodes alive: it waits
   for its nodes), the worker starts JOIN_DELAY seconds later, as when its pod is scheduled
   or pulls its image a little after the head's (most runs);
2. the entry runs and completes; every workload state derived on the way is recorded;
3. a stop, as the console's scales both StatefulSets to 0: SIGTERM to the head's and the
   worker's main processes at once; when the head's ends, its container's other processes go
   with it (SIGKILL to its process group, as the container's end does); the time until the
   worker's main process leaves is measured, and then what is left of its processes.
The first round runs the worker script the template writes now; the second the one it wrote
before issue 31 (`exec ray start ... --block`), for comparison.

Targets: the worker leaves within 10 s of SIGTERM; no state is Degraded while the nodes gather,
and no Degraded spell is stored for the start.
Every process is bounded in time; at the end `ray stop --force` (this virtualenv's Ray) and a
look for anything left of it.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import Client
from django.utils import translation

from console.models import Cluster, Project
from jobs.choices import JobPhase, WorkloadState
from jobs.messages import encode, render_text
from jobs.models import Job, WorkloadReport, WorkloadSpell
from jobs.rlinf import RAY_PORT, RlinfIn, expand, head_dns, head_script, worker_script
from jobs.workload.intake import signal_token
from jobs.workload.report import workload_of

ROOT = Path(settings.BASE_DIR)
VENV = Path(os.environ.get("TRAINYARD_RAY_VENV", ROOT / "var/bench/ray-venv"))
ENTRY = ROOT / "bench" / "ray_entry.py"
DRIVER = ROOT / "client" / "trainyard_driver.py"
JOB = "raybench"
# This machine's ports for the benchmark (issue 31's round: 8120-8129), and Ray's own.
RECEIVER_PORT, GCS_PORT, DASHBOARD_PORT = 8120, 8121, 8122
COMMON = "--node-ip-address=127.0.0.1 --num-cpus=1 --num-gpus=0 --object-store-memory=100000000"
HEAD_PORTS = (
    f"--dashboard-host=127.0.0.1 --dashboard-port={DASHBOARD_PORT} --node-manager-port=20101 "
    "--object-manager-port=20102 --ray-client-server-port=20103 "
    "--dashboard-agent-listen-port=20104 --dashboard-agent-grpc-port=20105 "
    "--metrics-export-port=20106 --runtime-env-agent-port=20107 "
    "--min-worker-port=20000 --max-worker-port=20049"
)
WORKER_PORTS = (
    "--node-manager-port=20111 --object-manager-port=20112 --dashboard-agent-listen-port=20114 "
    "--dashboard-agent-grpc-port=20115 --metrics-export-port=20116 "
    "--runtime-env-agent-port=20117 --min-worker-port=20050 --max-worker-port=20099"
)
# The worker script the template wrote before issue 31, for comparison.
PREVIOUS_WORKER = (
    "set -eo pipefail; "
    "export RLINF_NODE_RANK=$(( ${HOSTNAME##*-} + 1 )); "
    f'exec ray start --address="{head_dns("${TRAINYARD_JOB}")}:{RAY_PORT}" --block'
)
JOIN_DELAY = 5.0  # seconds between the head's first Ray report and the worker's start
STEPS = 5
START_SECONDS = 240.0  # the head's start, the join and the entry, at most
STOP_SECONDS = 45.0  # a worker still there after this is killed (Ray's drain is 30 s)
STOP_TARGET = 10.0


# --- the console's side: the signals in, the workload state out --------------------------------


@dataclass
class Seen:
    """One batch the wrapper posted, and the Job's workload state right after it."""

    seconds: float  # since the head started
    kinds: list[str]
    state: str
    reason: str
    code: str  # the reason's code (jobs.messages)


@dataclass
class Console:
    job: Job
    started: float = field(default_factory=time.monotonic)
    seen: list[Seen] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def take(self, body: bytes, authorization: str) -> int:
        client = Client(HTTP_HOST="localhost")
        answer = client.post(
            f"/api/v1/jobs/{self.job.pk}/signals", body, "application/json",
            headers={"Authorization": authorization},
        )  # fmt: skip
        messages = json.loads(body)
        kinds = [
            m.get("kind", "") for m in (messages if isinstance(messages, list) else [messages])
        ]
        workload = workload_of(Job.objects.select_related("workload").get(pk=self.job.pk))
        with translation.override("en"):
            reason = render_text(encode(workload.reason)) if workload.reason else ""
        code = workload.reason.code if workload.reason else ""
        seen = Seen(time.monotonic() - self.started, kinds, str(workload.state), reason, code)
        with self.changed:
            self.seen.append(seen)
            self.changed.notify_all()
        return int(answer.status_code)

    def wait_for(self, kind: str, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(
                lambda: any(kind in seen.kinds for seen in self.seen), timeout
            )


class Handler(http.server.BaseHTTPRequestHandler):
    server: Receiver
    disable_nagle_algorithm = True  # docs: STACK, Python http.server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        code = self.server.console.take(body, self.headers.get("Authorization", ""))
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


class Receiver(http.server.HTTPServer):
    def __init__(self, console: Console) -> None:
        super().__init__(("127.0.0.1", RECEIVER_PORT), Handler)
        self.console = console


@contextmanager
def receiving(console: Console) -> Iterator[None]:
    server = Receiver(console)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def bench_job(name: str) -> Job:
    project = Project.objects.create(name=f"raybench-{name}")
    cluster = Cluster.objects.create(name=f"raybench-{name}", kubeconfig="-")
    spec = expand(choices(Path("/tmp")))  # the spec's shape; the scripts run are built below
    return Job.objects.create(
        project=project, cluster=cluster, name=JOB, namespace="default", spec=spec,
        phase=JobPhase.RUNNING,
    )  # fmt: skip


# --- the pods, as processes ----------------------------------------------------------------------


def choices(out: Path) -> RlinfIn:
    return RlinfIn(
        image="bench", nodes=2, gpus_per_node=0, entry=str(ENTRY), config_name="bench",
        log_path=str(out), overrides=[f"runner.max_steps={STEPS}"],
    )  # fmt: skip


def replaced(script: str, old: str, new: str) -> str:
    """`old` swapped for `new`, which must occur exactly once: a template that no longer
    writes it fails here rather than running something else."""
    assert script.count(old) == 1, f"{old!r} is not in the script once: {script}"
    return script.replace(old, new)


def head_command(out: Path, temp: Path) -> str:
    script = replaced(
        head_script(choices(out)), f"ray start --head --port={RAY_PORT} --block",
        f"ray start --head --port={GCS_PORT} {COMMON} {HEAD_PORTS} --temp-dir={temp} "
        "--disable-usage-stats --block",
    )  # fmt: skip
    return replaced(script, "python /opt/trainyard/trainyard_driver.py", f"python {DRIVER}")


def worker_command(script: str) -> str:
    address = f'--address="{head_dns("${TRAINYARD_JOB}")}:{RAY_PORT}"'
    return replaced(
        script, f"ray start {address} --block",
        f'ray start --address="127.0.0.1:{GCS_PORT}" {COMMON} {WORKER_PORTS} '
        "--disable-usage-stats --block",
    )  # fmt: skip


def pod_env(job: Job, pod: str, role: int, scratch: Path) -> dict[str, str]:
    """A container's environment: the Task's (the template's), and what the console sets."""
    task_env = expand(choices(scratch))["tasks"][role]["env"]
    return {
        **task_env,
        "PATH": f"{VENV / 'bin'}:/usr/bin:/bin",
        "HOME": str(scratch),
        "HOSTNAME": pod,
        "TRAINYARD_JOB": JOB,
        "TRAINYARD_RUN": str(job.run),
        "TRAINYARD_POD": pod,
        "TRAINYARD_POD_UID": f"uid-{pod}",
        "TRAINYARD_SIGNAL_URL": f"http://127.0.0.1:{RECEIVER_PORT}/api/v1/jobs/{job.pk}/signals",
        "TRAINYARD_SIGNAL_TOKEN": signal_token(job.pk, job.run),
        "TRAINYARD_HEARTBEAT_SECONDS": "2",
        "TRAINYARD_TERMINATION_LOG": str(scratch / f"{pod}.termination-log"),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def start(script: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`bash -c script` in a session of its own (a container's processes, killable together)."""
    with log.open("wb") as output:
        return subprocess.Popen(
            ["bash", "-c", script], env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


def left_of(session: int) -> list[str]:
    """The names of a session's live processes (not zombies: killed, waiting to be reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == session and fields[0] != "Z":
                found.append((entry / "comm").read_text().strip())
    return sorted(found)


def kill_session(session: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(session, signal.SIGKILL)


def gone_after(process: subprocess.Popen[bytes], since: float, limit: float) -> float | None:
    """Seconds from `since` until the process ended; None when it outlived `limit`."""
    try:
        process.wait(max(limit - (time.monotonic() - since), 0))
    except subprocess.TimeoutExpired:
        return None
    return time.monotonic() - since


# --- a round ------------------------------------------------------------------------------------


@dataclass
class Round:
    worker: str  # which worker script
    seen: list[Seen]
    tasks_line: str  # what the entry said of the nodes its tasks ran on
    completion: str
    worker_left: float | None  # seconds after SIGTERM; None: still there at STOP_SECONDS
    worker_code: int | None
    worker_leftovers: list[str]  # its processes alive 1 s after it left
    worker_started: float  # seconds after the head
    head_left: float | None
    degraded_spells: int  # WorkloadSpell rows of state Degraded stored for the run (the chart's)

    @property
    def degraded(self) -> bool:
        """Degraded at any point: a state derived after a batch, or a spell the fold stored."""
        derived = any(seen.state == WorkloadState.DEGRADED for seen in self.seen)
        return derived or self.degraded_spells > 0

    def gathering(self) -> str:
        """The batches that said fewer nodes than expected while the wrapper waited for them
        (each Degraded under the rule before issue 31), and for how long."""
        waits = [seen.seconds for seen in self.seen if seen.code == "workload.gathering"]
        after = [seen.seconds for seen in self.seen if waits and seen.seconds > waits[-1]]
        if not waits:
            return "no batch said fewer nodes than expected"
        until = after[0] if after else waits[-1]
        return (
            f"{len(waits)} batches said fewer nodes than expected while the wrapper waited, "
            f"{until - waits[0]:.1f} s of the start (from {waits[0]:.1f} s): each read Degraded "
            "under the rule before issue 31, Starting now"
        )


def run_round(name: str, worker: str, scratch: Path) -> Round:
    scratch.mkdir(parents=True)
    job = bench_job(name)
    console = Console(job)
    out, temp = scratch / "output", scratch / "ray"
    head = worker_process = None
    try:
        with receiving(console):
            console.started = time.monotonic()
            head_env = pod_env(job, f"{JOB}-head-0", 0, scratch)
            head = start(head_command(out, temp), head_env, scratch / f"{name}-head.log")
            assert console.wait_for("ray", START_SECONDS), "the wrapper never reported Ray"
            time.sleep(JOIN_DELAY)
            worker_env = pod_env(job, f"{JOB}-worker-0", 1, scratch)
            worker_started = time.monotonic() - console.started
            worker_process = start(
                worker_command(worker), worker_env, scratch / f"{name}-worker.log"
            )
            assert console.wait_for("completion", START_SECONDS), "no completion came"
            stop = stopped(head, worker_process)
        return Round(
            name, console.seen, tasks_line(scratch / f"{name}-head.log"),
            completion_of(job), *stop[:3], worker_started, stop[3], degraded_spells(job),
        )  # fmt: skip
    finally:
        for process in (head, worker_process):
            if process is not None:
                kill_session(process.pid)
                process.wait()
        ray_stop()


def stopped(
    head: subprocess.Popen[bytes], worker: subprocess.Popen[bytes]
) -> tuple[float | None, int | None, list[str], float | None]:
    """A stop as the issue measured it: the head's pod goes first (SIGTERM to its main process,
    then its container's end takes its other processes), then the worker gets SIGTERM with
    its head gone. (worker left after its SIGTERM, its exit code, its processes alive a
    second later, head left after its SIGTERM.)"""
    sent = time.monotonic()
    head.send_signal(signal.SIGTERM)
    head_left = gone_after(head, sent, STOP_SECONDS)
    kill_session(head.pid)  # the head container's end
    sent = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    worker_left = gone_after(worker, sent, STOP_SECONDS)
    if worker_left is None:
        return None, None, left_of(worker.pid), head_left
    time.sleep(1.0)
    return worker_left, worker.returncode, left_of(worker.pid), head_left


def degraded_spells(job: Job) -> int:
    """The Degraded spells the fold stored for the Job: what its Metrics chart shades."""
    return WorkloadSpell.objects.filter(job=job, state=WorkloadState.DEGRADED).count()


def tasks_line(log: Path) -> str:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("bench entry:"):
            return line.removeprefix("bench entry: tasks ran on ")
    return "(the entry said nothing of its tasks)"


def completion_of(job: Job) -> str:
    report = WorkloadReport.objects.filter(job=job).first()
    completion = (report.latest if report else {}).get("completion") or {}
    return f"{completion.get('outcome')} (exit code {completion.get('exit_code')})"


def ray(*args: str, timeout: float = 60.0) -> str:
    done = subprocess.run(
        [str(VENV / "bin" / "ray"), *args], capture_output=True, text=True, timeout=timeout,
        env=os.environ | {"RAY_USAGE_STATS_ENABLED": "0"}, check=False,
    )  # fmt: skip
    return done.stdout.strip()


def ray_stop() -> None:
    """This virtualenv's Ray stopped, and nothing of it left."""
    with suppress(subprocess.SubprocessError, OSError):
        ray("stop", "--force")
    for pid in ours():
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def ours() -> list[int]:
    """Live processes started from this virtualenv."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with suppress(OSError):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if str(VENV).encode() in command and state != "Z":
                    found.append(int(entry.name))
    return found


# --- the report -------------------------------------------------------------------------------


def timeline(seen: list[Seen], worker_started: float) -> list[str]:
    """One row per change of the derived state (with its reason), from the head's start, and
    the moment the worker started."""
    rows, last, marked = [], ("", ""), False
    for item in seen:
        if not marked and item.seconds > worker_started:
            rows.append(f"| {worker_started:.1f} s | (the worker's container starts) | | |")
            marked = True
        if (item.state, item.reason) != last:
            kinds = ", ".join(sorted(set(item.kinds) - {"heartbeat"})) or "heartbeat"
            rows.append(f"| {item.seconds:.1f} s | {kinds} | {item.state} | {item.reason} |")
            last = (item.state, item.reason)
    return rows


def verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def stop_row(round_: Round) -> str:
    left = "still there" if round_.worker_left is None else f"{round_.worker_left:.2f} s"
    head = "still there" if round_.head_left is None else f"{round_.head_left:.2f} s"
    target = round_.worker_left is not None and round_.worker_left <= STOP_TARGET
    return (
        f"| {round_.worker} | {left} (exit code {round_.worker_code}) | "
        f"{', '.join(round_.worker_leftovers) or 'none'} | {head} | {verdict(target)} |"
    )


def report(rounds: list[Round], version: str) -> str:
    now, before = rounds
    lines = [
        "## Ray cluster (`bench/ray_cluster.py`)",
        "",
        f"The RLinf template's head and worker scripts on a real Ray ({version}, `ray[default]` "
        "from the package index in `var/bench/ray-venv`), as processes on this machine's "
        "loopback: changed only in Ray's ports, the head's address and the wrapper's path "
        "(the module's docstring). The worker joins "
        f"{JOIN_DELAY:g} s after the head's wrapper first reports Ray; the entry runs a task on "
        f"each node and {STEPS} steps; then a stop as the issue measured it: the head's pod "
        "goes first (SIGTERM, then its container's end), then the worker gets SIGTERM with its "
        "head gone. Targets: the worker leaves within 10 s of SIGTERM; no state is Degraded "
        "while the nodes gather, and no Degraded spell is stored for the start.",
        "",
        "### The start, as the console derived it after each batch the wrapper posted",
        "",
        f"Round with the template's worker: the entry's tasks ran on {now.tasks_line}; "
        f"completion {now.completion}; {now.gathering()}. Degraded at any point: "
        f"{'yes' if now.degraded else 'no'}; Degraded spells stored (the Metrics chart's "
        f"shading): {now.degraded_spells} — {verdict(not now.degraded)}.",
        "",
        "| Since the head started | Signals in the batch | Workload | Why |",
        "|---|---|---|---|",
        *timeline(now.seen, now.worker_started),
        "",
        f"Round with the previous worker script: tasks ran on {before.tasks_line}; completion "
        f"{before.completion}; {before.gathering()}; Degraded at any point: "
        f"{'yes' if before.degraded else 'no'}; Degraded spells stored: "
        f"{before.degraded_spells} — {verdict(not before.degraded)}.",
        "",
        "### The stop",
        "",
        "| Worker script | Worker left after SIGTERM | Its processes alive 1 s later, outside "
        "a container | Head left after SIGTERM | Within 10 s |",
        "|---|---|---|---|---|",
        stop_row(now),
        stop_row(before),
        "",
        "Ray's answer to SIGTERM (the previous script, where `ray start` is the container's "
        "main process) asks the head to drain the node and waits for it, for up to 30 s "
        "(`RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S`): the head is gone, so the wait runs out. "
        "The template's worker shell answers SIGTERM itself with SIGKILL to `ray start`, whose "
        "raylet and workers die with it (Linux's parent-death signal). Ray's dashboard and "
        "runtime-env agents outlive both scripts outside a container; in a pod, the end of the "
        "container's main process takes them. Reproduce: `make ray-tools`, then "
        "`.venv/bin/python -m bench ray_cluster` (about 3 minutes; more on a busy machine).",
    ]
    return "\n".join(lines)


def run() -> str:
    ray_bin = VENV / "bin" / "ray"
    if not ray_bin.exists():
        raise SystemExit(f"{ray_bin} is missing: run `make ray-tools` first")
    version = ray("--version") or "Ray"
    with tempfile.TemporaryDirectory(prefix="rb-", dir="/tmp") as folder:
        scratch = Path(folder)
        try:
            rounds = [
                run_round("template", worker_script(), scratch / "now"),
                run_round("previous", PREVIOUS_WORKER, scratch / "before"),
            ]
        finally:
            ray_stop()
    rounds[0].worker, rounds[1].worker = "now (trap, `kill -KILL`)", "before (`exec ray start`)"
    left = ours()
    assert not left, f"processes of {VENV} still running: {left}"
    return report(rounds, version)
