"""The sync cycle against a simulated cluster holding 1,000 and 10,000 pods.

For each size: 1 StatefulSet of 10 replicas per Job, created by the console's own reconcile and
brought up by simcluster on a frozen clock (speed 0, moved only by `/_sim/advance`, so nothing
changes while measuring). simcluster runs in its own process (`manage.py simcluster`), so the
CPU time measured here (`time.process_time`) is the console's alone, with Django's DEBUG off as
in a production worker. Measured, best of N:

- floor: fetching the eight LISTs one relist makes, unpaginated, and orjson-parsing them;
- relist: a cycle that LISTs everything (paginated) and compares it with what is stored;
- quiet: a watch cycle in which nothing changed (bookmarks only);
- 100 changed: a watch cycle after 100 pods of 100 different Jobs restarted (other pods of
  the same Jobs each time).

Targets: the relist at most 2x the floor's CPU; a quiet cycle and a 100-change cycle at most
0.1x the floor's CPU, a quiet one's wall time at most the watch timeout plus 0.3 s.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import orjson
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from console.engine.cycle import SyncResult, sync_cluster
from console.engine.gateways import gateway_for
from console.engine.stored import SCHEMA
from console.engine.streams import STREAMS
from console.kube import MANAGED_SELECTOR
from console.kube.gateway import STATEFULSETS, Gateway
from console.models import Cluster, Project
from jobs.models import Job, Task

SIZES = (1_000, 10_000)
PER_SET = 10
CHANGED = 100
REPEATS = 5
RELIST_TARGET = 2.0
WATCH_TARGET = 0.1
WALL_MARGIN = 0.3
HEADROOM = 1.3  # sync slots beyond the average need: slow clusters, beat jitter
TEMPLATE = {
    "role": "worker",
    "kind": "StatefulSet",
    "replicas": PER_SET,
    "image": "ghcr.io/trainyard/rlinf-trainer:0.4.2",
    "command": [],
    "args": [],
    "env": {},
    "resources": {"cpu": "100m", "memory": "128Mi", "gpu": 0},
    "node_selector": {},
}


@dataclass(frozen=True)
class Cost:
    cpu: float
    wall: float
    result: SyncResult | None = None


@dataclass(frozen=True)
class Figures:
    pods: int
    apply_seconds: float
    first: Cost
    floor: Cost
    relist: Cost
    quiet: Cost
    changed: Cost
    quiet_statements: int
    quiet_writes: list[str]


def best(repeats: int, action: Callable[[], Any]) -> Cost:
    """The run with the least CPU time, with its wall time and result."""
    costs = []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = action()
        costs.append(Cost(time.process_time() - cpu, time.perf_counter() - wall, result))
    return min(costs, key=lambda cost: cost.cpu)


def fetch_unpaginated(gateway: Gateway) -> None:
    """What one relist reads, each LIST in one answer, parsed by orjson: the floor."""
    for stream in STREAMS:
        query = [("labelSelector", stream.selector)] if stream.selector else []
        _status, _reason, data = gateway._send("GET", stream.resource.path(), query, None, "")
        orjson.loads(data)


def _niced(niceness: int) -> Callable[[], None]:
    def nice() -> None:  # in the child, after setsid: its own scheduling group
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(niceness))

    return nice


class Sim:
    """simcluster in its own process, driven through its /_sim/ control surface."""

    def __init__(
        self, folder: Path, nodes: int, speed: float = 0, niceness: int = 0, port: int = 0
    ) -> None:
        """A frozen clock by default (speed 0: moved only by `advance`). With a `niceness`,
        in a session and scheduling group of its own at that niceness (where permitted). On
        `port`, or a free one."""
        self.kubeconfig = folder / "kubeconfig"
        command = [sys.executable, "manage.py", "simcluster", "--kubeconfig-out",
                   str(self.kubeconfig), "--nodes", str(nodes), "--speed", f"{speed:g}",
                   "--namespace", "bench", "--port", str(port)]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, cwd=settings.BASE_DIR, stdout=subprocess.PIPE, env=env,
            start_new_session=bool(niceness), preexec_fn=_niced(niceness) if niceness else None,
        )  # fmt: skip
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if b"kubeconfig written" in line:
                break

    def control(self, gateway: Gateway, path: str, body: dict[str, Any]) -> None:
        _status, _reason, _data = gateway._send(
            "POST", f"/_sim/{path}", [], body, "application/json"
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def _rows(cluster: Cluster, sets: int) -> None:
    project, _ = Project.objects.get_or_create(name="bench")
    jobs = Job.objects.bulk_create(
        Job(project=project, name=f"bench-{i:05d}", cluster=cluster, namespace="bench",
            spec={"tasks": [TEMPLATE]})
        for i in range(sets)
    )  # fmt: skip
    Task.objects.bulk_create(
        Task(
            job=job, role="worker", kind="StatefulSet", template=TEMPLATE, desired_replicas=PER_SET
        )
        for job in jobs
    )


def _ready(gateway: Gateway, sets: int) -> bool:
    items = gateway.list(STATEFULSETS, MANAGED_SELECTOR)
    ready = sum(1 for item in items if item.get("status", {}).get("readyReplicas") == PER_SET)
    return ready == sets


def _bring_up(sim: Sim, gateway: Gateway, sets: int) -> None:
    """Moves the frozen clock until every replica runs and is ready."""
    for _ in range(200):
        sim.control(gateway, "advance", {"seconds": 5})
        if _ready(gateway, sets):
            return
    raise RuntimeError("simcluster did not bring the pods up")


def _quiet(cluster: Cluster) -> Cost:
    """A watch cycle that saw no change (the frozen clock changes nothing by itself)."""
    cost = best(REPEATS, lambda: sync_cluster(cluster.pk))
    assert cost.result is not None and not cost.result.relisted and not cost.result.changes
    return cost


def _relist(cluster: Cluster) -> Cost:
    def relist() -> SyncResult:
        Cluster.objects.filter(pk=cluster.pk).update(watch_cursors={"observations": SCHEMA})
        return sync_cluster(cluster.pk)

    cost = best(REPEATS, relist)
    assert cost.result is not None and cost.result.relisted and not cost.result.changes
    return cost


def _changed(sim: Sim, gateway: Gateway, cluster: Cluster, sets: int) -> Cost:
    """100 pods of 100 different Jobs restart (killed, then restarted by their kubelet): best
    of N by CPU time as every other figure, each time other pods of the same Jobs."""
    step = max(1, sets // CHANGED)

    def restart_and_sync(replica: int) -> Cost:
        for index in range(0, step * CHANGED, step):
            pod = f"bench-{index:05d}-worker-{replica}"
            sim.control(gateway, f"namespaces/bench/pods/{pod}/kill", {})
        sim.control(gateway, "advance", {"seconds": 15})
        wall, cpu = time.perf_counter(), time.process_time()
        result = sync_cluster(cluster.pk)
        return Cost(time.process_time() - cpu, time.perf_counter() - wall, result)

    return min((restart_and_sync(replica) for replica in range(REPEATS)), key=lambda c: c.cpu)


def measure(pods: int) -> Figures:
    sets = pods // PER_SET
    nodes = pods // 100 + 2  # 110 pods fit on a node
    with TemporaryDirectory() as folder:
        sim = Sim(Path(folder), nodes)
        try:
            return _measure(sim, pods, sets)
        finally:
            sim.stop()


def _measure(sim: Sim, pods: int, sets: int) -> Figures:
    cluster = Cluster.objects.create(
        name=f"bench-{pods}", kubeconfig=sim.kubeconfig.read_text(), namespace="bench"
    )
    _rows(cluster, sets)
    started = time.perf_counter()
    applied = sync_cluster(cluster.pk)
    apply_seconds = time.perf_counter() - started
    assert applied.api_writes == 2 * sets, applied
    gateway = gateway_for(cluster)
    _bring_up(sim, gateway, sets)
    first = best(1, lambda: sync_cluster(cluster.pk))
    gc.collect()
    floor = best(REPEATS, lambda: fetch_unpaginated(gateway))
    relist = _relist(cluster)
    quiet = _quiet(cluster)
    with CaptureQueriesContext(connection) as queries:
        sync_cluster(cluster.pk)
    statements = [query["sql"] for query in queries.captured_queries]
    writes = [sql for sql in statements if sql.split()[0] in ("INSERT", "UPDATE", "DELETE")]
    changed = _changed(sim, gateway, cluster, sets)
    Job.objects.filter(cluster=cluster).delete()
    cluster.delete()
    return Figures(
        pods=pods, apply_seconds=apply_seconds, first=first, floor=floor, relist=relist,
        quiet=quiet, changed=changed, quiet_statements=len(statements), quiet_writes=writes,
    )  # fmt: skip


def _pass(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _ratio(cost: Cost, floor: Cost) -> float:
    return cost.cpu / floor.cpu


def _row(r: Figures) -> str:
    def cell(cost: Cost) -> str:
        return f"{cost.cpu * 1000:.1f} ms ({_ratio(cost, r.floor):.3f}x), {cost.wall:.2f} s"

    changed = r.changed.result
    return (
        f"| {r.pods:,} | {r.floor.cpu * 1000:.1f} ms, {r.floor.wall:.2f} s | {cell(r.relist)} | "
        f"{cell(r.quiet)} | {cell(r.changed)} ({changed.changes if changed else 0} changes, "
        f"{changed.jobs if changed else 0} jobs) | {r.first.wall:.2f} s "
        f"({r.first.result.rows_written if r.first.result else 0:,} rows) |"
    )


def report(results: list[Figures]) -> str:
    watch = settings.TRAINYARD_WATCH_SECONDS
    lines = [
        "## Sync cycle (`bench/sync_cycle.py`)",
        "",
        f"A simulated cluster (its own process) with one 10-replica StatefulSet per Job; best "
        f"of {REPEATS} by CPU time of this process (the console's alone). Each cell: CPU time "
        "(its ratio to the floor's CPU time), wall time. The floor fetches the eight LISTs of a "
        "relist unpaginated and orjson-parses them. *Relist*: every stream LISTed (pages of "
        "500) and compared with what is stored. *Quiet*: a watch cycle in which nothing "
        f"changed (the watches last {watch} s). *100 changed*: a watch cycle after 100 pods of "
        "100 different Jobs restarted.",
        "",
        "| pods | floor | relist | quiet | 100 changed | first sync (rows written) |",
        "|---:|---:|---:|---:|---:|---:|",
        *(_row(r) for r in results),
        "",
    ]
    largest = results[-1]
    quiet = largest.quiet.result
    lines += [
        f"- {_pass(all(_ratio(r.relist, r.floor) <= RELIST_TARGET for r in results))}: a relist "
        f"costs at most {RELIST_TARGET:g}x the floor's CPU.",
        f"- {_pass(_ratio(largest.quiet, largest.floor) <= WATCH_TARGET)}: at {largest.pods:,} "
        f"pods a quiet cycle costs at most {WATCH_TARGET:g}x the floor's CPU (a quiet cycle's "
        "cost does not grow with the pods: at 1,000 pods it is a larger share of a smaller "
        "floor).",
        f"- {_pass(_ratio(largest.changed, largest.floor) <= WATCH_TARGET)}: at "
        f"{largest.pods:,} pods a cycle in which {CHANGED} pods of {CHANGED} Jobs changed costs "
        f"at most {WATCH_TARGET:g}x the floor's CPU.",
        f"- {_pass(all(r.quiet.wall <= watch + WALL_MARGIN for r in results))}: a quiet cycle "
        f"takes at most the watch timeout plus {WALL_MARGIN:g} s of wall time.",
        f"- {_pass(all(r.quiet.result and r.quiet.result.rows_written == 0 for r in results))}: "
        "a quiet cycle writes 0 rows; its only writes are the Cluster row's "
        f"({', '.join(str(len(r.quiet_writes)) for r in results)} statements).",
        f"- {_pass(len({r.quiet_statements for r in results}) == 1)}: a quiet cycle runs the "
        "same number of SQL statements at every size "
        f"({', '.join(str(r.quiet_statements) for r in results)}).",
        f"- A quiet cycle at {largest.pods:,} pods received "
        f"{quiet.bytes_received if quiet else 0:,} bytes in {quiet.api_requests if quiet else 0} "
        "watch requests: bookmarks, no object.",
    ]
    return "\n".join(lines)


def projection(r: Figures) -> str:
    """100 clusters of 10,000 pods synced every 10 s, from this run's cycles at 10,000 pods."""
    clusters, every, relist_every = 100, 10.0, settings.TRAINYARD_RELIST_SECONDS
    quiet_slots, busy_slots = clusters * r.quiet.wall / every, clusters * r.changed.wall / every
    slots = math.ceil(busy_slots * HEADROOM)
    quiet_cores, busy_cores = clusters * r.quiet.cpu / every, clusters * r.changed.cpu / every
    waiting = 1 - r.quiet.cpu / r.quiet.wall
    return "\n".join([
        f"### Paper projection: {clusters} clusters x {r.pods:,} pods every {every:g} s",
        "",
        f"From the cycles above at {r.pods:,} pods (this machine):",
        "",
        "| Cycle | CPU | Wall (holds a worker process) |",
        "|---|---:|---:|",
        f"| quiet (watch, nothing changed) | {r.quiet.cpu * 1000:.1f} ms | {r.quiet.wall:.2f} s |",
        f"| {CHANGED} pods of {CHANGED} Jobs changed | {r.changed.cpu * 1000:.1f} ms | "
        f"{r.changed.wall:.2f} s |",
        f"| relist (every {relist_every} s, `TRAINYARD_RELIST_SECONDS`) | "
        f"{r.relist.cpu * 1000:.1f} ms | {r.relist.wall:.2f} s |",
        "",
        f"- Worker processes (sync slots): {clusters} clusters x {r.quiet.wall:.2f} s / "
        f"{every:g} s = {quiet_slots:.1f} busy on average when quiet, {busy_slots:.1f} if every "
        f"cycle carried {CHANGED} changes. With {HEADROOM - 1:.0%} headroom for slow clusters "
        f"and beat jitter: **{slots} sync slots**, e.g. 2 workers x "
        f"`--concurrency {math.ceil(slots / 2)}`.",
        f"- CPU: {clusters} x {r.quiet.cpu * 1000:.1f} ms / {every:g} s = **{quiet_cores:.2f} "
        f"cores** quiet; {busy_cores:.1f} cores if every cycle of every cluster carried "
        f"{CHANGED} changes (an upper bound: a busy cluster, not a typical one); relists add "
        f"{clusters} x {r.relist.cpu * 1000:.1f} ms / {relist_every} s = "
        f"{clusters * r.relist.cpu / relist_every:.2f} cores.",
        f"- Why wall time, not CPU, bounds it: a quiet cycle spends {waiting:.0%} of its "
        f"{r.quiet.wall:.2f} s waiting for the watch window (the API server holds each watch "
        f"open {settings.TRAINYARD_WATCH_SECONDS} s, `TRAINYARD_WATCH_SECONDS`) and uses its "
        "worker process for all of it. The number of processes therefore scales with clusters "
        "x watch window / interval, the number of cores with clusters x CPU / interval, and the "
        f"first is about {quiet_slots / quiet_cores:.0f}x the second. A slow cluster lengthens "
        "only its own cycle (it holds one process longer; the per-cluster task time limit "
        "bounds how long), so the headroom above is what keeps it from starving the others.",
    ])  # fmt: skip


def run() -> str:
    engine = str(settings.DATABASES["default"]["ENGINE"]).rsplit(".", 1)[-1]
    # As a worker runs it in production (TRAINYARD_DEBUG=false): with DEBUG on, Django would
    # also keep the text of every statement, with its values, in connection.queries.
    with override_settings(DEBUG=False):
        results = [measure(pods) for pods in SIZES]
    return (
        report(results)
        + f"\n\nDatabase: {engine}; CPU time counts this process only; Django's `DEBUG` off, "
        "as in a production worker.\n\n" + projection(results[-1])
    )
