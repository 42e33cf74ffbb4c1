"""Logs kept at the moments Kubernetes would lose them, and the first error named from them
(issue 34, items 1, 3 and 4), against simcluster: a restart's previous container read before the
next restart overwrites it, a stop's tails kept before the scale-down, retention and each
project's cap evicting the oldest first.

Spec: KUBERNETES-FACTS.md (Pod logs: one previous instance is kept; `limitBytes` drops the
newest lines)."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.test import Client
from django.utils import timezone

from console.demo import DEMO_JOBS
from console.engine.cycle import sync_cluster
from console.engine.keep_logs import Due, keep
from console.engine.one_job import reconcile_job
from console.kube.gateway import BATCH_JOBS, PODS, STATEFULSETS
from console.models import ApiToken, Cluster, Project
from failures import store
from failures.judge import judge
from failures.models import Finding, KeptLog
from jobs import operations
from jobs.models import Job
from simcluster.server import SimCluster
from tests.engine.conftest import (  # noqa: F401 (fixtures)
    TIMEOUT,
    _fast_passwords,
    cluster,
    gateway,
    sim,
    submit,
    sync_until,
    task,
)
from workers.models import PodInstance, Worker


@pytest.fixture(autouse=True)
def _kept_in_tmp(settings: object, tmp_path: object) -> None:
    settings.STORAGES = {  # type: ignore[attr-defined]
        **settings.STORAGES,  # type: ignore[attr-defined]
        "kept_logs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }


def _dues_until_restart(cluster: Cluster, pod: str) -> list[Due]:  # noqa: F811
    """Sync cycles until the pod restarted, with every Due they noted."""
    dues: list[Due] = []
    deadline = time.monotonic() + TIMEOUT
    while not PodInstance.objects.filter(pod_name=pod, restart_count__gte=1).exists():
        assert time.monotonic() < deadline, "the pod never restarted"
        dues += sync_cluster(cluster.pk).logs_due
        time.sleep(0.05)
    return dues


def test_a_restart_keeps_the_previous_container_and_names_its_cuda_oom(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    job = submit(alice, cluster, "oom", task("worker", command=["sim", "fail", "cuda-oom", "300"]))
    dues = _dues_until_restart(cluster, "oom-worker-0")
    restarts = [due for due in dues if due.why == KeptLog.Why.RESTART]
    assert len(restarts) == 1 and restarts[0].job_id == job.pk
    (pod,) = restarts[0].pods
    assert (pod.pod_name, pod.attempt, pod.previous) == ("oom-worker-0", 0, True)
    assert keep(job.pk, restarts[0].why, restarts[0].pods) == 1
    kept = KeptLog.objects.get(job=job)
    assert (kept.attempt, kept.why, kept.container) == (0, "restart", "main")
    text = store.read(kept)
    assert "torch.OutOfMemoryError: CUDA out of memory" in text and "[sim] sim fail" in text
    assert text.splitlines()[0][4] == "-" and text.splitlines()[0][10] == "T"  # timestamped
    finding = Finding.objects.get(job=job, run=1)
    assert (finding.code, finding.pod_name, finding.attempt) == ("cuda_oom", "oom-worker-0", 0)
    assert finding.raised_at == "utils.py:97" and finding.kept_log_id == kept.pk
    assert finding.first_error.startswith("torch.OutOfMemoryError")


def test_a_restart_read_after_the_next_restart_is_not_kept_under_the_wrong_run(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    """The kubelet keeps one previous run: a task that reads after the container restarted
    again gets a later run, and says "not kept" for the one noted rather than mislabel it."""
    crashing = task("worker", command=["sim", "fail", "cuda-oom", "200"])
    job = submit(alice, cluster, "again", crashing)
    first = [due for due in _dues_until_restart(cluster, "again-worker-0") if due.pods]
    sync_until(cluster, lambda: PodInstance.objects.filter(restart_count__gte=2).exists())
    assert [pod.attempt for pod in first[0].pods] == [0]
    assert keep(job.pk, first[0].why, first[0].pods) == 0  # run 1 was there to read, not run 0
    assert not KeptLog.objects.filter(job=job).exists()
    pod = first[0].pods[0]._replace(attempt=1)  # the next cycle's Due: the run there now
    assert keep(job.pk, KeptLog.Why.RESTART, [pod]) == 1
    assert KeptLog.objects.get(job=job).attempt == 1


def test_a_stop_keeps_every_container_before_it_scales_down(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    job = submit(
        alice, cluster, "longrun", task("worker", replicas=2, command=["sim", "run", "3600"])
    )
    sync_until(cluster, lambda: Worker.objects.filter(task__job=job, phase="Running").count() == 2)
    operations.stop_job(alice, job)
    reconcile_job(job.pk)
    kept = KeptLog.objects.filter(job=job).order_by("pod_name")
    assert [(k.pod_name, k.why) for k in kept] == [
        ("longrun-worker-0", "stop"),
        ("longrun-worker-1", "stop"),
    ]
    assert all("[sim] sim run 3600" in store.read(k) for k in kept)
    scaled = gateway(cluster).get(STATEFULSETS, job.namespace, "longrun-worker")
    assert scaled is not None and scaled["spec"]["replicas"] == 0


def test_the_reads_before_a_stop_are_bounded_in_time(
    alice: User,
    cluster: Cluster,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No read starts once REMOVAL_READ_SECONDS are spent: the stop is applied all the same,
    and what was not read is "not kept"."""
    monkeypatch.setattr("console.engine.keep_logs.REMOVAL_READ_SECONDS", -1.0)
    job = submit(alice, cluster, "late", task("worker", command=["sim", "run", "3600"]))
    sync_until(cluster, lambda: Worker.objects.filter(task__job=job, phase="Running").exists())
    operations.stop_job(alice, job)
    reconcile_job(job.pk)
    assert not KeptLog.objects.filter(job=job).exists()
    scaled = gateway(cluster).get(STATEFULSETS, job.namespace, "late-worker")
    assert scaled is not None and scaled["spec"]["replicas"] == 0


