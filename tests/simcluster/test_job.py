"""batch/v1 Jobs: success and failure conditions exactly as Kubernetes 1.31+ writes them, pod
naming and labels, parallelism, restart-policy accounting and deletion defaults.

Spec: KUBERNETES-FACTS.md, Workloads (batch/v1 Job) and Pods (Job pod labels).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.simcluster.conftest import Kube, container, job_manifest, wait_for

SUCCESS = ("CompletionsReached", "Reached expected number of succeeded pods")
FAILURE = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


def raw_status(kube: Kube, name: str) -> dict:
    return kube.batch.read_namespaced_job(name, kube.namespace, _preload_content=False).json()[
        "status"
    ]


def job_ready(kube: Kube, name: str) -> Callable[[], bool]:
    return lambda: kube.batch.read_namespaced_job(name, kube.namespace).status.ready == 1


def finished(kube: Kube, name: str):
    job = kube.batch.read_namespaced_job(name, kube.namespace)
    types = [c.type for c in job.status.conditions or []]
    return ("Complete" in types or "Failed" in types) and job


def test_it_completes_a_job_with_the_success_conditions(kube: Kube) -> None:
    kube.batch.create_namespaced_job(
        kube.namespace, job_manifest("ok", ["sim", "run", "2"], completions=2)
    )
    job = wait_for(lambda: finished(kube, "ok"))
    assert [(c.type, c.status, c.reason, c.message) for c in job.status.conditions] == [
        ("SuccessCriteriaMet", "True", *SUCCESS),
        ("Complete", "True", *SUCCESS),
    ]
    assert job.status.succeeded == 2 and job.status.completion_time and job.status.start_time
    raw = raw_status(kube, "ok")
    assert "active" not in raw and "failed" not in raw
    assert raw["uncountedTerminatedPods"] == {} and raw["ready"] == 0 and raw["terminating"] == 0
    pods = kube.core.list_namespaced_pod(kube.namespace, label_selector="job-name=ok").items
    assert len(pods) == 2 and all(p.status.phase == "Succeeded" for p in pods)
    pod = pods[0]
    assert re.fullmatch(r"ok-[bcdfghjklmnpqrstvwxz2456789]{5}", pod.metadata.name)
    uid = job.metadata.uid
    assert {
        k: pod.metadata.labels[k]
        for k in (
            "batch.kubernetes.io/job-name",
            "job-name",
            "batch.kubernetes.io/controller-uid",
            "controller-uid",
        )
    } == {
        "batch.kubernetes.io/job-name": "ok",
        "job-name": "ok",
        "batch.kubernetes.io/controller-uid": uid,
        "controller-uid": uid,
    }
    assert not pod.metadata.finalizers
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}


def test_it_fails_a_job_past_its_backoff_limit(kube: Kube) -> None:
    kube.batch.create_namespaced_job(
        kube.namespace, job_manifest("bad", ["sim", "crash", "1", "2"], backoffLimit=1)
    )
    job = wait_for(lambda: finished(kube, "bad"), timeout=20)
    assert [(c.type, c.status, c.reason, c.message) for c in job.status.conditions] == [
        ("FailureTarget", "True", *FAILURE),
        ("Failed", "True", *FAILURE),
    ]
    assert (
        job.status.failed == 2 and job.status.completion_time is None and job.status.active is None
    )
    pods = kube.core.list_namespaced_pod(kube.namespace, label_selector="job-name=bad").items
    assert sorted(p.status.phase for p in pods) == ["Failed", "Failed"]
    assert {p.status.container_statuses[0].state.terminated.exit_code for p in pods} == {2}
    event = kube.core.list_namespaced_event(
        kube.namespace, field_selector="involvedObject.name=bad,reason=BackoffLimitExceeded"
    ).items
    assert event and event[0].type == "Warning"


def test_it_counts_restarts_against_the_limit_with_on_failure(kube: Kube) -> None:
    manifest = job_manifest("flaky", ["sim", "crash", "1"], backoffLimit=2)
    manifest["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    kube.batch.create_namespaced_job(kube.namespace, manifest)
    job = wait_for(lambda: finished(kube, "flaky"), timeout=20)
    assert [c.type for c in job.status.conditions] == ["FailureTarget", "Failed"]


def test_it_runs_no_pods_with_parallelism_zero(kube: Kube) -> None:
    kube.batch.create_namespaced_job(
        kube.namespace, job_manifest("held", ["sim", "run", "1"], parallelism=0, completions=3)
    )
    wait_for(lambda: raw_status(kube, "held").get("startTime"))
    kube.batch.patch_namespaced_job("held", kube.namespace, {"metadata": {"labels": {"poke": "1"}}})
    assert kube.core.list_namespaced_pod(kube.namespace, label_selector="job-name=held").items == []
    assert "active" not in raw_status(kube, "held")
    kube.batch.patch_namespaced_job("held", kube.namespace, {"spec": {"parallelism": 3}})
    job = wait_for(lambda: finished(kube, "held"))
    assert job.status.succeeded == 3


def test_it_runs_pods_in_parallel_up_to_the_limit(kube: Kube) -> None:
    kube.batch.create_namespaced_job(
        kube.namespace, job_manifest("wide", ["sim", "run", "30"], parallelism=2, completions=4)
    )
    status = wait_for(
        lambda: (
            (s := kube.batch.read_namespaced_job("wide", kube.namespace).status).ready == 2 and s
        )
    )
    assert status.active == 2
    assert (
        len(kube.core.list_namespaced_pod(kube.namespace, label_selector="job-name=wide").items)
        == 2
    )


def test_it_orphans_job_pods_unless_asked_to_cascade(kube: Kube) -> None:
    for name in ("kept", "swept"):
        manifest = job_manifest(name, ["sim", "hang"])
        manifest["spec"]["template"]["spec"]["containers"] = [
            container(command=["sim", "run", "600"])
        ]
        kube.batch.create_namespaced_job(kube.namespace, manifest)
    for name in ("kept", "swept"):
        wait_for(job_ready(kube, name))
    kube.batch.delete_namespaced_job("kept", kube.namespace)
    kept = wait_for(
        lambda: (
            (
                p := kube.core.list_namespaced_pod(
                    kube.namespace, label_selector="job-name=kept"
                ).items
            )
            and not p[0].metadata.owner_references
            and p[0]
        )
    )
    assert kept.metadata.deletion_timestamp is None and not kept.metadata.finalizers
    kube.batch.delete_namespaced_job("swept", kube.namespace, propagation_policy="Background")
    wait_for(
        lambda: (
            not kube.core.list_namespaced_pod(kube.namespace, label_selector="job-name=swept").items
        )
    )


def test_it_fails_a_job_past_its_active_deadline(kube: Kube) -> None:
    kube.batch.create_namespaced_job(
        kube.namespace, job_manifest("late", ["sim", "hang"], activeDeadlineSeconds=20)
    )
    job = wait_for(lambda: finished(kube, "late"), timeout=20)
    message = "Job was active longer than specified deadline"
    assert [(c.type, c.reason, c.message) for c in job.status.conditions] == [
        ("FailureTarget", "DeadlineExceeded", message),
        ("Failed", "DeadlineExceeded", message),
    ]


def test_it_holds_a_suspended_job_until_resumed(kube: Kube) -> None:
    kube.batch.create_namespaced_job(
        kube.namespace, job_manifest("later", ["sim", "run", "2"], suspend=True)
    )
    suspended = wait_for(
        lambda: (
            (s := kube.batch.read_namespaced_job("later", kube.namespace).status).conditions and s
        )
    )
    assert [(c.type, c.status, c.reason) for c in suspended.conditions] == [
        ("Suspended", "True", "JobSuspended")
    ]
    assert (
        kube.core.list_namespaced_pod(kube.namespace, label_selector="job-name=later").items == []
    )
    kube.batch.patch_namespaced_job("later", kube.namespace, {"spec": {"suspend": False}})
    job = wait_for(lambda: finished(kube, "later"))
    assert [(c.type, c.status) for c in job.status.conditions] == [
        ("Suspended", "False"),
        ("SuccessCriteriaMet", "True"),
        ("Complete", "True"),
    ]
