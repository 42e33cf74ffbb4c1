"""Notifications (issue 32, "Show"): what they add to a sync cycle, and how fast one worker
delivers a backlog.

The cycle: a simulated cluster (its own process, frozen clock) running 1,000 Jobs of one pod
each, beside 9,000 finished Jobs (10,000 in all), and 1,000 subscriptions (990 to one Job each,
10 to their owner's Jobs: every live Job is followed). In each measured cycle
100 pods of 100 Jobs restart, and 100 other followed Jobs' workloads are Stalled (their step
stopped advancing an hour ago): 100 workload transitions, each opening an occurrence and
writing its messages. The same cycle is measured with the notification step left out
(`console.engine.cycle.notify_after_cycle` returning 0); the difference is what notifications
add. Best of 5 by CPU time of this process (the console's alone), Django's DEBUG off.

The backlog: 1,000 messages queued for one webhook channel, delivered to a local receiver
(loopback, `disable_nagle_algorithm`) by one `notify.deliver.drain`, signed, each with its
Delivery row.

Targets: at most 10% added to the cycle's CPU; the 1,000 messages delivered in under 10 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any
from unittest import mock

from django.conf import settings
from django.contrib.auth.models import User
from django.test.utils import override_settings
from django.utils import timezone

from bench.sync_cycle import REPEATS, Cost, Sim
from console.engine.cycle import sync_cluster
from console.engine.gateways import gateway_for
from console.kube import MANAGED_SELECTOR
from console.kube.gateway import STATEFULSETS, Gateway
from console.models import Cluster, Membership, Project
from jobs.choices import JobPhase
from jobs.models import Job, Task, WorkloadReport
from notify.choices import Event, Kind, ScopeKind, SendStatus
from notify.deliver import drain
from notify.models import Channel, Outbox, Subscription
from notify.record import mark_due
from tests.notify.receivers import receiving

LIVE, FINISHED = 1_000, 9_000
SUBSCRIPTIONS = 1_000
TRANSITIONS = 100
CHANGED = 100
MESSAGES = 1_000
CPU_TARGET = 0.10
DELIVERY_TARGET = 10.0
POLICIES = {"stall_after_seconds": 60, "heartbeat_seconds": 86_400}
TEMPLATE = {
    "role": "worker", "kind": "StatefulSet", "replicas": 1,
    "image": "ghcr.io/trainyard/rlinf-trainer:0.4.2", "command": [], "args": [], "env": {},
    "resources": {"cpu": "100m", "memory": "128Mi", "gpu": 0}, "node_selector": {},
}  # fmt: skip


@dataclass(frozen=True)
class Figures:
    without: Cost
    with_notify: Cost
    quiet_step: Cost
    messages_written: int
    delivered: int
    delivery_seconds: float
    receiver_got: int


def _world(cluster: Cluster) -> list[Job]:
    """The Jobs (1,000 live with a Task each, 9,000 finished), their owners and the 1,000
    subscriptions, all with one channel each."""
    project, _ = Project.objects.get_or_create(name="bench")
    users = User.objects.bulk_create(User(username=f"user-{i:03d}") for i in range(100))
    Membership.objects.bulk_create(Membership(project=project, user=user) for user in users)
    spec = {"tasks": [TEMPLATE], "policies": POLICIES}
    live = Job.objects.bulk_create(
        Job(project=project, name=f"live-{i:05d}", cluster=cluster, namespace="bench",
            owner=users[i % 100], spec=spec)
        for i in range(LIVE)
    )  # fmt: skip
    Task.objects.bulk_create(
        Task(job=job, role="worker", kind="StatefulSet", template=TEMPLATE, desired_replicas=1)
        for job in live
    )
    Job.objects.bulk_create(
        Job(project=project, name=f"done-{i:05d}", cluster=cluster, namespace="bench",
            owner=users[i % 100], spec=spec, phase=JobPhase.SUCCEEDED)
        for i in range(FINISHED)
    )  # fmt: skip
    channels = Channel.objects.bulk_create(
        Channel(owner=user, name="hook", kind=Kind.WEBHOOK, target="https://93.184.216.34/h")
        for user in users
    )
    events = [str(event) for event in Event]
    subscriptions = [
        Subscription(user=users[i % 100], channel=channels[i % 100], scope=ScopeKind.JOB,
                     job=live[i], events=events)
        for i in range(990)
    ]  # fmt: skip
    subscriptions += [
        Subscription(user=users[i], channel=channels[i], scope=ScopeKind.MINE, events=events)
        for i in range(90, 100)
    ]  # fmt: skip
    Subscription.objects.bulk_create(subscriptions)
    assert Subscription.objects.count() == SUBSCRIPTIONS
    return live


def _stall(jobs: list[Job]) -> None:
    """Their workloads report a step that last advanced an hour ago, and speak still."""
    now = timezone.now()
    advanced = (now - timedelta(hours=1)).isoformat()
    entry = {"step": 1200, "max_steps": 5000, "at": advanced, "received_at": advanced,
             "advanced_at": advanced, "source": "signal", "pod": "p"}  # fmt: skip
    WorkloadReport.objects.bulk_create(
        WorkloadReport(job=job, run=1, first_received_at=now, last_received_at=now,
                       latest={"progress": entry}, steps=[[0, 1200]], compacted_at=now)
        for job in jobs
    )  # fmt: skip
    mark_due([job.pk for job in jobs])  # as the fold of a run's first message does


def _ready(gateway: Gateway) -> bool:
    items = gateway.list(STATEFULSETS, MANAGED_SELECTOR)
    return sum(1 for item in items if item.get("status", {}).get("readyReplicas") == 1) == LIVE


def _bring_up(sim: Sim, gateway: Gateway) -> None:
    for _ in range(200):
        sim.control(gateway, "advance", {"seconds": 5})
        if _ready(gateway):
            return
    raise RuntimeError("simcluster did not bring the pods up")


def _cycle(sim: Sim, gateway: Gateway, cluster: Cluster, killed: int, stalled: list[Job]) -> Cost:
    """100 pods of 100 Jobs restart and (with notifications) 100 other Jobs' workloads stall,
    then one measured cycle."""
    _stall(stalled)
    for index in range(killed, killed + CHANGED):
        sim.control(gateway, f"namespaces/bench/pods/live-{index:05d}-worker-0/kill", {})
    sim.control(gateway, "advance", {"seconds": 15})
    wall, cpu = time.perf_counter(), time.process_time()
    result = sync_cluster(cluster.pk)
    return Cost(time.process_time() - cpu, time.perf_counter() - wall, result)


def _best(costs: list[Cost]) -> Cost:
    return min(costs, key=lambda cost: cost.cpu)


def _quiet_step(cluster: Cluster) -> Cost:
    """The notification step alone in a cycle where nothing turns (no Job touched, no watch
    and no occurrence due)."""
    from notify.watch import after_cycle

    costs = []
    for _ in range(REPEATS):
        cluster.refresh_from_db()
        wall, cpu = time.perf_counter(), time.process_time()
        after_cycle(cluster, set(), {}, timezone.now())
        costs.append(Cost(time.process_time() - cpu, time.perf_counter() - wall))
    return min(costs, key=lambda cost: cost.cpu)


def _measure(sim: Sim) -> tuple[Cost, Cost, Cost, int]:
    cluster = Cluster.objects.create(
        name="bench-notify", kubeconfig=sim.kubeconfig.read_text(), namespace="bench"
    )
    live = _world(cluster)
    sync_cluster(cluster.pk)
    gateway = gateway_for(cluster)
    _bring_up(sim, gateway)
    sync_cluster(cluster.pk)
    with mock.patch("console.engine.cycle.notify_after_cycle", return_value=0):
        without = _best([_cycle(sim, gateway, cluster, CHANGED * n, []) for n in range(REPEATS)])
    sync_cluster(cluster.pk)  # the notification step's first judgement of every followed Job
    half = LIVE // 2
    with_notify = _best([
        _cycle(sim, gateway, cluster, half + CHANGED * n, live[CHANGED * n : CHANGED * (n + 1)])
        for n in range(REPEATS)
    ])  # fmt: skip
    written = Outbox.objects.count() // REPEATS
    quiet = _quiet_step(cluster)
    return without, with_notify, quiet, written


@contextmanager
def _backlog() -> Iterator[tuple[Any, Channel]]:
    with receiving("/bench") as receiver, override_settings(
        TRAINYARD_NOTIFY_ALLOWED_NETWORKS=["127.0.0.0/8"]
    ):  # fmt: skip
        receiver.default = (200, "ok", {})
        owner = User.objects.get(username="user-000")
        secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        channel = Channel.objects.create(
            owner=owner, name="bench receiver", kind=Kind.WEBHOOK, target=receiver.url,
            secret=secret,
        )  # fmt: skip
        yield receiver, channel


def _deliver() -> tuple[int, float, int]:
    Outbox.objects.all().delete()
    with _backlog() as (receiver, channel):
        now = timezone.now()
        job = {"id": 1, "name": "live-00001", "project": "bench", "cluster": "bench-notify"}
        facts = {"event": "workload.stalled", "job": job | {"url": "http://x/jobs/1/"}}
        Outbox.objects.bulk_create(
            Outbox(channel=channel, subject=f"job:{n}", event="workload.stalled", facts=facts,
                   created_at=now, next_attempt_at=now)
            for n in range(MESSAGES)
        )  # fmt: skip
        started = time.perf_counter()
        drain()
        seconds = time.perf_counter() - started
        sent = Outbox.objects.filter(status=SendStatus.SENT).count()
        return sent, seconds, len(receiver.received)


def run() -> str:
    with override_settings(DEBUG=False), TemporaryDirectory() as folder:
        sim = Sim(Path(folder), nodes=12)
        try:
            without, with_notify, quiet, written = _measure(sim)
        finally:
            sim.stop()
        delivered, seconds, got = _deliver()
    return report(Figures(without, with_notify, quiet, written, delivered, seconds, got))


def report(f: Figures) -> str:
    added = (f.with_notify.cpu - f.without.cpu) / f.without.cpu
    cpu_ok = added <= CPU_TARGET
    delivered = f.delivered == MESSAGES == f.receiver_got
    delivery_ok = delivered and f.delivery_seconds < DELIVERY_TARGET
    changed = f.with_notify.result
    return "\n".join(
        [
            "## Notifications (`bench/notify.py`)",
            "",
            f"{LIVE + FINISHED:,} Jobs ({LIVE:,} live, one pod each, on a simulated cluster in its "
            f"own process; {FINISHED:,} finished), {SUBSCRIPTIONS:,} subscriptions (every live Job "
            f"followed: 990 follow one Job each, 10 their owner's Jobs). Each measured cycle: "
            f"{CHANGED} pods of {CHANGED} Jobs restarted and {TRANSITIONS} other followed Jobs' "
            f"workloads Stalled ({TRANSITIONS} transitions). Best of {REPEATS} by CPU time of this "
            "process; the notification step measured with the watches the cycles before left "
            "(notify.models.Watch), as in a steady state.",
            "",
            "| cycle | CPU | wall |",
            "|---|---:|---:|",
            f"| without the notification step | {f.without.cpu * 1000:.1f} ms | "
            f"{f.without.wall:.2f} s |",
            f"| with it ({f.messages_written:,} messages written a cycle) | "
            f"{f.with_notify.cpu * 1000:.1f} ms | {f.with_notify.wall:.2f} s |",
            f"| the step alone when nothing turns | {f.quiet_step.cpu * 1000:.1f} ms | "
            f"{f.quiet_step.wall:.3f} s |",
            "",
            f"- {'PASS' if cpu_ok else 'FAIL'}: notifications add {added * 100:.1f}% to the "
            f"cycle's CPU (target at most {CPU_TARGET * 100:.0f}%)"
            + (f"; the cycle applied {changed.changes} changes" if changed else "")
            + ".",
            f"- Where it goes: a cycle reads the watches and occurrences due in one indexed "
            f"query (the step alone when nothing turns: {f.quiet_step.cpu * 1000:.2f} ms); it "
            f"judges only the Jobs the cycle touched ({CHANGED}) and those whose watch is due "
            f"({TRANSITIONS} whose reports arrived), and writes each transition's occurrence, "
            "subscribers, facts and messages. Meeting the target at this size needs the whole "
            f"step under {CPU_TARGET * f.without.cpu * 1000:.1f} ms.",
            f"- {'PASS' if delivery_ok else 'FAIL'}: {f.delivered:,} of {MESSAGES:,} queued "
            f"messages delivered (signed, each with its Delivery row) to a local receiver by one "
            f"worker in "
            f"{f.delivery_seconds:.2f} s (target under {DELIVERY_TARGET:.0f} s); the receiver got "
            f"{f.receiver_got:,}.",
            "",
            f"Database: {str(settings.DATABASES['default']['ENGINE']).rsplit('.', 1)[-1]}.",
            "",
        ]
    )