def test_a_job_that_turns_failed_is_due_and_judged(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    job = submit(
        alice, cluster, "nccl",
        task("worker", kind="Job", command=["sim", "fail", "nccl-timeout", "20"]),
    )  # fmt: skip
    dues: list[Due] = []
    deadline = time.monotonic() + TIMEOUT
    while Job.objects.get(pk=job.pk).phase != "Failed":
        assert time.monotonic() < deadline
        dues += sync_cluster(cluster.pk).logs_due
    failed = [due for due in dues if due.why == KeptLog.Why.FAILED]
    assert [due.job_id for due in failed] == [job.pk]
    keep(job.pk, failed[0].why, failed[0].pods)
    finding = Finding.objects.get(job=job)
    assert finding.code == "nccl_timeout" and "Watchdog caught" in finding.first_error


def _kept(job: Job, uid: str, size: int, at: datetime) -> KeptLog:
    with time_machine.travel(at, tick=False):
        tail = store.Tail("p-0", uid, "main", 0, "x" * size, False)
        return store.save(job, "restart", [tail], timezone.now())[0]


def test_retention_and_the_project_cap_evict_the_oldest_first(
    alice: User,
    cluster: Cluster,  # noqa: F811
    settings: object,
) -> None:
    job = submit(alice, cluster, "kept", task("worker", command=["sim", "hang"]))
    settings.TRAINYARD_LOG_KEEP_DAYS = 30  # type: ignore[attr-defined]
    settings.TRAINYARD_LOG_KEEP_PROJECT_MIB = 1  # type: ignore[attr-defined]
    now = timezone.now()
    old = _kept(job, "uid-old", 10, now - timedelta(days=31))
    recent = _kept(job, "uid-recent", 10, now - timedelta(days=1))
    assert store.evict(now) == 1
    assert list(KeptLog.objects.values_list("pod_uid", flat=True)) == ["uid-recent"]
    assert not store.storage().exists(old.name) and store.storage().exists(recent.name)
    # Random hex compresses to about half: three runs of ~450 KiB stored overflow 1 MiB.
    for number in range(3):
        with time_machine.travel(now + timedelta(minutes=number), tick=False):
            text = os.urandom(450_000).hex()
            store.save(job, "restart", [store.Tail("p-0", f"uid-{number}", "main", 0, text, False)],
                       timezone.now())  # fmt: skip
    left = list(KeptLog.objects.order_by("kept_at").values_list("pod_uid", flat=True))
    assert left == ["uid-1", "uid-2"]
    assert sum(KeptLog.objects.values_list("stored_bytes", flat=True)) <= 1024 * 1024


def _delete(alice: User, cluster: Cluster, name: str) -> tuple[Job, list[KeptLog]]:  # noqa: F811
    """A running Job deleted: its containers kept first, then the workloads and the row go.
    Returns the Job as it was and the kept rows left after."""
    job = submit(alice, cluster, name, task("worker", command=["sim", "run", "3600"]))
    sync_until(cluster, lambda: Worker.objects.filter(task__job=job, phase="Running").exists())
    operations.delete_job(alice, job, name)
    deadline = time.monotonic() + TIMEOUT
    while Job.objects.filter(pk=job.pk).exists():
        assert time.monotonic() < deadline, "the Job row was never deleted"
        reconcile_job(job.pk)
        sync_cluster(cluster.pk)
    return job, list(KeptLog.objects.filter(job_name=name))


def _files_under(path: str) -> tuple[int, list[str]]:
    """How many folders there are under `path` in the kept_logs storage, and every file."""
    folders, files = store.storage().listdir(path)
    found = (len(folders), [f"{path}/{file}" for file in files])
    for folder in folders:
        more = _files_under(f"{path}/{folder}")
        found = (found[0] + more[0], found[1] + more[1])
    return found


def test_a_deleted_jobs_kept_logs_go_with_it(
    alice: User,
    cluster: Cluster,  # noqa: F811
    settings: object,
) -> None:
    """Issue 34, item 1: kept before the delete, then gone with the Job (the default)."""
    settings.TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS = 0  # type: ignore[attr-defined]
    job, left = _delete(alice, cluster, "gone")
    # The pod's folder shows its log was stored before the delete; its text went with the Job.
    assert left == [] and _files_under(f"{job.project_id}/{job.pk}") == (1, [])


def test_a_deleted_jobs_kept_logs_stay_for_the_days_configured(
    alice: User,
    cluster: Cluster,  # noqa: F811
    settings: object,
) -> None:
    settings.TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS = 7  # type: ignore[attr-defined]
    before = timezone.now()
    job, left = _delete(alice, cluster, "kept7")
    assert [(k.why, k.job_id) for k in left] == [("delete", None)]
    (kept,) = left
    assert _files_under(f"{job.project_id}/{job.pk}")[1] == [kept.name]
    assert kept.delete_after is not None and kept.delete_after > before + timedelta(days=6)
    assert "[sim] sim run 3600" in store.read(kept)
    assert store.evict(kept.delete_after + timedelta(seconds=1)) == 1
    assert not store.storage().exists(kept.name)


def test_an_oomkilled_container_is_named_by_kubernetes_reason_when_its_log_names_nothing(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    """Issue 34, item 3/4: an OOMKilled container writes no error of its own (the kernel killed
    it); the Failed Job's kept log holds no traceback, so Kubernetes' reason labels it."""
    job = submit(alice, cluster, "oomk", task("trainer", kind="Job", command=["sim", "oom", "2"]))
    dues: list[Due] = []
    deadline = time.monotonic() + TIMEOUT
    while Job.objects.get(pk=job.pk).phase != "Failed":
        assert time.monotonic() < deadline
        dues += sync_cluster(cluster.pk).logs_due
    (failed,) = [due for due in dues if due.why == KeptLog.Why.FAILED]
    keep(job.pk, failed.why, failed.pods)
    finding = Finding.objects.get(job=job)
    assert (finding.code, finding.failure_class) == ("oom_killed", "out of memory")
    assert finding.pod_name.startswith("oomk-trainer-") and finding.first_error == ""


def test_the_demos_failing_jobs_are_named_by_the_engine(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    """`make run`'s demo (console/demo.py): its NCCL timeout and its CUDA OOM are named from
    their kept logs. Each fails well within a minute of simulated time (20 s and 25 s); here
    simcluster runs at SPEED, and the dues are kept as the Celery task keeps them."""
    demo = {job["name"]: job for job in DEMO_JOBS}
    wanted = {"grpo-nccl-timeout": "nccl_timeout", "ppo-cuda-oom": "cuda_oom"}
    jobs = {}
    for name in wanted:
        (spec,) = demo[name]["tasks"]
        assert int(spec["command"][-1]) < 45, "named on its page within a minute"
        jobs[name] = submit(alice, cluster, name, {**spec, "replicas": 1})
    deadline = time.monotonic() + TIMEOUT
    while Finding.objects.filter(job__in=jobs.values()).count() < len(jobs):
        assert time.monotonic() < deadline, "the demo's failures were never named"
        for due in sync_cluster(cluster.pk).logs_due:
            keep(due.job_id, due.why, due.pods)
    for name, code in wanted.items():
        assert Finding.objects.get(job=jobs[name]).code == code


def test_a_job_stuck_on_an_image_is_judged_and_its_page_names_imagepull(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    """Issue 34 audit, item 2: the demo's `rollout-bad-image` never turns Failed; its pod waits
    on ErrImagePull / ImagePullBackOff (a waiting reason, its Worker row's). The cycle that sees
    it notes the Job for judging (as the `judge_failure` task does), and the page names it."""
    (spec,) = next(job for job in DEMO_JOBS if job["name"] == "rollout-bad-image")["tasks"]
    job = submit(alice, cluster, "rollout-bad-image", {**spec, "replicas": 1})
    due: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    while job.pk not in due:
        assert time.monotonic() < deadline, "the stuck pull was never noted"
        due |= set(sync_cluster(cluster.pk).judge_due)
    judge(job.pk, timezone.now())
    finding = Finding.objects.get(job=job)
    assert (finding.code, finding.failure_class) == ("image_pull", "configuration")
    assert finding.pod_name == "rollout-bad-image-rollout-0"
    client = Client()
    client.force_login(alice)
    page = client.get(job.get_absolute_url()).content.decode()
    assert "Failing:" in page and "Image cannot be pulled (configuration)" in page
    assert "The image name, tag or registry credentials are wrong" in page
    # The image is pulled at last (here the pod's image mended behind the console's back): the
    # cycle that sees the reason go notes the Job, and what was said of the pull is withdrawn.
    api = gateway(cluster)
    pod = api.get(PODS, job.namespace, finding.pod_name)
    assert pod is not None
    containers = [{**c, "image": "registry.example/rollout:1"} for c in pod["spec"]["containers"]]
    api.patch(PODS, job.namespace, finding.pod_name, {"spec": {"containers": containers}})
    _judged_when_due(cluster, job, found=False)


def test_a_driver_whose_ray_nodes_never_gather_is_named_by_its_own_line(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    """Issue 34 audit, item 1: the wrapper waits for two Ray nodes, none joins; past
    --nodes-timeout it says so on its log and in its completion, and the Job's failure is the
    Ray nodes signature, on its page and in the API."""
    script = (
        "ray start --head --port=6379 --block & exec python /opt/trainyard/trainyard_driver.py "
        "--expected-nodes 2 --nodes-timeout 5 --poll-seconds 1 -- python train.py"
    )
    job = submit(alice, cluster, "gather", task("head", command=["bash", "-c", script]))
    sync_until(cluster, lambda: Worker.objects.filter(task__job=job, phase="Running").exists())
    deadline = time.monotonic() + TIMEOUT
    while True:
        keep(job.pk, KeptLog.Why.COMPLETION)  # as the completion's keep would, when it came
        finding = Finding.objects.filter(job=job).first()
        if finding is not None:
            break
        assert time.monotonic() < deadline, "the Ray nodes timeout was never named"
        time.sleep(0.2)
    assert (finding.code, finding.failure_class) == ("ray_nodes_timeout", "Ray membership")
    assert "Ray has 1 of 2 expected nodes alive after 5 s" in finding.first_error
    token = ApiToken.issue(alice, "t")[1]
    api = Client().get(f"/api/v1/jobs/{job.pk}", headers={"Authorization": f"Bearer {token}"})
    api = api.json()
    assert api["failure"]["label"] == "Ray nodes did not gather"
    client = Client()
    client.force_login(alice)
    page = client.get(job.get_absolute_url()).content.decode()
    assert "Ray nodes did not gather (Ray membership)" in page


def _judged_when_due(cluster: Cluster, job: Job, found: bool = True) -> Finding | None:  # noqa: F811
    """Sync cycles until one notes the Job for judging; then judged as `judge_failure` does."""
    deadline = time.monotonic() + TIMEOUT
    while job.pk not in sync_cluster(cluster.pk).judge_due:
        assert time.monotonic() < deadline, "the Job was never noted for judging"
    judge(job.pk, timezone.now())
    finding = Finding.objects.filter(job=job).first()
    assert (finding is not None) == found
    return finding


def test_an_evicted_pod_is_named_by_its_pods_reason(
    alice: User,
    cluster: Cluster,  # noqa: F811
    sim: SimCluster,  # noqa: F811
) -> None:
    """Issue 34 audit, item 2: Evicted is the pod's `status.reason` (KUBERNETES-FACTS: phase
    Failed, its container terminated with reason Error), never a container's termination
    reason; its Worker row keeps it and the Job is judged when the sync sees it."""
    job = submit(
        alice, cluster, "evict", task("worker", kind="Job", command=["sim", "run", "3600"])
    )
    sync_until(cluster, lambda: Worker.objects.filter(task__job=job, phase="Running").exists())
    pod = Worker.objects.get(task__job=job).pod_name
    assert sim.evict_pod(job.namespace, pod)
    finding = _judged_when_due(cluster, job)
    assert finding is not None
    assert (finding.code, finding.failure_class, finding.pod_name) == (
        "evicted",
        "infrastructure",
        pod,
    )
    assert PodInstance.objects.get(pod_name=pod).termination_reason == "Error"


def test_a_batch_job_past_its_deadline_is_named_deadline_exceeded(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    """Issue 34 audit, item 2: a batch Job past `activeDeadlineSeconds` (set here behind the
    console's back: its spec has no such field) turns Failed with the condition reason
    DeadlineExceeded and its pods deleted; the Failed Job is kept and judged from it."""
    job = submit(
        alice, cluster, "late", task("trainer", kind="Job", command=["sim", "run", "3600"])
    )
    sync_until(cluster, lambda: Worker.objects.filter(task__job=job, phase="Running").exists())
    patch = {"spec": {"activeDeadlineSeconds": 1}}
    gateway(cluster).patch(BATCH_JOBS, job.namespace, "late-trainer", patch)
    dues: list[Due] = []
    deadline = time.monotonic() + TIMEOUT
    while Job.objects.get(pk=job.pk).phase != "Failed":
        assert time.monotonic() < deadline, "the deadline never failed the Job"
        dues += sync_cluster(cluster.pk).logs_due
    (failed,) = [due for due in dues if due.why == KeptLog.Why.FAILED]
    keep(job.pk, failed.why, failed.pods)
    finding = Finding.objects.get(job=job)
    assert (finding.code, finding.pod_name) == ("deadline", "late-trainer")


def test_a_completion_read_from_the_termination_message_keeps_the_logs(
    alice: User,
    cluster: Cluster,  # noqa: F811
) -> None:
    """Issue 34, item 1: "the workload reports completion or failure" whichever way it reports
    it; a completion read from /dev/termination-log keeps the logs as a posted one does."""
    said = '{"trainyard": "completion", "outcome": "failed", "reason": "NaNLoss"}'
    job = submit(alice, cluster, "nan", task("head", command=["sim", "crash", "5", "3", said]))
    dues: list[Due] = []
    deadline = time.monotonic() + TIMEOUT
    while not any(due.why == KeptLog.Why.COMPLETION for due in dues):
        assert time.monotonic() < deadline, "the completion never called for its logs"
        dues += sync_cluster(cluster.pk).logs_due
    (ended,) = [due for due in dues if due.why == KeptLog.Why.COMPLETION]
    assert (ended.job_id, ended.pods) == (job.pk, ())
    assert keep(ended.job_id, ended.why, ended.pods) == 1
    assert KeptLog.objects.get(job=job).why == "completion"


def test_a_deleted_projects_kept_logs_go_with_it_texts_too(
    project: Project, django_capture_on_commit_callbacks: Any
) -> None:
    """Kept logs of a Job deleted earlier (job empty, kept for the days configured) belong to
    the project: its deletion takes the rows (cascade) and the stored texts."""
    name = store.storage().save("9/9/uid/main-0.log.gz", ContentFile(b"x"))
    KeptLog.objects.create(
        project=project, job=None, job_name="old", run=1, pod_name="old-0", pod_uid="uid",
        container="main", attempt=0, why="delete", name=name,
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        project.delete()
    assert not KeptLog.objects.exists() and not store.storage().exists(name)
