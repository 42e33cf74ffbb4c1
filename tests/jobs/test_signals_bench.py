"""The signal benchmark's scenario (bench/signal_intake.py): every message it posts is one the
endpoint accepts, with the mix of a training run (issue 10, "Show": the benchmark)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from bench.signal_intake import PODS_PER_JOB, ROUNDS, message, scenario
from jobs.workload.intake import BATCH, MAX_BATCH, MAX_METRICS

STARTED = datetime(2026, 12, 1, tzinfo=UTC)


def _run(job: int) -> list[dict[str, object]]:
    return [
        message(job, pod, round_, ROUNDS, STARTED + timedelta(seconds=10 * round_))
        for pod in range(PODS_PER_JOB)
        for round_ in range(ROUNDS)
    ]


def test_it_builds_only_messages_the_endpoint_accepts() -> None:
    sent = _run(7)
    for start in range(0, len(sent), MAX_BATCH):
        BATCH.validate_python(sent[start : start + MAX_BATCH])  # raises on any invalid one
    metrics = [len(item["metrics"]) for item in sent if item["kind"] == "progress"]  # type: ignore[arg-type]
    assert min(metrics) == 3 and max(metrics) == 8 <= MAX_METRICS


def test_it_numbers_each_pod_in_order_and_names_it_apart_from_other_jobs() -> None:
    keys = [(item["pod"], item["uid"], item["seq"]) for item in _run(7) + _run(8)]
    assert len(set(keys)) == len(keys)  # no duplicate (pod, uid, seq): each is accepted once
    seqs: dict[object, list[object]] = {}
    for pod, _uid, seq in keys:
        seqs.setdefault(pod, []).append(seq)
    assert all(numbers == list(range(ROUNDS)) for numbers in seqs.values())


def test_it_mixes_the_kinds_of_a_run_with_one_completion_per_job() -> None:
    kinds = Counter(item["kind"] for item in _run(7))
    assert kinds == scenario()
    assert kinds["completion"] == 1 and _run(7)[ROUNDS - 1]["kind"] == "completion"
    assert kinds["heartbeat"] + kinds["progress"] > 0.75 * PODS_PER_JOB * ROUNDS
    assert kinds["checkpoint"] and kinds["ray"] and kinds["phase"] == 3 * PODS_PER_JOB
