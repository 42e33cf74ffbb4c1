"""The run judged and stored (failures.judge): which of the logs' cause, the workload's reported
reason, Kubernetes' reason and the logs' consequence names a failure, in that order, and that the
Finding links to the very kept log its line is in (issue 34 audit, items 1 to 5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from console.models import Cluster, Project
from failures import judge, store
from failures.models import Signature
from jobs.choices import JobPhase, PodPhase
from jobs.messages import Message, encode
from jobs.models import Job, Task, WorkloadReport
from tests.engine.test_kept_logs import _kept_in_tmp  # noqa: F401 (fixture)
from workers.models import PodInstance, Worker

NOW = datetime(2026, 12, 6, 3, 30, tzinfo=UTC)
NCCL = "2026-12-06T03:05:00.0Z NCCL error: unhandled system error\n"
HEAD_DEAD = (
    "2026-12-06T03:12:09.000000001Z ray.exceptions.RayActorError: The actor is dead because its "
    "worker process has died.\n"
)


@pytest.fixture
def job(project: Project, cluster: Cluster, alice: User) -> Job:
    return Job.objects.create(
        project=project, cluster=cluster, name="rl", namespace="default", owner=alice,
        spec={"tasks": []}, phase=JobPhase.FAILED, created_at=NOW - timedelta(hours=1),
    )  # fmt: skip


def _task(job: Job, role: str = "worker", message: str = "") -> Task:
    return Task.objects.create(job=job, role=role, template={}, message=message, observed_at=NOW)


def _instance(task: Task, pod: str, reason: str = "", uid: str = "") -> PodInstance:
    return PodInstance.objects.create(
        task=task, uid=uid or f"uid-{pod}", pod_name=pod, phase=PodPhase.RUNNING,
        restart_count=1, termination_reason=reason, first_seen_at=NOW, last_seen_at=NOW,
    )  # fmt: skip


def _worker(task: Task, pod: str, reason: str, phase: str = PodPhase.PENDING) -> Worker:
    return Worker.objects.create(
        task=task, pod_name=pod, pod_uid=f"uid-{pod}", phase=phase, reason=reason,
        last_reported_at=NOW,
    )  # fmt: skip


def _keep(job: Job, pod: str, uid: str, text: str) -> None:
    store.save(job, "failed", [store.Tail(pod, uid, "main", 0, text, False)], NOW)


def test_kubernetes_reason_beats_a_consequence_only_log(job: Job) -> None:
    """Item 3: the head says only "The actor is dead"; the worker's container was OOMKilled."""
    _keep(job, "rl-head-0", "uid-head", HEAD_DEAD)
    _instance(_task(job), "rl-worker-1", "OOMKilled")
    finding = judge.judge(job.pk, NOW)
    assert finding is not None and finding.code == "oom_killed"
    assert (finding.pod_name, finding.consequence) == ("rl-worker-1", False)


def test_a_consequence_alone_is_named_as_such(job: Job) -> None:
    _keep(job, "rl-head-0", "uid-head", HEAD_DEAD)
    finding = judge.judge(job.pk, NOW)
    assert finding is not None and finding.code == "actor_dead" and finding.consequence


def test_the_workloads_reported_reason_names_what_no_log_does(job: Job) -> None:
    """Item 1: the driver's RayNodesTimeout, said in its failed completion."""
    _keep(job, "rl-head-0", "uid-head", "2026-12-06T03:00:00.0Z trainyard driver: starting\n")
    completion = {
        "outcome": "failed", "reason": "RayNodesTimeout", "pod": "rl-head-0",
        "message": "Ray has 1 of 2 expected nodes alive after 600 s",
        "at": "2026-12-06T03:10:00+00:00",
    }  # fmt: skip
    WorkloadReport.objects.create(
        job=job, run=1, first_received_at=NOW, last_received_at=NOW,
        latest={"completion": completion},
    )  # fmt: skip
    finding = judge.judge(job.pk, NOW)
    assert finding is not None and finding.code == "ray_nodes_timeout"
    assert (finding.pod_name, finding.at) == ("rl-head-0", datetime(2026, 12, 6, 3, 10, tzinfo=UTC))


@pytest.mark.parametrize(
    ("reason", "code"),
    [("Evicted", "evicted"), ("ImagePullBackOff", "image_pull"), ("ErrImagePull", "image_pull"),
     ("DeadlineExceeded", "deadline")],
)  # fmt: skip
def test_a_pods_own_reason_or_waiting_reason_is_named(job: Job, reason: str, code: str) -> None:
    """Item 2: Evicted and DeadlineExceeded are the pod's status reason, ImagePull a waiting
    reason: the Worker row keeps them (jobs.status.problems.pod_reason)."""
    _worker(_task(job), "rl-worker-0", reason)
    finding = judge.judge(job.pk, NOW)
    assert finding is not None and (finding.code, finding.pod_name) == (code, "rl-worker-0")


def test_a_batch_jobs_deadline_is_named_from_its_failed_condition(job: Job) -> None:
    """Item 2: a batch Job past activeDeadlineSeconds: its pods are deleted, the Job's Failed
    condition says DeadlineExceeded (the Task's message keeps it)."""
    finished = Message("task.batch_finished_reason", {"condition": "Failed",
                                                      "reason": "DeadlineExceeded"})  # fmt: skip
    _task(job, "trainer", encode(finished))
    finding = judge.judge(job.pk, NOW)
    assert finding is not None and (finding.code, finding.pod_name) == ("deadline", "rl-trainer")


def test_the_finding_links_the_kept_log_of_the_recreated_pod(job: Job) -> None:
    """Item 4: the same pod name and attempt 0, twice in one run (a StatefulSet pod re-created):
    the Finding's kept log is the one its line is in."""
    _keep(job, "rl-worker-0", "uid-first", "2026-12-06T03:00:00.0Z step 1\n")
    _keep(job, "rl-worker-0", "uid-second", NCCL)
    finding = judge.judge(job.pk, NOW)
    assert finding is not None and finding.kept_log is not None
    assert finding.kept_log.pod_uid == "uid-second"


def test_a_stored_pattern_re2_refuses_does_not_stop_the_judgement(job: Job) -> None:
    """Item 5: one operator's bad pattern (stored before a check) is left out."""
    Signature.objects.create(code="bad", label="bad", failure_class="user code", pattern=r"(a)\1")
    _keep(job, "rl-worker-0", "uid-0", NCCL)
    finding = judge.judge(job.pk, NOW)
    assert finding is not None and finding.code == "nccl_error"


def test_an_image_pulled_at_last_withdraws_what_was_said_of_it(job: Job) -> None:
    """Item 2: a pull that failed and then succeeded (a registry's hiccup) leaves no banner."""
    worker = _worker(_task(job), "rl-worker-0", "ImagePullBackOff")
    assert judge.judge(job.pk, NOW) is not None
    Worker.objects.filter(pk=worker.pk).update(reason="", phase=PodPhase.RUNNING)
    assert judge.judge(job.pk, NOW) is None and not job.findings.exists()


def test_an_eviction_stays_named_after_its_pod_is_replaced(job: Job) -> None:
    worker = _worker(_task(job), "rl-worker-0", "Evicted", PodPhase.FAILED)
    assert judge.judge(job.pk, NOW) is not None
    Worker.objects.filter(pk=worker.pk).update(reason="", phase=PodPhase.RUNNING)
    assert judge.judge(job.pk, NOW) is None and job.findings.get().code == "evicted"


def test_a_deleted_job_is_not_judged(job: Job) -> None:
    job_id = job.pk
    job.delete()
    assert judge.judge(job_id, NOW) is None
