"""Notifications (issue 32, "Show"): what they add to a sync cycle, what the notify worker then
does, and how fast one worker delivers a backlog.

The cycle: a simulated cluster (its own process, frozen clock) running 1,000 Jobs of one pod
each, beside 9,000 finished Jobs (10,000 in all), and 1,000 subscriptions (990 to one Job each,
10 to their owner's Jobs: every live Job is followed). Cycles with the notification step and
cycles without it alternate, each after 100 pods of 100 Jobs restarted and 100 other Jobs'
workloads Stalled (their step stopped advancing an hour ago): with the step, those 100 are
marked as signal intake marks them (notify.record.mark_due) and become 100 transitions, each
opening an occurrence; without it, nothing marks them (notifications are off). CPU time of this
process (the console's alone), Django's DEBUG off: the step's own part (`after_cycle`, timed
inside the cycle) against the cycles without it, and the two kinds of cycle against each other.
After each cycle with the step, the notify worker's first step (notify.fanout.fan_out) writes
the transitions' messages, as the commit's drain does; it is timed apart (it runs in the notify
worker, not in the cycle).

The backlog: 1,000 messages queued for one webhook channel, delivered to a local receiver
(loopback, `disable_nagle_algorithm`) by one `notify.deliver.drain`, signed, each with its
Delivery row.

Targets: at most 10% added to the cycle's CPU; the 1,000 messages delivered in under 10 s.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
from notify.fanout import fan_out
from notify.models import Channel, Condition, Outbox, Subscription
from notify.record import mark_due
from notify.watch import after_cycle
from tests.notify.receivers import receiving

LIVE, FINISHED = 1_000, 9_000
SUBSCRIPTIONS = 1_000
TRANSITIONS = 100
CHANGED = 100
PAIRS = 5
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
    with_step: list[Cost]
    without: list[Cost]
    steps: list[float]  # the notification step's CPU in each cycle with it
    occurrences: int  # opened a cycle (median)
    fan_outs: list[Cost]  # the notify worker writing one cycle's messages
    messages_written: int  # a cycle's (median)
    quiet_step: Cost
    delivered: int
    delivery_seconds: float
    receiver_got: int


class Meter:
    """`notify.watch.after_cycle`'s CPU time, as the cycle calls it."""

    def __init__(self) -> None:
        self.cpu = 0.0

    def __call__(self, *args: Any) -> int:
        began = time.process_time()
        rows = after_cycle(*args)
        self.cpu += time.process_time() - began
        return rows


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


def _stall(jobs: list[Job], marked: bool) -> None:
    """Their workloads report a step that last advanced an hour ago, and speak still; `marked`:
    as the fold of a run's first message marks them when notifications are on."""
    now = timezone.now()
    advanced = (now - timedelta(hours=1)).isoformat()
    entry = {"step": 1200, "max_steps": 5000, "at": advanced, "received_at": advanced,
             "advanced_at": advanced, "source": "signal", "pod": "p"}  # fmt: skip
    WorkloadReport.objects.bulk_create(
        WorkloadReport(job=job, run=1, first_received_at=now, last_received_at=now,
                       latest={"progress": entry}, steps=[[0, 1200]], compacted_at=now)
        for job in jobs
    )  # fmt: skip
    if marked:
        mark_due([job.pk for job in jobs])


def _ready(gateway: Gateway) -> bool:
    items = gateway.list(STATEFULSETS, MANAGED_SELECTOR)
    return sum(1 for item in items if item.get("status", {}).get("readyReplicas") == 1) == LIVE


def _bring_up(sim: Sim, gateway: Gateway) -> None:
    for _ in range(200):
        sim.control(gateway, "advance", {"seconds": 5})
        if _ready(gateway):
            return
    raise RuntimeError("simcluster did not bring the pods up")


def _cycle(sim: Sim, gateway: Gateway, cluster: Cluster, killed: list[Job]) -> Cost:
    """100 pods of 100 Jobs restart, then one measured cycle."""
    for job in killed:
        sim.control(gateway, f"namespaces/bench/pods/{job.name}-worker-0/kill", {})
    sim.control(gateway, "advance", {"seconds": 15})
    wall, cpu = time.perf_counter(), time.process_time()
    result = sync_cluster(cluster.pk)
    return Cost(time.process_time() - cpu, time.perf_counter() - wall, result)


def _fan_out() -> Cost:
    """The notify worker's first step, as the commit's drain runs it."""
    wall, cpu = time.perf_counter(), time.process_time()
    fan_out(timezone.now())
    return Cost(time.process_time() - cpu, time.perf_counter() - wall)


def _quiet_step(cluster: Cluster) -> Cost:
    """The notification step alone in a cycle where nothing turns (no Job touched, no watch
    due)."""
    costs = []
    for _ in range(REPEATS):
        cluster.refresh_from_db()
        wall, cpu = time.perf_counter(), time.process_time()
        after_cycle(cluster, set(), {}, timezone.now())
        costs.append(Cost(time.process_time() - cpu, time.perf_counter() - wall))
    return min(costs, key=lambda cost: cost.cpu)


@dataclass
class Cycles:
    with_step: list[Cost] = field(default_factory=list)
    without: list[Cost] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)
    occurrences: list[int] = field(default_factory=list)
    fan_outs: list[Cost] = field(default_factory=list)
    messages: list[int] = field(default_factory=list)


