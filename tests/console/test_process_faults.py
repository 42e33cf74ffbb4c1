"""Process faults (issue 13, item 2): Celery workers killed in the middle of a task, and two beats
at once. The settings that make them survivable are in console/settings.py and explained in
docs/operations.md §Celery under faults.

- A worker killed with SIGKILL (its pool processes with it, as when its container dies) while a
  sync and a reconcile are in flight: both messages were taken but not acknowledged (acks_late),
  so Redis hands them to the next worker once the visibility timeout has passed, and the Job and
  the cluster converge. This needs Redis: the embedded broker deletes a message when a worker
  takes it (docs/operations.md §The embedded broker), so the test runs on CI's Redis or starts
  a redis-server of its own.
- Redis stopped and started again under a worker and a beat: the syncs resume, by themselves or,
  when Celery leaves the worker no longer consuming, after its liveness probe restarts it.
- Two beats over the configured broker (the embedded one here, Redis in CI) queue every sync
  twice; two workers run them; the sync lease lets no two cycles of one cluster overlap.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from console.kube.gateway import STATEFULSETS
from console.models import Cluster, Node
from jobs.models import Operation
from simcluster.server import SimCluster
from tests.conftest import register_sim
from tests.engine.conftest import gateway, submit, task
from tests.processes import (
    CELERY,
    Gate,
    Processes,
    database_url,
    free_port,
    own_redis_server,
    redis_server,
    wait_for,
)

# A short sync interval and kube timeouts make every limit derived from them short: the sync
# lease is 3 * 1 + 2 * (1 + 2 + 1 watch) = 11 s, the hard time limit 14 s, the visibility
# timeout 28 s.
FAST = {
    "TRAINYARD_SYNC_INTERVAL": "1",
    "TRAINYARD_KUBE_CONNECT_TIMEOUT": "1",
    "TRAINYARD_KUBE_READ_TIMEOUT": "2",
}
WORKER = ["worker", "-Q", "default,sync,reconcile", "--concurrency", "2", "-l", "info"]
PUBLISH = """
import django
django.setup()
from console.tasks import reconcile_job, sync_cluster
reconcile_job.delay({job})
sync_cluster.delay({cluster})
"""


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=4, speed=20) as cluster:
        yield cluster


@pytest.fixture
def cluster(db: None, sim: SimCluster, tmp_path: Path) -> Cluster:
    return register_sim(sim, tmp_path)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    env = dict(
        os.environ,
        DATABASE_URL=database_url(),
        TRAINYARD_VAR_DIR=str(tmp_path),  # a fresh embedded broker file
        TRAINYARD_FIELD_KEYS=",".join(settings.TRAINYARD_FIELD_KEYS),  # this run's rows' key
        DJANGO_SETTINGS_MODULE="console.settings",
        TRAINYARD_LOG_DETAIL="true",  # the tests read the tasks received and the beats' ticks
    )
    started = Processes(env, tmp_path)
    yield started
    started.stop_all()


def received(log: str, task_name: str) -> set[str]:
    """The ids of the tasks of that name a worker's log says it received."""
    return set(re.findall(rf"Task {re.escape(task_name)}\[([0-9a-f-]+)\] received", log))


