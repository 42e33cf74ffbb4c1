"""A Workflow is up to date one sync cycle after any change of what it counts, also a change no
watch sees (issue 31, defect 1; spec §Workflow status: a Workflow aggregates its status from its
child Jobs): a child's workload completion, posted or read from its termination message, and a
child's deletion.

The simulated clock is frozen (speed 0) and moved only while the Jobs start, so the cycle under
test sees no Kubernetes change at all (no kubelet heartbeat either).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from console.engine.cycle import sync_cluster
from console.engine.one_job import reconcile_job
from console.engine.rows import State, workflows_to_recount
from console.engine.write import Changes, write
from console.models import Cluster
from jobs import operations
from jobs.messages import Message, encode
from jobs.models import Job, Signal, Workflow
from jobs.records import recount_workflow
from jobs.spec import parse_workflow_spec
from jobs.workload.intake import BATCH, signal_token
from jobs.workload.report import record
from simcluster.server import SimCluster
from tests.engine.conftest import phase_of, task


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=3, gpus_per_node=8, seed=0, speed=0) as cluster:
        yield cluster


def until(cluster: Cluster, sim: SimCluster, condition: Callable[[], Any]) -> None:
    """Ten simulated seconds at a time, each followed by a sync cycle (a watch's second of
    wall time), until `condition()`, and not one cycle more."""
    for _ in range(20):
        sim.advance(10)
        sync_cluster(cluster.pk)
        if condition():
            return
    raise AssertionError("condition not met within 200 simulated seconds")


def settle(cluster: Cluster, sim: SimCluster, condition: Callable[[], Any]) -> None:
    """`until(condition)`, then cycles until one sees no change: with the clock frozen, the
    cluster is quiet."""
    until(cluster, sim, condition)
    for _ in range(10):
        if sync_cluster(cluster.pk).changes == 0:
            return
    raise AssertionError("the cluster never went quiet")


def pipeline(alice: User, cluster: Cluster, train: dict[str, Any] | None = None) -> Workflow:
    """prepare -> train, advancing on workload success."""
    head = task("head")
    spec = {
        "name": "pipeline",
        "policies": {"advance_on_workload_success": True},
        "jobs": [
            {"name": "prepare", "cluster": cluster.name, "tasks": [head]},
            {
                "name": "train", "cluster": cluster.name, "tasks": [train or head],
                "depends_on": ["prepare"],
            },
        ],
    }  # fmt: skip
    return operations.create_workflow(alice, parse_workflow_spec(spec, alice))


def child(workflow: Workflow, name: str) -> Job:
    return Job.objects.get(workflow=workflow, name=name)


def complete(job: Job, outcome: str = "succeeded") -> None:
    """What the job's head pod posts when its training ends, with the Job's signal token."""
    job.refresh_from_db()
    message = {"kind": "completion", "pod": f"{job.name}-head-0", "uid": "u", "seq": 1}
    token = signal_token(job.pk, job.run)
    answer = Client().post(
        f"/api/v1/jobs/{job.pk}/signals", json.dumps(message | {"outcome": outcome}),
        "application/json", headers={"Authorization": f"Bearer {token}"},
    )  # fmt: skip
    assert (answer.status_code, answer.json()) == (202, {"accepted": 1, "duplicates": 0})


def progress(succeeded: int, total: int) -> str:
    return encode(Message("workflow.progress", {"succeeded": succeeded, "total": total}))


def test_it_finishes_a_workflow_one_quiet_cycle_after_its_last_childs_workload_succeeded(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    workflow = pipeline(alice, cluster)
    prepare, train = child(workflow, "prepare"), child(workflow, "train")
    settle(cluster, sim, lambda: phase_of(prepare) == "Running")
    complete(prepare)  # prepare's success starts train
    settle(cluster, sim, lambda: phase_of(train) == "Running")
    workflow.refresh_from_db()
    assert (workflow.phase, workflow.message) == ("Running", progress(1, 2))

    complete(train)
    cycle = sync_cluster(cluster.pk)

    assert (cycle.changes, cycle.api_writes) == (0, 0)  # no Kubernetes change
    workflow.refresh_from_db()
    assert (workflow.phase, workflow.message) == ("Succeeded", progress(2, 2))
    assert workflow.finished_at is not None and workflow.recount_requested_at is None
    assert phase_of(train) == "Running"  # its own phase stays as Kubernetes says
    assert sync_cluster(cluster.pk).rows_written == 0  # the mark is gone: quiet again


def test_it_finishes_a_workflow_one_cycle_after_a_completion_read_from_a_termination_message(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    """The cycle that sees train's container exit reads its completion after committing (the
    Workflow was derived before it, so it still reads Running, marked for a recount); the next
    cycle, with no change, counts it."""
    done = json.dumps({"trainyard": "completion", "outcome": "succeeded"})
    workflow = pipeline(alice, cluster, task("head", command=["sim", "run", "30", done]))
    prepare, train = child(workflow, "prepare"), child(workflow, "train")
    settle(cluster, sim, lambda: phase_of(prepare) == "Running")
    complete(prepare)
    until(cluster, sim, lambda: phase_of(train) == "Running")  # no Pending child left to load
    until(cluster, sim, lambda: Signal.objects.filter(job=train).exists())
    assert Signal.objects.get(job=train).source == "termination-log"
    workflow.refresh_from_db()
    assert (workflow.phase, workflow.message) == ("Running", progress(1, 2))
    assert workflow.recount_requested_at is not None

    cycle = sync_cluster(cluster.pk)

    assert cycle.changes == 0
    workflow.refresh_from_db()
    assert (workflow.phase, workflow.message) == ("Succeeded", progress(2, 2))
    assert workflow.recount_requested_at is None


def test_it_stops_counting_a_deleted_child_one_quiet_cycle_after_its_row_went(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    """train waits for prepare and has no object in the cluster: the reconcile its deletion
    asks for (console.tasks.reconcile_job) removes its row at once, and no watch sees it."""
    workflow = pipeline(alice, cluster)
    prepare, train = child(workflow, "prepare"), child(workflow, "train")
    settle(cluster, sim, lambda: phase_of(prepare) == "Running")
    workflow.refresh_from_db()
    assert workflow.message == progress(0, 2)

    operations.delete_job(alice, train, "train")
    reconcile_job(train.pk)
    assert not Job.objects.filter(pk=train.pk).exists()
    cycle = sync_cluster(cluster.pk)

    assert cycle.changes == 0
    workflow.refresh_from_db()
    assert (workflow.phase, workflow.message) == ("Running", progress(0, 1))


def test_it_marks_the_workflow_at_every_change_of_what_it_counts_and_at_no_other(
    alice: User, cluster: Cluster
) -> None:
    workflow = pipeline(alice, cluster)
    prepare, train = child(workflow, "prepare"), child(workflow, "train")

    def marked() -> bool:
        row = Workflow.objects.filter(pk=workflow.pk)
        mark = row.values_list("recount_requested_at", flat=True).get()
        row.update(recount_requested_at=None)
        return mark is not None

    assert not marked()  # Pending children: every cycle loads them (rows.needing_attention)
    operations.stop_job(alice, train)
    assert marked()
    operations.resume_job(alice, train)
    assert marked()
    heard = {"kind": "progress", "pod": "prepare-head-0", "uid": "u", "seq": 0, "step": 3}
    record(prepare.pk, prepare.run, BATCH.validate_python([heard]))
    assert not marked()  # the workload's word that changes no count marks nothing
    complete(prepare)
    assert marked()
    operations.delete_job(alice, prepare, "prepare")
    assert marked()


def test_it_keeps_a_mark_set_again_while_a_cycle_derived_the_workflow(
    alice: User, cluster: Cluster
) -> None:
    """The cycle clears the mark it read, not a later one: what set it again was committed
    after the cycle read the children, so the next cycle derives the Workflow once more."""
    workflow = pipeline(alice, cluster)
    prepare = child(workflow, "prepare")
    complete(prepare)
    seen = workflows_to_recount()
    assert list(seen) == [workflow.pk]
    recount_workflow(prepare.pk, timezone.now())  # e.g. a stop while the cycle ran
    state = State(cluster, jobs=[], workers={}, instances={}, nodes={}, addons={}, operations={})

    write(Changes(recounted=seen), state)

    again = workflows_to_recount()
    assert list(again) == [workflow.pk] and again[workflow.pk] > seen[workflow.pk]
    write(Changes(recounted=again), state)
    assert workflows_to_recount() == {}