def _measure(sim: Sim) -> tuple[Cycles, Cost]:
    cluster = Cluster.objects.create(
        name="bench-notify", kubeconfig=sim.kubeconfig.read_text(), namespace="bench"
    )
    live = _world(cluster)
    sync_cluster(cluster.pk)
    gateway = gateway_for(cluster)
    _bring_up(sim, gateway)
    sync_cluster(cluster.pk)  # the notification step's first judgement of every followed Job
    sync_cluster(cluster.pk)
    Outbox.objects.all().delete()
    cycles = Cycles()
    half = LIVE // 2
    for n in range(PAIRS):
        churn = live[half + CHANGED * n : half + CHANGED * (n + 1)]
        _stall(live[TRANSITIONS * n : TRANSITIONS * (n + 1)], marked=True)
        meter, opened = Meter(), Condition.objects.count()
        with mock.patch("console.engine.cycle.notify_after_cycle", meter):
            cycles.with_step.append(_cycle(sim, gateway, cluster, churn))
        cycles.steps.append(meter.cpu)
        cycles.occurrences.append(Condition.objects.count() - opened)
        written = Outbox.objects.count()
        cycles.fan_outs.append(_fan_out())
        cycles.messages.append(Outbox.objects.count() - written)
        _stall(live[half + TRANSITIONS * n : half + TRANSITIONS * (n + 1)], marked=False)
        with mock.patch("console.engine.cycle.notify_after_cycle", return_value=0):
            cycles.without.append(_cycle(sim, gateway, cluster, churn))
    return cycles, _quiet_step(cluster)


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
            cycles, quiet = _measure(sim)
        finally:
            sim.stop()
        delivered, seconds, got = _deliver()
    return report(
        Figures(
            cycles.with_step, cycles.without, cycles.steps, median_int(cycles.occurrences),
            cycles.fan_outs, median_int(cycles.messages), quiet, delivered, seconds, got,
        )
    )  # fmt: skip


def median_int(values: list[int]) -> int:
    return int(statistics.median(values))


def report(f: Figures) -> str:
    with_cpu = statistics.median(cost.cpu for cost in f.with_step)
    without_cpu = statistics.median(cost.cpu for cost in f.without)
    step = statistics.median(f.steps)
    share = step / without_cpu
    apart = (with_cpu - without_cpu) / without_cpu
    cpu_ok = share <= CPU_TARGET
    fan_cpu = statistics.median(cost.cpu for cost in f.fan_outs)
    fan_wall = statistics.median(cost.wall for cost in f.fan_outs)
    delivered = f.delivered == MESSAGES == f.receiver_got
    delivery_ok = delivered and f.delivery_seconds < DELIVERY_TARGET
    changed = f.with_step[0].result

    def ms(values: list[float]) -> str:
        return ", ".join(f"{value * 1000:.1f}" for value in values)

    return "\n".join(
        [
            "## Notifications (`bench/notify.py`)",
            "",
            f"{LIVE + FINISHED:,} Jobs ({LIVE:,} live, one pod each, on a simulated cluster in its "
            f"own process; {FINISHED:,} finished), {SUBSCRIPTIONS:,} subscriptions (every live Job "
            f"followed: 990 follow one Job each, 10 their owner's Jobs). {PAIRS} cycles with the "
            f"notification step and {PAIRS} without, alternated, each after {CHANGED} pods of "
            f"{CHANGED} Jobs restarted"
            + (f" ({changed.changes} changes)" if changed else "")
            + f" and {TRANSITIONS} other Jobs' workloads Stalled: with the step, {TRANSITIONS} "
            "transitions (their Jobs marked as signal intake marks them); without it, nothing "
            "marks them. CPU time of this process, in ms, median (each cycle's figure in "
            "brackets).",
            "",
            "| | CPU, median | each |",
            "|---|---:|---|",
            f"| cycle without the step | {without_cpu * 1000:.1f} ms | "
            f"{ms([c.cpu for c in f.without])} |",
            f"| cycle with it ({f.occurrences} occurrences opened) | {with_cpu * 1000:.1f} ms | "
            f"{ms([c.cpu for c in f.with_step])} |",
            f"| the step itself, inside those cycles | {step * 1000:.2f} ms | {ms(f.steps)} |",
            f"| the step when nothing turns | {f.quiet_step.cpu * 1000:.2f} ms | |",
            f"| the notify worker writing a cycle's {f.messages_written} messages "
            f"(notify.fanout, after commit) | {fan_cpu * 1000:.1f} ms ({fan_wall * 1000:.0f} ms "
            f"wall) | {ms([c.cpu for c in f.fan_outs])} |",
            "",
            f"- {'PASS' if cpu_ok else 'FAIL'}: the notification step is {share * 100:.1f}% of "
            f"a cycle without it (target at most {CPU_TARGET * 100:.0f}%); the medians of the two "
            f"kinds of cycle differ by {apart * 100:+.1f}% (the step, the commit's queued drain, "
            "and the run-to-run noise of a cycle on a shared machine, a few percent either "
            "way).",
            f"- Where it goes: the step reads the watches due in one indexed query, judges the "
            f"Jobs whose phase the cycle wrote and those whose watch is due ({TRANSITIONS}: "
            "the restarted pods' Jobs kept their phase and are not judged), from one compiled "
            "query of values, and opens each transition's occurrence (one INSERT). Subscribers, "
            "facts and messages are the notify worker's, after commit.",
            f"- {'PASS' if delivery_ok else 'FAIL'}: {f.delivered:,} of {MESSAGES:,} queued "
            "messages delivered (signed, each with its Delivery row) to a local receiver by one "
            f"worker in {f.delivery_seconds:.2f} s (target under {DELIVERY_TARGET:.0f} s); the "
            f"receiver got {f.receiver_got:,}.",
            "",
            f"Database: {str(settings.DATABASES['default']['ENGINE']).rsplit('.', 1)[-1]}.",
            "",
        ]
    )