@pytest.mark.django_db(transaction=True)
def test_it_redelivers_a_sync_and_a_reconcile_killed_mid_task_and_both_converge(
    alice: User, cluster: Cluster, sim: SimCluster, processes: Processes, tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:  # fmt: skip
    job = submit(alice, cluster, "kept", task(replicas=1))
    sync_held = Gate(sim, "GET", "/apis/apps/v1/statefulsets")  # the sync's first LIST
    create_held = Gate(sim, "POST", "/statefulsets")  # the reconcile's create
    with redis_server(tmp_path) as redis_url:
        processes.env.update(FAST, REDIS_URL=redis_url)
        processes.purge()
        first = processes.start("first", *WORKER, "-n", "first@%h")
        publish = textwrap.dedent(PUBLISH).format(job=job.pk, cluster=cluster.pk)
        processes.start("publish", "-c", publish, command=[sys.executable])
        assert create_held.arrived.wait(60), processes.log("first")
        assert sync_held.arrived.wait(5), processes.log("first")
        processes.kill(first)  # both requests still held: neither task got any further
        killed = time.monotonic()
        sync_held.released.set()
        create_held.released.set()
        assert not gateway(cluster).list(STATEFULSETS, namespace="default")

        processes.start("second", *WORKER, "-n", "second@%h")
        job_applied = Operation.objects.filter(job=job, result=Operation.Result.APPLIED)
        wait_for(job_applied.exists, 90, "the reconcile redelivered and applied")
        wait_for(lambda: Node.objects.filter(cluster=cluster).count() == 2, 60, "the sync")
        converged = time.monotonic() - killed

    first_log, second_log = processes.log("first"), processes.log("second")
    for name in ("console.tasks.reconcile_job", "console.tasks.sync_cluster"):
        assert received(first_log, name) & received(second_log, name), (name, second_log)
    statefulsets = gateway(cluster).list(STATEFULSETS, namespace="default")
    assert [item["metadata"]["name"] for item in statefulsets] == ["kept-worker"]
    cluster.refresh_from_db()
    assert cluster.reachable and cluster.last_synced_at is not None
    assert cluster.sync_lease_until is None  # the killed cycle's lease ran out; this one ended
    record_property(
        "seen", f"both tasks received again; converged {converged:.0f} s after the kill"
    )


# --- two beats -------------------------------------------------------------------------------

# A worker whose sync notes, in a file shared by every process, when a cycle holds a cluster's
# lease: "take" once the conditional UPDATE that takes it returned, "release" before the UPDATE
# that gives it back. Each noted span lies inside the real one, so spans of one cluster that
# overlap are two cycles that held the cluster at once.
NOTING_WORKER = """
import os, sys, time
import django
django.setup()
from console.engine import cycle as sync
spans = sys.argv.pop(1)
def note(event, cluster_id):
    with open(spans, "a") as out:
        out.write(f"{event} {cluster_id} {time.monotonic_ns()}\\n")
take_lease, finish = sync.take_lease, sync.finish
def noting_take_lease(cluster_id, now):
    lease = take_lease(cluster_id, now)
    if lease is not None:
        note("take", cluster_id)
    return lease
def noting_finish(cluster_id, lease, **fields):
    note("release", cluster_id)
    finish(cluster_id, lease, **fields)
sync.take_lease, sync.finish = noting_take_lease, noting_finish
from celery.__main__ import main
sys.argv[0] = "celery"
main()
"""
TICKS = 20
# Measured here: 14 cycles and 22 skipped over 20 ticks of each beat (the embedded broker).
CYCLES = 10
SKIPPED = "skipped: another sync of this cluster is running"


def overlaps(spans: str) -> tuple[int, int]:
    """(cycles, cycles that started while another cycle of the same cluster held it)."""
    noted = (line.split() for line in spans.splitlines() if line)
    events = sorted((int(at), event, cluster) for event, cluster, at in noted)
    holding: dict[str, int] = {}
    cycles = overlapping = 0
    for _at, event, cluster in events:
        if event == "take":
            cycles += 1
            overlapping += holding.get(cluster, 0) > 0
            holding[cluster] = holding.get(cluster, 0) + 1
        else:
            holding[cluster] = holding.get(cluster, 0) - 1
    return cycles, overlapping


def test_it_counts_an_overlap_when_two_cycles_of_one_cluster_hold_it_at_once() -> None:
    assert overlaps("take 1 10\nrelease 1 20\ntake 1 30\nrelease 1 40\n") == (2, 0)
    assert overlaps("take 1 10\ntake 2 15\nrelease 2 18\nrelease 1 20\n") == (2, 0)
    assert overlaps("take 1 10\ntake 1 15\nrelease 1 18\nrelease 1 20\n") == (2, 1)


@pytest.mark.django_db(transaction=True)
def test_it_never_syncs_a_cluster_twice_at_once_under_two_beats(
    cluster: Cluster, sim: SimCluster, processes: Processes, tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:  # fmt: skip
    Cluster.objects.create(name="sim-b", kubeconfig=cluster.kubeconfig, namespace="default")
    sim.set_fault(latency_ms=250, seconds=600)  # a cycle of 8 LISTs takes 2 s: ticks meet it
    spans = tmp_path / "spans"
    processes.env.update(TRAINYARD_SYNC_INTERVAL="1")
    if processes.env.get("REDIS_URL"):
        processes.purge()
    noting = [sys.executable, "-c", textwrap.dedent(NOTING_WORKER), str(spans)]
    for name in ("worker-a", "worker-b"):
        processes.start(name, *WORKER, "-n", f"{name}@%h", command=noting)
    for name in ("beat-a", "beat-b"):
        processes.start(name, "beat", "-s", str(tmp_path / name), "-l", "info")

    def seen() -> tuple[int, int, int, str]:
        """(cycles, overlapping, skipped, the workers' logs) so far."""
        logs = processes.log("worker-a") + processes.log("worker-b")
        cycles, overlapping = overlaps(spans.read_text()) if spans.exists() else (0, 0)
        return cycles, overlapping, logs.count(SKIPPED), logs

    def enough() -> bool:
        """Both beats ticked and the events the test is about happened: the clusters synced
        (cycles) while the other beat's syncs met running ones (skipped). Waited for as events,
        not a number of ticks: a loaded machine runs fewer tasks per tick."""
        sent = [processes.log(name).count("Sending due task") for name in ("beat-a", "beat-b")]
        cycles, _, skipped, _ = seen()
        return min(sent) >= TICKS and cycles >= CYCLES and skipped >= CYCLES

    wait_for(enough, 300, f"{TICKS} ticks of each beat, {CYCLES} cycles and {CYCLES} skipped")
    cycles, overlapping, skipped, worker_logs = seen()
    record_property("seen", f"{cycles} cycles, {skipped} skipped, {overlapping} overlapping")
    assert overlapping == 0, spans.read_text()
    assert cycles >= CYCLES, worker_logs  # the clusters were synced all along ...
    assert skipped >= CYCLES, worker_logs  # ... while the other beat's syncs met running ones
    assert "Traceback" not in worker_logs, worker_logs


# --- Redis restarted ----------------------------------------------------------------------------


# deploy/console/worker.yaml's liveness probe: three failures in a row restart the worker. Its
# period there is 60 s; here 5 s.
PROBE_FAILURES, PROBE_PERIOD = 3, 5


def answers_ping(processes: Processes, name: str) -> bool:
    """The manifest's liveness probe, run against one worker by name."""
    probe = [*CELERY, "inspect", "ping", "-d", name, "--timeout", "10"]
    done = subprocess.run(probe, env=processes.env, cwd=settings.BASE_DIR, capture_output=True,
                          timeout=60, check=False)  # fmt: skip
    return done.returncode == 0


@pytest.mark.django_db(transaction=True)
def test_it_syncs_again_after_redis_restarts(
    cluster: Cluster, processes: Processes, tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:  # fmt: skip
    """Always a Redis of the test's own (never CI's, which other tests use): stopped under a
    running worker and beat, started again on the same port. The beat and, as a rule, the worker
    reconnect by themselves (CELERY_BROKER_CONNECTION_MAX_RETRIES = None). Celery can leave a
    worker connected but no longer consuming after its connections were cut several times in a
    row (celery/celery#8030): then its liveness probe fails and, as Kubernetes does, the worker
    is restarted (its stacks logged first, by Celery's SIGUSR1 handler). Either way the syncs
    resume."""
    port = free_port()
    name = f"probed@{socket.gethostname()}"
    processes.env.update(FAST, REDIS_URL=f"redis://127.0.0.1:{port}/0")
    with own_redis_server(tmp_path, port):
        worker = processes.start("worker", *WORKER, "-n", name)
        beat = processes.start("beat", "beat", "-s", str(tmp_path / "beat"), "-l", "info")
        synced = Cluster.objects.filter(pk=cluster.pk, last_synced_at__isnull=False)
        wait_for(synced.exists, 60, "a first sync")
    down = timezone.now()  # Redis is stopped now, for as long as it takes to start it again
    with own_redis_server(tmp_path, port):
        again = Cluster.objects.filter(pk=cluster.pk, last_synced_at__gt=down)
        deadline, failures, restarted = time.monotonic() + 150, 0, False
        while not again.exists():
            assert time.monotonic() < deadline, processes.log("worker")[-4000:]
            time.sleep(PROBE_PERIOD)
            if restarted or again.exists():
                continue
            failures = 0 if answers_ping(processes, name) else failures + 1
            if failures == PROBE_FAILURES:
                os.kill(worker.pid, signal.SIGUSR1)
                time.sleep(1)
                processes.kill(worker)
                worker, restarted = processes.start("worker-restarted", *WORKER, "-n", name), True
        assert worker.poll() is None and beat.poll() is None, processes.log("worker")
    seconds = (timezone.now() - down).total_seconds()
    how = "the worker restarted after its liveness probe failed" if restarted else "by itself"
    record_property("seen", f"a sync {seconds:.0f} s after Redis stopped, {how}")
