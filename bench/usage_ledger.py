"""Keeping the GPU-hours ledger in a sync cycle (issue 33, Show: it adds at most 10% to a sync
cycle with 100 changes).

The sync cycle benchmark's cluster (bench/sync_cycle.py: one 10-replica StatefulSet per Job, a
simcluster in its own process, a frozen clock), its pods holding one GPU each, so that the
ledger has an open interval for every pod. Each measured cycle follows a restart of 100 pods of
100 different Jobs (as the sync cycle benchmark's "100 changed"): the ledger closes their
intervals, opens the next ones and adds the closed ones to the roll-ups. Two measures, CPU time
of this process: the ledger's own part of each cycle (`usage.ledger.after_sync`, timed inside
it), and cycles with the ledger kept against cycles with it left out, alternated. The console's
clock is set to the simulated cluster's for each cycle (time-machine), as a console's and its
clusters' clocks agree: moved 15 s a cycle on the cluster alone, the pods' times would run ahead
of the console's now by minutes, a skew no real cluster has.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import orjson
import time_machine
from django.db import connection
from django.test.utils import override_settings

from bench.sync_cycle import CHANGED, PER_SET, TEMPLATE, Sim, _bring_up
from console.engine import cycle
from console.engine.cycle import sync_cluster
from console.engine.gateways import gateway_for
from console.kube.gateway import Gateway
from console.models import Cluster, Project
from jobs.models import Job, Task
from usage import ledger
from usage.models import GpuInterval, UsageHour

PODS = 1_000
CYCLES = 6  # of each kind, alternated
TARGET = 0.10
PORT = int(os.environ.get("TRAINYARD_BENCH_SIM_PORT", "0"))  # 0: a free one
GPU_TEMPLATE = {**TEMPLATE, "resources": {"cpu": "100m", "memory": "128Mi", "gpu": 1}}


@dataclass(frozen=True)
class Cycle:
    cpu: float
    ledger_cpu: float
    changes: int
    rows: int


class Meter:
    """`usage.ledger.after_sync`'s CPU time and rows written, as the cycle calls it."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.rows = 0
        self.original = ledger.after_sync

    def __call__(self, *args: Any) -> int:
        began = time.process_time()
        rows = self.original(*args)
        self.cpu += time.process_time() - began
        self.rows += rows
        return rows


@contextmanager
def patched(replacement: Callable[..., int]) -> Iterator[None]:
    original = ledger.after_sync
    ledger.after_sync = replacement  # type: ignore[assignment]
    try:
        yield
    finally:
        ledger.after_sync = original  # type: ignore[assignment]


def _left_out(*_args: Any) -> int:
    return 0


