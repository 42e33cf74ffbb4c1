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


class ShortLinesServer:
    """The API server's cut over a log of `count` short lines (`line-0000001\\n`, 13 bytes):
    the last `tailLines` lines, then `limitBytes` counted from their start."""

    def __init__(self, count: int) -> None:
        self.text = "".join(f"line-{n:07}\n" for n in range(1, count + 1))
        self.asks: list[tuple[int, int]] = []

    def log(self, namespace: str, name: str, container: str, tail_lines: int, limit_bytes: int,
            previous: bool = False, timestamps: bool = False) -> str:  # fmt: skip
        self.asks.append((tail_lines, limit_bytes))
        lines = self.text.splitlines(keepends=True)[-tail_lines:]
        return "".join(lines).encode()[:limit_bytes].decode()


@pytest.fixture
def short_lines(monkeypatch: pytest.MonkeyPatch) -> ShortLinesServer:
    server = ShortLinesServer(100_000)
    monkeypatch.setattr("console.engine.live_reads.gateway_for", lambda _cluster: server)
    return server


def test_a_kept_tail_of_short_lines_fills_the_cap_and_says_it_was_cut(
    short_lines: ShortLinesServer,
) -> None:
    limit = 1 << 20  # 1 MiB of a 1.3 MB log of 13-byte lines
    tail = pod_log(Cluster(), "ns", "p", "main", limit // 40, limit, fill=True)
    assert tail.cut and limit - 13 < len(tail.text.encode()) <= limit
    assert tail.lines[-1] == "line-0100000"  # the newest kept
    assert len(short_lines.asks) <= 6


def test_a_kept_tail_asks_again_rather_than_say_lines_were_left_out(
    short_lines: ShortLinesServer,
) -> None:
    """Every line asked for came, with room left: asked again, the whole log came, not cut."""
    tail = pod_log(Cluster(), "ns", "p", "main", 100_000, 4 << 20, fill=True)
    assert not tail.cut and len(tail.lines) == 100_000 and len(short_lines.asks) == 2


def test_the_logs_tabs_tail_of_so_many_lines_is_read_once(short_lines: ShortLinesServer) -> None:
    """A reader's tail of 200 lines: exactly those, asked once; not "cut" (no line was left
    out to stay within the byte cap: the reader chose how many)."""
    tail = pod_log(Cluster(), "ns", "p", "main", 200, 1 << 20)
    assert not tail.cut and len(tail.lines) == 200 and tail.lines[-1] == "line-0100000"
    assert short_lines.asks == [(200, 2 << 20)]


def test_a_whole_short_log_is_kept_whole_and_not_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    server = ShortLinesServer(1_000)
    monkeypatch.setattr("console.engine.live_reads.gateway_for", lambda _cluster: server)
    tail = pod_log(Cluster(), "ns", "p", "main", 100, 1 << 20, fill=True)
    assert not tail.cut and len(tail.lines) == 1_000
