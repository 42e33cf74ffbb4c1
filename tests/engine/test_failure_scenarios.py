"""A run's pods failing in turn, as RL on Ray fails (issue 34, Show; audit items 3 and 6): a
cause on one pod, consequences on the others, each pod its own role running `sim fail KIND
SECONDS`, through the real keep and judge path (every restart's previous container kept, the
run judged again): the cause is named, the consequence lines never.

simcluster runs at 10 simulated seconds a second here, so the sync sees each restart before
the next one (a crash loop at 100x would restart twice between two cycles)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from console.engine.cycle import sync_cluster
from console.engine.keep_logs import keep
from console.models import Cluster
from failures.models import Finding, KeptLog
from jobs.models import Job
from simcluster.server import SimCluster
from tests.engine.conftest import (  # noqa: F401 (fixtures)
    TIMEOUT,
    _fast_passwords,
    cluster,
    submit,
    task,
)
from tests.engine.test_kept_logs import _kept_in_tmp  # noqa: F401 (fixture)


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=3, gpus_per_node=8, seed=0, speed=10.0) as simulated:
        yield simulated


def _run_until_each_pod_is_kept(cluster: Cluster, job: Job, pods: int) -> Finding:  # noqa: F811
    """Sync cycles, every due kept as the Celery task keeps it (and judged on its restart),
    until a previous container of each of the Job's pods is kept: the run's Finding then."""
    deadline = time.monotonic() + TIMEOUT
    kept = KeptLog.objects.filter(job=job, why=KeptLog.Why.RESTART)
    while kept.values("pod_name").distinct().count() < pods:
        assert time.monotonic() < deadline, "not every pod failed and was kept"
        for due in sync_cluster(cluster.pk).logs_due:
            keep(due.job_id, due.why, due.pods)
    return Finding.objects.get(job=job)


@pytest.mark.parametrize(
    ("name", "roles", "pod", "code", "line"),
    [
        # RLinf: the env worker raises; the runner tears the actors down with ray.kill.
        ("teardown", {"env": ("rollout-error", 1, 20), "head": ("ray-teardown", 1, 40)},
         "teardown-env-0", "", "ValueError: action has shape (64, 8), expected (64, 7)"),
        # One rank's NCCL watchdog times out; the launcher stops the two other ranks.
        ("ranks", {"rank1": ("nccl-timeout", 1, 20), "peers": ("nccl-peer-stopped", 2, 40)},
         "ranks-rank1-0", "nccl_timeout", "[Rank 1] Watchdog caught collective operation timeout"),
        # A worker's CUDA OOM; the head's driver sees only that the actor is dead, and says so
        # first: the dying worker's buffered stderr is flushed (and stamped) after.
        ("surfaced", {"worker": ("cuda-oom", 1, 20), "head": ("actor-dead", 1, 10)},
         "surfaced-worker-0", "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory."),
    ],
)  # fmt: skip
def test_a_runs_first_error_is_the_cause_on_one_pod_never_the_others_consequences(
    alice: User,
    cluster: Cluster,  # noqa: F811
    name: str,
    roles: dict[str, tuple[str, int, int]],
    pod: str,
    code: str,
    line: str,
) -> None:
    """Issue 34, Show (audit item 6): the multi-pod failures of RL on Ray, each pod its own
    role failing as `sim fail KIND SECONDS` prints it, through the real keep and judge path:
    every restart's previous container kept and the run judged again, the cause named and the
    consequence lines never, even one printed before it."""
    tasks = [
        task(role, replicas=replicas, command=["sim", "fail", kind, str(seconds)])
        for role, (kind, replicas, seconds) in roles.items()
    ]
    job = submit(alice, cluster, name, *tasks)
    finding = _run_until_each_pod_is_kept(cluster, job, sum(r[1] for r in roles.values()))
    assert (finding.code, finding.pod_name, finding.consequence) == (code, pod, False)
    assert finding.first_error.startswith(line)
    assert finding.kept_log is not None and finding.kept_log.pod_name == pod
    assert KeptLog.objects.filter(job=job).count() >= len(tasks)  # the consequences were read


def test_a_workers_oomkilled_container_beats_the_heads_actor_is_dead(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    """Issue 34 audit, item 3: the kernel killed the worker (it printed nothing of it); the
    head's log says only that the actor is dead. Kubernetes' OOMKilled is named, not the
    consequence."""
    job = submit(
        alice, cluster, "killed",
        task("worker", command=["sim", "oom", "20"]),
        task("head", command=["sim", "fail", "actor-dead", "40"]),
    )  # fmt: skip
    finding = _run_until_each_pod_is_kept(cluster, job, 2)
    assert (finding.code, finding.pod_name) == ("oom_killed", "killed-worker-0")
