"""The utilisation rules without a database or a clock (issue 33, Build 4): which DCGM metric
counts, how progressing seconds split into busy and low-utilisation, and which pod a series
belongs to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobs.status.usage import (
    Sample,
    Split,
    mean_percent,
    split_progressing,
    utilisation_percent,
)
from usage.prometheus import Series
from usage.utilisation import ENGINE_ACTIVE, GPU_UTIL, samples_by_pod

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
STEP = timedelta(seconds=15)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_it_prefers_the_engine_active_ratio_when_the_exporter_serves_it() -> None:
    assert utilisation_percent(gpu_util=100.0, engine_active=0.12) == 12.0
    assert utilisation_percent(gpu_util=64.0, engine_active=None) == 64.0
    assert utilisation_percent(None, None) is None
    assert utilisation_percent(140.0, None) == 100.0


def test_it_splits_only_the_progressing_seconds_a_sample_covers() -> None:
    samples = [Sample(at(15), 90.0), Sample(at(30), 10.0), Sample(at(45), 95.0)]
    progressing = [(at(20), at(40), 2)]  # 2 GPUs progressing 20 s..40 s
    split = split_progressing(samples, STEP, at(0), progressing, busy_percent=30)
    # 15..30 s (low): 20..30 s progressing; 30..45 s (busy): 30..40 s progressing.
    assert split == Split(busy_gpu_seconds=2 * 10.0, low_gpu_seconds=2 * 10.0)


def test_it_counts_nothing_before_what_was_counted_already() -> None:
    samples = [Sample(at(15), 90.0), Sample(at(30), 90.0)]
    split = split_progressing(samples, STEP, at(25), [(at(0), at(60), 1)], busy_percent=30)
    assert split == Split(busy_gpu_seconds=5.0, low_gpu_seconds=0.0)


def test_it_leaves_seconds_no_sample_covers_in_neither() -> None:
    split = split_progressing([], STEP, at(0), [(at(0), at(600), 8)], busy_percent=30)
    assert split == Split()


def test_it_weighs_a_jobs_utilisation_by_its_workers_gpus() -> None:
    assert mean_percent([(90.0, 6), (10.0, 2)]) == 70.0
    assert mean_percent([]) is None


def test_it_finds_the_pod_in_its_own_labels_or_the_renamed_ones() -> None:
    own = {"__name__": GPU_UTIL, "namespace": "team", "pod": "ppo-actor-0"}
    renamed = {
        "__name__": GPU_UTIL, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x",
        "exported_namespace": "team", "exported_pod": "ppo-rollout-0",
    }  # fmt: skip
    engine = {**own, "__name__": ENGINE_ACTIVE}
    series = [
        Series(own, [(at(15), 80.0), (at(30), 80.0)]),
        Series(engine, [(at(30), 0.25)]),
        Series(renamed, [(at(15), 3.0)]),
    ]
    found = samples_by_pod(series)
    assert found[("team", "ppo-actor-0")] == [Sample(at(15), 80.0), Sample(at(30), 25.0)]
    assert found[("team", "ppo-rollout-0")] == [Sample(at(15), 3.0)]
    assert ("gpu-operator", "nvidia-dcgm-exporter-x") not in found
