"""One pod classifier (spec §Troubleshooting a status that does not change): what makes a pod a
problem is decided by `jobs.status.problems.classify` alone, the Task's message and the
troubleshooting panel word its answer, and the database filters that pick the pods worth
reading (the engine's `pods_of_note`, the dashboard's `suspect_workers`, the job page's suspect
Workers) admit every pod it flags. One example pod per problem it knows, stored as the engine
stores it."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from console.engine.memory import Touched
from console.engine.rows import pods_of_note
from console.kube.observations import NodeObs, PodObs, parse_node, parse_pod
from console.models import Cluster, ObservedObject, Project
from jobs.choices import POD_PROBLEMS, JobPhase, PodPhase, Problem
from jobs.diagnostics import Diagnostics
from jobs.models import Job, Task
from jobs.problem_facts import POD_FIELDS, instance_details, pod_facts, suspect_workers
from jobs.status.problems import (
    UNSAID_IN_TASK_MESSAGE,
    PodSigns,
    classify,
    pod_problem,
    pod_reason,
    signs_of,
)
from tests.engine import k8s_json as k8s
from workers.models import PodInstance, Worker

NODES = {"node-1": parse_node(k8s.node()), "node-2": parse_node(k8s.node("node-2", ready="False"))}
TASK = {"role": "worker", "kind": "StatefulSet", "replicas": 1, "image": "rlinf:1"}


def _pod(document: dict[str, object], **fields: object) -> PodObs:
    return replace(parse_pod(document), **fields)  # type: ignore[arg-type]


RUNNING = k8s.pod()
CREATING = k8s.container_creating_pod()
# One pod per problem the classifier knows, as the cluster reports it (KUBERNETES-FACTS.md).
EXAMPLES: dict[Problem, PodObs] = {
    Problem.NODE_OFFLINE: _pod(k8s.node_lost_pod(), node_name="node-2"),
    Problem.EVICTED: _pod(k8s.evicted_pod()),
    Problem.UNSCHEDULABLE: _pod(k8s.unschedulable_pod()),
    Problem.IMAGE_PULL: _pod(k8s.image_pull_pod()),
    Problem.CONFIG_ERROR: _pod(
        CREATING, waiting_reason="CreateContainerConfigError", waiting_message='secret "s3"'
    ),
    Problem.OUT_OF_MEMORY: _pod(k8s.oom_restarted_pod()),
    Problem.CRASH_LOOP: _pod(k8s.crash_loop_pod(restarts=4, exit_code=3)),
    Problem.POD_FAILED: _pod(k8s.finished_pod("eval-fghij", succeeded=False)),
    Problem.OTHER_REASON: _pod(CREATING, waiting_reason="PreStartHookError"),
    Problem.CONTAINER_EXITED: _pod(
        RUNNING, ready=False, exit_code=1, termination_reason="Error", terminated_now=True
    ),
    Problem.RESTARTED: _pod(RUNNING, restart_count=2, exit_code=1, termination_reason="Error"),
    Problem.NOT_READY: _pod(RUNNING, ready=False),
}
HEALTHY = (
    _pod(RUNNING),
    _pod(CREATING),
    _pod(k8s.finished_pod("eval-abcde", succeeded=True)),
    _pod(k8s.node_lost_pod(evicting=True), ready=True),
)


def test_it_has_an_example_of_every_pod_problem_and_classifies_each() -> None:
    assert set(EXAMPLES) == POD_PROBLEMS
    for problem, pod in EXAMPLES.items():
        assert classify(signs_of(pod, NODES)) == problem, problem
    for pod in HEALTHY:
        assert classify(signs_of(pod, NODES)) is None, pod.name


@pytest.mark.parametrize(
    ("signs", "problem"),
    [
        (PodSigns("Pending", False, "Unschedulable"), Problem.UNSCHEDULABLE),
        (PodSigns("Running", False, "CrashLoopBackOff", 4, 137, "OOMKilled"),
         Problem.OUT_OF_MEMORY),
        (PodSigns("Failed", False, "OOMKilled", 0, 137, "OOMKilled"), Problem.OUT_OF_MEMORY),
        (PodSigns("Running", False, "", 0, 137, ""), Problem.OUT_OF_MEMORY),
        (PodSigns("Failed", False, "Error", 0, 137, "Error"), Problem.POD_FAILED),
        (PodSigns("Failed", False, "Evicted", 0, 137, "OOMKilled"), Problem.EVICTED),
        (PodSigns("Running", False, "CreateContainerConfigError", 2, 137, "OOMKilled"),
         Problem.OUT_OF_MEMORY),
        (PodSigns("Running", False, "Terminated"), Problem.NOT_READY),
    ],
)  # fmt: skip
def test_it_decides_in_one_order_where_the_earlier_readers_disagreed(
    signs: PodSigns, problem: Problem
) -> None:
    """docs/decisions.md, one pod classifier: OOMKilled by its field before the crash loop or
    failure it causes; exit code 137 alone only where no termination reason is known; the pod's
    own verdict (Evicted) first."""
    assert classify(signs) == problem


def test_it_words_in_the_task_message_what_the_classifier_flags() -> None:
    for problem, pod in EXAMPLES.items():
        worded = pod_problem(pod, NODES)
        assert (worded is None) == (problem in UNSAID_IN_TASK_MESSAGE), problem


@pytest.fixture
def job(project: Project, cluster: Cluster) -> Job:
    return Job.objects.create(
        project=project, cluster=cluster, name="sick", namespace="default",
        spec={"tasks": [TASK]}, phase=JobPhase.RUNNING,
    )  # fmt: skip


def _store(job: Job, pods: list[PodObs], nodes: dict[str, NodeObs]) -> Task:
    """The pods as the engine stores them (console.engine.derive): a Worker, a pod instance with
    the last exit, an ObservedObject; the Task applied and observed long ago, so that
    nothing is admitted merely for being new or missing from the last report."""
    now, long_ago = timezone.now(), timezone.now() - timedelta(hours=1)
    task = Task.objects.create(
        job=job, role="worker", template=TASK, applied_at=long_ago, observed_at=long_ago
    )
    for pod in pods:
        reason, message = pod_reason(pod, nodes)
        Worker.objects.create(
            task=task, pod_name=pod.name, pod_uid=pod.uid, node_name=pod.node_name,
            phase=pod.phase or PodPhase.RUNNING, ready=pod.ready, reason=reason,
            message=message, restart_count=pod.restart_count, last_reported_at=now,
        )  # fmt: skip
        PodInstance.objects.create(
            task=task, uid=pod.uid, pod_name=pod.name, phase=pod.phase or PodPhase.RUNNING,
            restart_count=pod.restart_count, last_exit_code=pod.exit_code,
            termination_reason=pod.termination_reason, first_seen_at=now, last_seen_at=now,
        )  # fmt: skip
        ObservedObject.objects.create(
            cluster=job.cluster, stream="pods", uid=pod.uid, resource_version="1",
            job_id=job.pk, node_name=pod.node_name, data="{}",
        )  # fmt: skip
    return task


def _named(pods: list[PodObs]) -> list[PodObs]:
    return [replace(pod, name=f"pod-{n}", uid=f"uid-{n}") for n, pod in enumerate(pods)]


def test_it_reads_back_the_stored_rows_as_the_live_pods_were_classified(job: Job) -> None:
    """The panel judges stored rows, the Task message live pods: the same answer."""
    pods = _named(list(EXAMPLES.values()))
    _store(job, pods, NODES)
    rows = list(Worker.objects.order_by("pod_name").values_list(*POD_FIELDS, named=True))
    exits = instance_details(rows)
    stored = {row.pod_uid: classify(pod_facts(row, True, exits).signs) for row in rows}
    assert stored == {pod.uid: problem for pod, problem in zip(pods, EXAMPLES, strict=True)}


def test_it_reads_every_pod_the_task_message_may_name_besides_the_changed_ones(job: Job) -> None:
    """console.engine.rows.pods_of_note: a Task's message names the first problem among all its
    pods, so the engine reads every stored pod it could name, and not the healthy ones."""
    named = [pod for problem, pod in EXAMPLES.items() if problem not in UNSAID_IN_TASK_MESSAGE]
    pods = _named([*named, *HEALTHY])
    _store(job, pods, NODES)
    admitted = set(
        ObservedObject.objects.filter(pods_of_note(Touched(jobs={job.pk}))).values_list(
            "uid", flat=True
        )
    )
    flagged = {pod.uid for pod in pods if pod_problem(pod, NODES) is not None}
    assert len(flagged) == len(named)
    assert flagged <= admitted
    assert pods[len(named)].uid not in admitted  # a Running, ready pod is not read


@pytest.mark.parametrize("diagnostics", [Diagnostics(everywhere=True), Diagnostics()])
def test_the_dashboard_filter_admits_every_pod_the_panel_flags(
    job: Job, diagnostics: Diagnostics
) -> None:
    """jobs.problem_facts.suspect_workers: every Worker in which the panel can find a problem, for a
    reader who sees restart counts and exits and for one who does not."""
    pods = _named([*EXAMPLES.values(), *HEALTHY])
    _store(job, pods, NODES)
    now = timezone.now()
    admitted = set(
        Worker.objects.filter(suspect_workers(now, diagnostics)).values_list("pod_uid", flat=True)
    )
    rows = list(Worker.objects.values_list(*POD_FIELDS, named=True))
    exits = instance_details(rows) if diagnostics.anywhere else {}
    flagged = {
        row.pod_uid
        for row in rows
        if classify(pod_facts(row, diagnostics.anywhere, exits).signs) is not None
    }
    assert len(flagged) == len(EXAMPLES) - (0 if diagnostics.anywhere else 2)
    assert flagged <= admitted
    assert pods[len(EXAMPLES)].uid not in admitted


def test_the_job_page_names_every_pod_the_classifier_flags(
    client: Client, olga: User, job: Job
) -> None:
    """The job page's panel reads its own suspect Workers (jobs.views.jobs.detail): each flagged
    pod is named there under its problem, as an operator (who sees exits) reads it."""
    pods = _named(list(EXAMPLES.values()))
    _store(job, pods, NODES)
    client.force_login(olga)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    for pod, problem in zip(pods, EXAMPLES, strict=True):
        named = rf"<strong>{re.escape(str(problem.label))}</strong>: [^<]*\b{pod.name}\b"
        assert re.search(named, html), problem
