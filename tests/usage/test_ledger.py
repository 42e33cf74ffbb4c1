"""The GPU-hours ledger on simcluster (issue 33, Build 1): each pod instance's GPUs from bound to
ended, each second classed, checked to the second against the timeline the test drove."""

from __future__ import annotations

from django.contrib.auth.models import User

from console.engine.cycle import sync_cluster
from console.models import Cluster, ObservedObject
from jobs import operations
from jobs.models import Job
from tests.engine.conftest import submit, task
from tests.usage.conftest import (
    Clock,
    bound_at,
    closed_totals,
    pod,
    rolled_up,
    running_at,
    say,
    seconds,
    sync,
    timeline,
)
from usage.models import GpuInterval

GPUS = {"cpu": "1", "memory": "1Gi", "gpu": 2}
POLICIES = {"heartbeat_seconds": 30, "stall_after_seconds": 60}


def started(alice: User, sim_cluster: Cluster, clock: Clock, name: str = "train") -> Job:
    """A Job of one 2-GPU worker, synced until its pod runs; the stall threshold is 60 s and
    the heartbeat 30 s (Unresponsive after 90 s of quiet)."""
    job = submit(alice, sim_cluster, name, task("worker", resources=GPUS))
    Job.objects.filter(pk=job.pk).update(spec={**job.spec, "policies": POLICIES})
    for _cycle in range(6):
        sync(sim_cluster)
        if timeline(job) and timeline(job)[-1][1] == "silent":
            return job
        clock.advance(2)
    raise AssertionError(timeline(job))


def test_it_counts_a_run_from_bound_to_ended_each_second_in_its_class(
    alice: User, sim_cluster: Cluster, clock: Clock
) -> None:
    job = started(alice, sim_cluster, clock)
    found = pod(clock.sim, "train-worker-0")
    bound, running = bound_at(found), running_at(found)
    assert bound < running
    clock.advance(20)
    say(job, {"kind": "progress", "step": 1})  # progressing from here (signal intake)
    t1 = seconds(clock.now())
    clock.advance(100)
    sync(sim_cluster)  # stalled at t1 + 60, unresponsive at t1 + 90: time alone, judged by the sync
    clock.advance(5)
    say(job, {"kind": "progress", "step": 2})
    t2 = seconds(clock.now())
    clock.advance(20)
    say(job, {"kind": "completion", "outcome": "succeeded"})
    t3 = seconds(clock.now())
    clock.advance(30)
    operations.stop_job(alice, job)
    t4 = seconds(clock.now())
    sync(sim_cluster)  # the stop applied: the workload scaled to 0, the pod deleted
    for _cycle in range(5):
        clock.advance(1)
        sync(sim_cluster)
    assert not GpuInterval.objects.filter(job=job, ended_at__isnull=True).exists()
    end = GpuInterval.objects.filter(job=job).latest("ended_at").ended_at
    assert end is not None
    pod_ = "train-worker-0"
    assert timeline(job) == [
        (pod_, "starting", bound, running),
        (pod_, "silent", running, t1),
        (pod_, "progressing", t1, t1 + 60),
        (pod_, "stalled", t1 + 60, t1 + 90),
        (pod_, "unresponsive", t1 + 90, t2),
        (pod_, "progressing", t2, t3),
        (pod_, "finished", t3, t4),
        (pod_, "stopping", t4, seconds(end)),
    ]
    assert rolled_up(job) == closed_totals(job)
    assert rolled_up(job)["stalled"] == 2 * 30


def test_it_changes_no_total_on_a_relist_or_a_console_restart_mid_run(
    alice: User, sim_cluster: Cluster, clock: Clock
) -> None:
    """A relist compares everything again; a restarted console (its observations forgotten, as
    after an upgrade) derives everything again: neither opens, closes or counts a second twice."""
    job = started(alice, sim_cluster, clock)
    clock.advance(10)
    say(job, {"kind": "progress", "step": 1})
    clock.advance(70)  # stalled since 60 s after the step
    sync(sim_cluster)
    before = timeline(job)
    Cluster.objects.filter(pk=sim_cluster.pk).update(relisted_at=None)  # the periodic relist
    clock.advance(1)
    assert sync(sim_cluster).relisted
    ObservedObject.objects.filter(cluster=sim_cluster).delete()  # a restart that forgot everything
    Cluster.objects.filter(pk=sim_cluster.pk).update(watch_cursors={}, relisted_at=None)
    clock.advance(1)
    assert sync(sim_cluster).relisted
    assert timeline(job) == before
    assert before[-1][1:] == ("stalled", before[-2][2] + 60, None)


def test_it_counts_an_unreachable_clusters_gap_as_unknown(
    alice: User, sim_cluster: Cluster, clock: Clock
) -> None:
    """ARCHITECTURE §Principles: the unreachable time is its own class, not guessed."""
    job = started(alice, sim_cluster, clock)
    clock.advance(5)
    say(job, {"kind": "progress", "step": 1})
    clock.advance(5)
    sync(sim_cluster)
    last_sync = seconds(clock.now())
    clock.sim.set_fault(status=503, seconds=3600)
    clock.advance(30)
    assert not sync_cluster(sim_cluster.pk).reachable
    clock.advance(30)
    assert not sync_cluster(sim_cluster.pk).reachable  # a second failure changes nothing more
    clock.sim.clear_faults()
    clock.advance(10)
    say(job, {"kind": "progress", "step": 2})  # the workload spoke while its sim_cluster was away
    back = seconds(clock.now())
    sync(sim_cluster)
    classes = [(klass, start, end) for _pod, klass, start, end in timeline(job)]
    assert classes[-3:] == [
        ("progressing", classes[-3][1], last_sync),
        ("unknown", last_sync, back),
        ("progressing", back, None),
    ]


def test_it_counts_a_crash_loop_as_starting(
    alice: User, sim_cluster: Cluster, clock: Clock
) -> None:
    """A container that crashes and waits to restart holds its GPUs doing nothing: starting."""
    crashing = task("worker", resources=GPUS, command=["sim"], args=["crash", "20"])
    job = submit(alice, sim_cluster, "crashy", crashing)
    for _cycle in range(30):
        sync(sim_cluster)
        if [row[1] for row in timeline(job)].count("starting") >= 2:
            break
        clock.advance(3)
    classes = [klass for _pod, klass, _start, _end in timeline(job)]
    assert classes[:3] == ["starting", "silent", "starting"]
