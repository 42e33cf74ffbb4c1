"""The fallbacks' messages (issue 10, item 3; docs/decisions.md, "Fallbacks: sequence numbers"):
keyed so that reading the same thing again is a duplicate, never a posted message's key, and
not folded a second time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from console.models import Cluster
from jobs.choices import SignalSource
from jobs.models import Job, Signal, WorkloadReport
from jobs.workload.fallbacks import (
    LOG_SEQ,
    TERMINATION_SEQ,
    completion_signal,
    log_seq,
    progress_signals,
    record_fallback,
)
from jobs.workload.rlinf_logs import LogProgress

POD, UID = "rl-head-0", "4b1c-uid"
AT = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()


@pytest.fixture
def job(alice: User, cluster: Cluster) -> Job:
    return Job.objects.create(
        name="rl", owner=alice, project=alice.memberships.get().project, cluster=cluster,
        namespace="default", spec={"policies": {"progress_from_logs": True}}, phase="Running",
    )  # fmt: skip


def test_it_keys_fallbacks_below_every_posted_seq_and_apart_from_each_other() -> None:
    first = completion_signal(POD, UID, 0, "failed", 3, "NaNLoss", "", AT)
    assert first is not None and first.seq == TERMINATION_SEQ
    seqs = [TERMINATION_SEQ + 5, log_seq(0, 0), log_seq(0, 2**31 - 1), log_seq(1, 0)]
    assert seqs == sorted(set(seqs)) and all(seq < 0 for seq in seqs)
    assert log_seq(0, 7) == LOG_SEQ + 7 and log_seq(2**40, 0) < 0


def test_it_cuts_long_text_and_refuses_an_exit_code_beyond_32_bits() -> None:
    signal = completion_signal(POD, UID, 2, "failed", None, "R" * 300, "m" * 5000, None)
    assert signal is not None and len(signal.reason or "") == 128
    assert len(signal.message or "") == 1024 and signal.exit_code is None
    assert completion_signal(POD, UID, 2, "failed", 2**40, "", "", None) is None


def test_it_gives_one_progress_per_step_the_last_one_read() -> None:
    points = [LogProgress(3, 10), LogProgress(4, 10, metrics={"loss": 1.0}), LogProgress(4, 10)]
    assert [(p.step, p.metrics) for p in progress_signals(POD, UID, 0, points)] == [
        (3, None), (4, None),
    ]  # fmt: skip


def test_it_records_what_is_new_and_folds_nothing_twice(job: Job) -> None:
    items = progress_signals(POD, UID, 0, [LogProgress(3, 10, at=AT), LogProgress(4, 10, at=AT)])

    first = record_fallback(job, job.run, items, SignalSource.LOGS)
    folded = WorkloadReport.objects.get(job=job).last_received_at
    again = record_fallback(job, job.run, items, SignalSource.LOGS)

    assert first is not None and (first.accepted, first.duplicates) == (2, 0)
    assert again is None
    assert WorkloadReport.objects.get(job=job).last_received_at == folded
    assert Signal.objects.filter(job=job, source="logs").count() == 2
