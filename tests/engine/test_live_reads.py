"""A log tail read on demand keeps the newest lines (issue 34, item 1): the API server counts
`limitBytes` from where `tailLines` starts and drops the *newest* lines when the answer fills it
(KUBERNETES-FACTS.md, Pod logs; simcluster cuts the same way), so the console asks again with
fewer lines and cuts the start itself, at a line boundary."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from console.engine.gateways import gateway_for
from console.engine.live_reads import pod_log
from console.models import Cluster
from jobs.models import Job
from tests.engine.conftest import (  # noqa: F401 (fixtures)
    _fast_passwords,
    cluster,
    sim,
    submit,
    sync_until,
    task,
)
from workers.models import Worker

POD = "chatty-worker-0"


@pytest.fixture
def chatty(alice: User, cluster: Cluster) -> Job:  # noqa: F811
    job = submit(alice, cluster, "chatty", task("worker", command=["sim", "run", "3600"]))
    sync_until(cluster, lambda: Worker.objects.filter(pod_name=POD, phase="Running").exists())
    return job


def test_the_api_server_drops_the_newest_lines_when_limit_bytes_cuts(
    cluster: Cluster,  # noqa: F811
    chatty: Job,
) -> None:
    raw = gateway_for(cluster).log(chatty.namespace, POD, "main", 200, 120)
    assert raw.startswith("[sim] sim run 3600") and len(raw.encode()) == 120


def test_it_keeps_the_newest_whole_lines_within_the_cap(
    cluster: Cluster,  # noqa: F811
    chatty: Job,
) -> None:
    tail = pod_log(cluster, chatty.namespace, POD, "main", 200, 120)
    whole = gateway_for(cluster).log(chatty.namespace, POD, "main", 200, 1 << 20).splitlines()
    assert tail.cut and 0 < len(tail.text.encode()) <= 120
    assert not tail.text.startswith("[sim] sim run 3600")  # the oldest lines were left out
    # Whole lines, in order, a run of the log's own lines (read a moment later, it may have more).
    start = whole.index(tail.lines[0])
    assert whole[start : start + len(tail.lines)] == tail.lines


def test_a_tail_within_the_cap_is_whole_and_not_cut(cluster: Cluster, chatty: Job) -> None:  # noqa: F811
    tail = pod_log(cluster, chatty.namespace, POD, "main", 1, 1 << 20)
    assert not tail.cut and len(tail.lines) == 1