def run() -> str:
    title = "## GPU-hours ledger in the sync cycle (`bench/usage_ledger.py`)\n\n"
    if connection.vendor != "postgresql":
        return title + "Needs PostgreSQL (`make bench`).\n"
    sets = PODS // PER_SET
    with TemporaryDirectory() as folder:
        sim = Sim(Path(folder), nodes=PODS // 8 + 2, port=PORT)  # 8 GPUs a node
        try:
            # As a worker runs it in production (TRAINYARD_DEBUG=false), as the sync cycle
            # benchmark does: with DEBUG on, every statement's text is also kept, with its
            # values, which weighs on the side that runs more statements.
            with override_settings(DEBUG=False):
                kept, left_out, opened = _measure(sim, sets)
        finally:
            sim.stop()
    return title + _section(kept, left_out, opened)


def _measure(sim: Sim, sets: int) -> tuple[list[Cycle], list[Cycle], int]:
    cluster = Cluster.objects.create(
        name="bench-ledger", kubeconfig=sim.kubeconfig.read_text(), namespace="bench"
    )
    project, _ = Project.objects.get_or_create(name="bench")
    jobs = Job.objects.bulk_create(
        Job(project=project, name=f"bench-{i:05d}", cluster=cluster, namespace="bench",
            spec={"tasks": [GPU_TEMPLATE]})
        for i in range(sets)
    )  # fmt: skip
    Task.objects.bulk_create(
        Task(job=job, role="worker", kind="StatefulSet", template=GPU_TEMPLATE,
             desired_replicas=PER_SET)
        for job in jobs
    )  # fmt: skip
    gateway = gateway_for(cluster)
    _sync_at(cluster, _sim_time(gateway))
    _bring_up(sim, gateway, sets)
    _sync_at(cluster, _sim_time(gateway))
    _sync_at(cluster, _sim_time(gateway))
    opened = GpuInterval.objects.filter(ended_at__isnull=True).count()
    gc.collect()
    kept: list[Cycle] = []
    left_out: list[Cycle] = []
    step = max(1, sets // CHANGED)
    for replica in range(2 * CYCLES):
        keep = replica % 2 == 0
        meter = Meter()
        with patched(meter if keep else _left_out):
            found = _restart_and_sync(sim, gateway, cluster, step, replica % PER_SET)
        (kept if keep else left_out).append(Cycle(found[0], meter.cpu, found[1], meter.rows))
    return kept, left_out, opened


def _restart_and_sync(sim: Sim, gateway: Gateway, cluster: Cluster, step: int, replica: int
                      ) -> tuple[float, int]:  # fmt: skip
    for index in range(0, step * CHANGED, step):
        sim.control(gateway, f"namespaces/bench/pods/bench-{index:05d}-worker-{replica}/kill", {})
    at = _sim_time(gateway, 15)
    with time_machine.travel(at, tick=True):
        began = time.process_time()
        result = cycle.sync_cluster(cluster.pk)
        return time.process_time() - began, result.changes


def _sim_time(gateway: Gateway, seconds: float = 0) -> datetime:
    """The simulated cluster's clock, after moving it on by `seconds`: the console's clock is
    set to it for each cycle, as a console's and a cluster's clocks agree (without it the pods'
    times would run ahead of the console's now by the 15 s each cycle adds)."""
    _status, _reason, data = gateway._send(
        "POST", "/_sim/advance", [], {"seconds": seconds}, "application/json"
    )
    stamp = str(orjson.loads(data)["simulatedTime"]).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp)


def _sync_at(cluster: Cluster, at: datetime) -> None:
    with time_machine.travel(at, tick=True):
        sync_cluster(cluster.pk)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _section(kept: Sequence[Cycle], left_out: Sequence[Cycle], opened: int) -> str:
    shares = [c.ledger_cpu / (c.cpu - c.ledger_cpu) for c in kept]
    share = statistics.median(shares)
    best_kept = min(c.cpu for c in kept)
    best_left = min(c.cpu for c in left_out)
    added = best_kept / best_left - 1
    rows = [
        f"| ledger kept | {_ms(best_kept)} | {_ms(statistics.median(c.cpu for c in kept))} | "
        f"{_ms(statistics.median(c.ledger_cpu for c in kept))} | "
        f"{statistics.median(c.rows for c in kept):.0f} |",
        f"| ledger left out | {_ms(best_left)} | "
        f"{_ms(statistics.median(c.cpu for c in left_out))} | | |",
    ]
    verdict = "PASS" if share <= TARGET else "FAIL"
    hours = UsageHour.objects.count()
    return (
        f"{PODS:,} pods of {PODS // PER_SET} Jobs, one GPU each ({opened:,} open intervals); "
        f"{CYCLES} cycles with the ledger kept and {CYCLES} with it left out, alternated, each "
        f"after {CHANGED} pods of {CHANGED} Jobs restarted ("
        f"{statistics.median(c.changes for c in kept):.0f} changes a cycle); CPU time of this "
        f"process. {hours:,} hourly roll-up rows at the end.\n\n"
        "| cycle | best CPU | median CPU | the ledger's part (median) | ledger rows written "
        "(median) |\n|---|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n\n"
        f"- {verdict}: the ledger's own CPU is {share:.1%} of the rest of the cycle (median of "
        f"{CYCLES}; at most {TARGET:.0%}). Best cycle with it against best without: "
        f"{added:+.1%} (the run-to-run noise of a cycle on a shared machine is a few percent "
        "either way).\n"
        f"- Measured {datetime.now():%H:%M} on the shared machine; PostgreSQL; Django's `DEBUG` "
        "off, as in a production worker.\n"
    )
