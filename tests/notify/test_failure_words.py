"""Messages name the failure of the Job's run (issue 34 §Build 5, failures.judge.words): its
label, class and advice, in the channel's language, on every kind; the webhook payload's
`data.failure`. The log line itself is never said (it follows the diagnostics rule)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from console.models import Cluster
from failures.models import Finding
from jobs.choices import JobPhase
from notify.choices import Event, Kind
from notify.deliver import drain
from notify.facts import failure_facts
from notify.fanout import fan_out
from notify.render import render
from notify.watch import after_cycle
from tests.notify.conftest import channel, job_of, subscribe
from tests.notify.receivers import Receiver, receiving
from tests.notify.test_render import KEPT
from tests.notify.test_senders import FACTS, T0

LINE = "torch.distributed.DistBackendError: [Rank 2] Watchdog caught collective operation timeout"


@pytest.fixture(autouse=True)
def _loopback_allowed(settings: Any) -> None:
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


def nccl_timeout(**fields: Any) -> Finding:
    values = {
        "code": "nccl_timeout",
        "label": "NCCL timeout",
        "failure_class": "network/collective",
    }
    return Finding(**(values | fields))


def test_it_names_the_failure_in_the_webhook_payload_in_each_channels_language(
    alice: User, cluster: Cluster, receiver: Receiver
) -> None:
    job = job_of(alice, cluster, phase=JobPhase.FAILED)
    nccl_timeout(job=job, run=job.run, first_error=LINE, pod_name="ppo-worker-2").save()
    for language in ("en", "zh-hans"):
        hook = channel(alice, f"{receiver.url}/{language}", kind=Kind.WEBHOOK, language=language)
        subscribe(alice, hook, Event.JOB_FAILED)
    after_cycle(cluster, {job.pk}, {}, T0)
    fan_out(T0)  # as the notify worker's drain does
    drain(T0)
    said = {r.path.rsplit("/", 1)[-1]: r.json()["data"]["failure"] for r in receiver.received}
    assert said["en"] == {
        "label": "NCCL timeout", "class": "network/collective",
        "class_label": "network/collective", "advice": said["en"]["advice"],
    }  # fmt: skip
    assert said["en"]["advice"].startswith("A collective (all-reduce, broadcast, ...) did not")
    assert (said["zh-hans"]["label"], said["zh-hans"]["class"]) == (
        "NCCL 超时",
        "network/collective",
    )
    assert said["zh-hans"]["class_label"] == "网络/集合通信"
    assert re.search(r"[\u4e00-\u9fff]", said["zh-hans"]["advice"])
    assert all(LINE not in r.body.decode() for r in receiver.received)  # diagnostics only


def test_it_names_no_failure_for_a_run_that_has_none(
    alice: User, cluster: Cluster, receiver: Receiver
) -> None:
    """An earlier run's finding is not the current run's failure (failures.judge.current)."""
    job = job_of(alice, cluster, phase=JobPhase.FAILED, run=2)
    nccl_timeout(job=job, run=1).save()
    subscribe(alice, channel(alice, receiver.url), Event.JOB_FAILED)
    after_cycle(cluster, {job.pk}, {}, T0)
    fan_out(T0)  # as the notify worker's drain does
    drain(T0)
    (message,) = receiver.received
    assert message.json()["data"]["failure"] is None


def test_it_says_the_failure_in_english() -> None:
    facts = FACTS | {"event": "job.failed", "failure": failure_facts(nccl_timeout(), {})}
    message = render(facts, "en", T0 + timedelta(minutes=3))
    assert "Failure: NCCL timeout (network/collective)" in message.lines
    advice = next(line for line in message.lines if line.startswith("Advice: "))
    assert "Look at the other ranks' logs" in advice
    assert not re.search(r"[\u4e00-\u9fff]", "\n".join(message.lines))


def test_it_says_the_failure_in_chinese_but_names() -> None:
    facts = FACTS | {"event": "job.failed", "failure": failure_facts(nccl_timeout(), {})}
    message = render(facts, "zh-hans", T0 + timedelta(minutes=3))
    assert "失败：NCCL 超时（网络/集合通信）" in message.lines
    assert any(line.startswith("建议：") for line in message.lines)
    text = "\n".join([message.title, *message.lines])
    # Technical terms the Chinese advice keeps, and the phase (a status value, as in the spec).
    technical = (
        r"all-reduce|broadcast|rank|NCCL_DEBUG=INFO|NCCL_TIMEOUT|NCCL|Failed|"  # terms, names
    )
    kept = re.compile(technical + KEPT.pattern)
    assert not re.search(r"[A-Za-z]{2,}", kept.sub("", text)), kept.sub("", text)
