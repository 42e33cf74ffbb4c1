"""Occurrences written in the transaction of the state change that causes them, and their
messages by the notify worker that its commit starts (notify.record.fan_out), once per
(subscription, Job, run, event, occurrence), issue 32 §Build 1 and 3."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from console.models import Addon, Cluster
from jobs.choices import JobPhase
from jobs.models import Job
from jobs.workload.intake import BATCH
from jobs.workload.report import record
from notify.choices import Event, ScopeKind
from notify.fanout import fan_out
from notify.models import Condition, Outbox, Watch
from notify.record import AT_ONCE
from notify.watch import after_cycle, remember
from tests.notify.conftest import channel, job_of, subscribe

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def cycle(
    cluster: Cluster,
    at: datetime,
    touched: set[int] | None = None,
    addons: dict[str, str] | None = None,
) -> int:
    """A cycle's notification step, then the notify worker's drain that its commit starts."""
    cluster.refresh_from_db()
    written = after_cycle(cluster, touched or set(), addons or {}, at)
    fan_out(at)
    return written


def say(job: Job, moment: datetime, seq: int, **message: Any) -> None:
    cache.clear()
    body = {"pod": "ppo-head-0", "uid": "u", "seq": seq, "at": moment.isoformat(), **message}
    with time_machine.travel(moment, tick=False):
        items = BATCH.validate_python([body])
        record(job.pk, job.run, items)


def sent(*fields: str) -> list[tuple[Any, ...]]:
    return list(Outbox.objects.order_by("pk").values_list(*fields))


def test_it_writes_one_message_when_a_job_fails_however_often_the_cycle_runs(
    alice: User, cluster: Cluster
) -> None:
    subscribe(alice, channel(alice), Event.JOB_FAILED)
    job = job_of(alice, cluster, phase=JobPhase.FAILED)
    assert cycle(cluster, T0, {job.pk}) > 0
    cycle(cluster, T0 + timedelta(seconds=10), {job.pk})
    cycle(cluster, T0 + timedelta(seconds=20))  # a restarted sync: not live, not touched
    assert sent("event", "part", "run", "job_id") == [("job.failed", "opened", 1, job.pk)]
    facts = Outbox.objects.get().facts
    assert facts["job"]["name"] == "ppo" and facts["job"]["project"] == "vision"
    assert facts["job"]["url"].endswith(f"/jobs/{job.pk}/")
    Job.objects.filter(pk=job.pk).update(run=2)  # resumed, failed again: a new run
    cycle(cluster, T0 + timedelta(minutes=5), {job.pk})
    assert sent("run") == [(1,), (2,)]


def test_it_says_a_stall_then_repeats_it_then_says_it_resolved(
    alice: User, cluster: Cluster
) -> None:
    subscribe(alice, channel(alice), Event.WORKLOAD_STALLED, repeat_hours=4)
    job = job_of(alice, cluster, spec={"tasks": [], "policies": {"stall_after_seconds": 60}})
    say(job, T0, 1, kind="progress", step=18200, max_steps=50000)
    assert cycle(cluster, T0 + timedelta(seconds=30)) == 0
    for minute in (2, 3, 60):  # heartbeats keep coming, the step does not move
        at = T0 + timedelta(minutes=minute)
        say(job, at, 10 + minute, kind="heartbeat")
        cycle(cluster, at)
    assert sent("event", "part", "repeat") == [("workload.stalled", "opened", 0)]
    workload = Outbox.objects.get().facts["workload"]
    assert (workload["state"], workload["step"], workload["max_steps"]) == (
        "Stalled", 18200, 50000,
    )  # fmt: skip
    later = T0 + timedelta(hours=4, minutes=2)
    say(job, later, 90, kind="heartbeat")
    cycle(cluster, later)
    cycle(cluster, later + timedelta(seconds=10))
    assert sent("part", "repeat")[-1] == ("repeat", 1)
    moved = later + timedelta(seconds=20)
    say(job, moved, 91, kind="progress", step=18300, max_steps=50000)
    cycle(cluster, moved)
    cycle(cluster, moved + timedelta(seconds=10))
    assert sent("part", "repeat") == [("opened", 0), ("repeat", 1), ("resolved", 0)]
    assert Outbox.objects.last().facts["resolved"] is True  # type: ignore[union-attr]
    assert Condition.objects.get().resolved_at == moved


def test_it_says_pending_too_long_after_each_subscriptions_threshold(
    alice: User, bob: User, cluster: Cluster
) -> None:
    job = job_of(alice, cluster, phase=JobPhase.PENDING)
    subscribe(alice, channel(alice), Event.JOB_PENDING_TOO_LONG, pending_minutes=10)
    subscribe(bob, channel(bob), Event.JOB_PENDING_TOO_LONG, scope=ScopeKind.JOB, job=job)
    cycle(cluster, T0)
    cycle(cluster, T0 + timedelta(minutes=11))
    assert sent("subscription__user__username") == [("alice",)]
    cycle(cluster, T0 + timedelta(minutes=31))
    assert sent("subscription__user__username") == [("alice",), ("bob",)]
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.RUNNING)
    cycle(cluster, T0 + timedelta(minutes=32), {job.pk})
    assert sent("part")[-2:] == [("resolved",), ("resolved",)]


def test_it_tells_only_readers_of_the_job_and_only_the_events_they_chose(
    alice: User, bob: User, charlie: User, cluster: Cluster
) -> None:
    job = job_of(alice, cluster, phase=JobPhase.FAILED)
    subscribe(bob, channel(bob), Event.JOB_FAILED, scope=ScopeKind.PROJECT, project=job.project)
    subscribe(charlie, channel(charlie), scope=ScopeKind.JOB, job=job)  # not a member
    subscribe(alice, channel(alice), Event.WORKLOAD_STALLED)
    cycle(cluster, T0, {job.pk})
    assert sent("subscription__user__username", "event") == [("bob", "job.failed")]


def test_it_says_a_completion_in_the_signal_request_that_brings_it(
    alice: User, cluster: Cluster
) -> None:
    subscribe(alice, channel(alice), Event.WORKLOAD_SUCCEEDED)
    job = job_of(alice, cluster)
    say(job, T0, 1, kind="completion", outcome="succeeded")
    say(job, T0, 2, kind="completion", outcome="succeeded")
    cycle(cluster, T0 + timedelta(seconds=5))  # the cycle sees it too: nothing more
    assert sent("event") == [("workload.succeeded",)]


def test_it_says_a_policys_stop_once(alice: User, cluster: Cluster) -> None:
    subscribe(alice, channel(alice), Event.JOB_STOPPED_BY_CONSOLE)
    spec = {"tasks": [], "policies": {"stop_on_completion": True}}
    job = job_of(alice, cluster, spec=spec)
    say(job, T0, 1, kind="completion", outcome="succeeded")
    say(job, T0, 2, kind="completion", outcome="succeeded")
    assert Condition.objects.filter(event="job.stopped_by_console").count() == 1
    fan_out(T0)
    assert sent("event") == [("job.stopped_by_console",)]


def test_it_says_a_cluster_unreachable_and_recovered(alice: User, cluster: Cluster) -> None:
    from notify.record import cluster_reachability

    subscribe(alice, channel(alice), Event.CLUSTER_UNREACHABLE)
    job_of(alice, cluster)
    Cluster.objects.filter(pk=cluster.pk).update(reachable=True)
    cluster_reachability(cluster, False, "connection refused", T0)
    cluster_reachability(cluster, False, "connection refused", T0 + timedelta(seconds=10))
    Cluster.objects.filter(pk=cluster.pk).update(reachable=False)
    cycle(cluster, T0 + timedelta(seconds=20))
    assert sent("event", "part") == [
        ("cluster.unreachable", "opened"),
        ("cluster.unreachable", "resolved"),
    ]
    assert Outbox.objects.last().facts["event"] == "cluster.recovered"  # type: ignore[union-attr]


def test_it_says_an_addon_failed_and_back(alice: User, cluster: Cluster) -> None:
    subscribe(alice, channel(alice), Event.ADDON_FAILED, scope=ScopeKind.PROJECT,
              project=alice.memberships.get().project)  # fmt: skip
    cycle(cluster, T0, addons={"gpu-operator": Addon.Phase.FAILED})
    cycle(cluster, T0 + timedelta(seconds=10), addons={"gpu-operator": Addon.Phase.FAILED})
    cycle(cluster, T0 + timedelta(seconds=20), addons={"gpu-operator": Addon.Phase.READY})
    assert sent("event", "part") == [("addon.failed", "opened"), ("addon.failed", "resolved")]
    assert Outbox.objects.first().facts["detail"] == "gpu-operator"  # type: ignore[union-attr]


def test_a_quiet_cycle_reads_once_and_writes_nothing(
    alice: User, cluster: Cluster, django_assert_num_queries: Any
) -> None:
    """Whoever follows what: the watches and the occurrences due, in one query."""
    subscribe(alice, channel(alice))
    job_of(alice, cluster)
    Cluster.objects.filter(pk=cluster.pk).update(reachable=True)
    cluster.refresh_from_db()
    with django_assert_num_queries(1):
        assert after_cycle(cluster, set(), {}, T0) == 0


def _failed_on_simcluster(alice: User, sim: Any, tmp_path: Any, name: str) -> tuple[Job, list[Any]]:
    """A followed Job that fails with an NCCL timeout on simcluster, synced until the cycle
    wrote Failed; with every Due the cycles noted (the keep_logs tasks the sync task queues)."""
    from console.engine.cycle import sync_cluster
    from tests.conftest import register_sim
    from tests.engine.conftest import TIMEOUT, phase_of, submit, task

    cluster = register_sim(sim, tmp_path)
    subscribe(alice, channel(alice), Event.JOB_FAILED)
    command = ["sim", "fail", "nccl-timeout", "5"]
    job = submit(alice, cluster, name, task("eval", kind="Job", command=command))
    dues: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    while phase_of(job) != "Failed":
        assert time.monotonic() < deadline, "the Job never failed"
        dues += sync_cluster(cluster.pk).logs_due
    assert Condition.objects.filter(event="job.failed", job=job).exists()
    return job, dues


def test_it_holds_a_failed_jobs_message_until_its_failure_is_judged(
    alice: User, sim: Any, tmp_path: Any
) -> None:
    """Issue 34 §Build 5, end to end on simcluster with no Finding made in advance: the cycle
    that writes Failed opens the occurrence, held; the keep_logs task reads the logs and judges
    the run; then the drain writes the message, and it names the failure."""
    from console.engine.keep_logs import keep
    from failures.models import KeptLog

    job, dues = _failed_on_simcluster(alice, sim, tmp_path, "bad")
    fan_out(timezone.now())
    assert sent("event") == []  # the judgement is not done: nothing said yet
    (failed,) = [due for due in dues if due.why == KeptLog.Why.FAILED]
    keep(failed.job_id, failed.why, failed.pods)
    fan_out(timezone.now())
    assert sent("event", "job_id") == [("job.failed", job.pk)]
    failure = Outbox.objects.get().facts["failure"]
    assert failure["class"] == "network/collective" and failure["en"]["label"] == "NCCL timeout"
    fan_out(timezone.now() + timedelta(minutes=5))
    assert Outbox.objects.count() == 1


def test_it_sends_a_failed_jobs_message_without_the_failure_once_the_wait_is_over(
    alice: User, sim: Any, tmp_path: Any, settings: Any
) -> None:
    """No judgement came (the keep_logs task was lost): the message goes once
    TRAINYARD_NOTIFY_FAILURE_WAIT_SECONDS passed, saying no failure."""
    settings.TRAINYARD_NOTIFY_FAILURE_WAIT_SECONDS = 60
    job, _dues = _failed_on_simcluster(alice, sim, tmp_path, "lost")
    opened = Condition.objects.get(event="job.failed", job=job).opened_at
    fan_out(opened + timedelta(seconds=59))
    assert sent("event") == []
    fan_out(opened + timedelta(seconds=60))
    assert sent("event", "job_id") == [("job.failed", job.pk)]
    assert Outbox.objects.get().facts["failure"] is None


def test_it_judges_a_workload_again_only_once_it_may_have_turned(
    alice: User, cluster: Cluster, django_capture_on_commit_callbacks: Any,
    django_assert_num_queries: Any,
) -> None:  # fmt: skip
    """A followed Job whose facts did not change is not judged again before its stall clock
    ends (jobs.status.workload.next_turn_at); it is judged in the first cycle after."""
    subscribe(alice, channel(alice), Event.WORKLOAD_STALLED)
    job = job_of(
        alice,
        cluster,
        spec={"tasks": [], "policies": {"stall_after_seconds": 60, "heartbeat_seconds": 3600}},
    )
    say(job, T0, 1, kind="progress", step=7)
    Cluster.objects.filter(pk=cluster.pk).update(reachable=True)
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster, T0 + timedelta(seconds=5))  # judged: Progressing, turns at 60 s
    cluster.refresh_from_db()
    with django_assert_num_queries(1):  # the watches and occurrences due: none
        after_cycle(cluster, set(), {}, T0 + timedelta(seconds=30))
    assert Outbox.objects.count() == 0
    with django_capture_on_commit_callbacks(execute=True):
        cycle(cluster, T0 + timedelta(seconds=61))
    assert sent("event") == [("workload.stalled",)]


@pytest.mark.django_db(transaction=True)
def test_two_workers_judging_at_once_write_one_message(alice: User, cluster: Cluster) -> None:
    """Two cycles' notification steps at the same moment (a relist racing a watch, a worker
    restarted mid-cycle): the unique constraints leave one occurrence and one message."""
    subscribe(alice, channel(alice), Event.JOB_FAILED)
    job = job_of(alice, cluster, phase=JobPhase.FAILED)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def step() -> None:
        try:
            start.wait()
            with transaction.atomic():
                after_cycle(Cluster.objects.get(pk=cluster.pk), {job.pk}, {}, T0)
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=step) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert Condition.objects.count() == 1
    fan_out(T0)
    assert sent("event") == [("job.failed",)]


def test_it_tells_a_new_subscriber_of_a_job_already_stalled(alice: User, cluster: Cluster) -> None:
    """Nobody followed it when it stalled (its watch dropped); a subscription covering it has
    it judged in the next cycle, not at its next turn (notify.watch.follow)."""
    spec = {"tasks": [], "policies": {"stall_after_seconds": 60, "heartbeat_seconds": 3600}}
    job = job_of(alice, cluster, spec=spec)
    say(job, T0, 1, kind="progress", step=7)
    cycle(cluster, T0 + timedelta(seconds=5))
    assert not Watch.objects.exists()  # due, but followed by nobody
    cycle(cluster, T0 + timedelta(minutes=5))
    subscribe(alice, channel(alice), Event.WORKLOAD_STALLED)
    cycle(cluster, T0 + timedelta(minutes=6))
    assert sent("event", "part") == [("workload.stalled", "opened")]


def test_a_message_folded_while_a_cycle_judged_keeps_its_watch_due(
    alice: User, cluster: Cluster
) -> None:
    """A cycle read the watch (marked once), a message that may turn the state was folded
    meanwhile (marked again): the moment the cycle remembers does not hide that mark."""
    subscribe(alice, channel(alice), Event.WORKLOAD_STALLED)
    job = job_of(alice, cluster)
    say(job, T0, 1, kind="progress", step=7)
    assert Watch.objects.get().marks == 1
    say(job, T0 + timedelta(seconds=1), 2, kind="phase", phase="checkpointing")
    remember(cluster.pk, [(job.pk, T0 + timedelta(minutes=5), 1)])
    assert Watch.objects.get().due_at == AT_ONCE
    remember(cluster.pk, [(job.pk, T0 + timedelta(minutes=5), 2)])
    assert Watch.objects.get().due_at == T0 + timedelta(minutes=5)


def test_it_says_a_stall_that_ended_before_its_messages_were_written(
    alice: User, cluster: Cluster
) -> None:
    """The notify worker was down while a run stalled and moved again: its next drain writes
    both messages, the beginning and the end (notify.events.due)."""
    subscribe(alice, channel(alice), Event.WORKLOAD_STALLED)
    spec = {"tasks": [], "policies": {"stall_after_seconds": 60, "heartbeat_seconds": 3600}}
    job = job_of(alice, cluster, spec=spec)
    say(job, T0, 1, kind="progress", step=7)
    stalled = T0 + timedelta(minutes=2)
    after_cycle(cluster, set(), {}, stalled)
    moved = stalled + timedelta(seconds=30)
    say(job, moved, 2, kind="progress", step=8)
    cluster.refresh_from_db()
    after_cycle(cluster, set(), {}, moved)
    assert Outbox.objects.count() == 0
    fan_out(moved + timedelta(seconds=1))
    assert sent("event", "part") == [
        ("workload.stalled", "opened"), ("workload.stalled", "resolved"),
    ]  # fmt: skip


def test_a_restart_that_keeps_the_phase_does_not_judge_the_job_again(
    alice: User, cluster: Cluster, django_assert_num_queries: Any
) -> None:
    """A Job's events follow from its phase, run, stop and report: a cycle that only touched
    its pods (a container restart) does not judge it, unless it was never judged (a new Job's
    pending clock starts in the first cycle that touches it)."""
    subscribe(alice, channel(alice), Event.JOB_PENDING_TOO_LONG, pending_minutes=10)
    job = job_of(alice, cluster, phase=JobPhase.PENDING)
    Cluster.objects.filter(pk=cluster.pk).update(reachable=True)
    Watch.objects.all().delete()  # as before any cycle judged it
    cluster.refresh_from_db()
    after_cycle(cluster, set(), {}, T0, touched={job.pk})
    assert list(Condition.objects.values_list("event", flat=True)) == ["job.pending_too_long"]
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.FAILED)  # not written by this cycle
    with django_assert_num_queries(2):  # the watches due; the touched Jobs never judged: none
        after_cycle(cluster, set(), {}, T0 + timedelta(seconds=10), touched={job.pk})
    assert Condition.objects.count() == 1
    after_cycle(cluster, {job.pk}, {}, T0 + timedelta(seconds=20))  # its phase written
    assert Condition.objects.filter(event="job.failed").exists()


def test_a_new_subscriber_hears_what_a_followed_job_is_in_already(
    alice: User, bob: User, cluster: Cluster
) -> None:
    """Alice's subscription opened the stall; Bob subscribes later and hears it at the next
    drain, not only at its end."""
    subscribe(alice, channel(alice), Event.WORKLOAD_STALLED)
    spec = {"tasks": [], "policies": {"stall_after_seconds": 60, "heartbeat_seconds": 3600}}
    job = job_of(alice, cluster, spec=spec)
    say(job, T0, 1, kind="progress", step=7)
    cycle(cluster, T0 + timedelta(minutes=2))
    assert sent("subscription__user__username") == [("alice",)]
    subscribe(bob, channel(bob), Event.WORKLOAD_STALLED, scope=ScopeKind.JOB, job=job)
    fan_out(T0 + timedelta(minutes=3))
    assert sent("subscription__user__username", "part") == [
        ("alice", "opened"), ("bob", "opened"),
    ]  # fmt: skip
