"""Freshness derived at read time (PRODUCT: every status with its age; stale is marked)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from django.test import override_settings

from jobs.status.freshness import (
    freshness,
    instance_last_seen_at,
    is_stale,
    job_freshness,
    observed_at,
    worker_last_reported_at,
    worker_missing,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


@override_settings(TRAINYARD_STALE_AFTER=30)
def test_it_marks_an_observation_older_than_the_limit_or_missing_as_stale() -> None:
    assert not is_stale(ago(30), NOW)
    assert is_stale(ago(31), NOW)
    assert is_stale(None, NOW)
    assert freshness(ago(12), NOW).age_seconds == 12


def test_it_takes_the_later_of_a_rows_change_and_the_last_sync() -> None:
    assert observed_at(ago(100), ago(5)) == ago(5)
    assert observed_at(ago(5), ago(100)) == ago(5)
    assert observed_at(None, ago(5), since=ago(2)) is None
    assert observed_at(None, None) is None


@override_settings(TRAINYARD_STALE_AFTER=30)
def test_it_dates_a_job_by_its_clusters_last_sync_and_waits_before_calling_a_new_one_stale() -> (
    None
):
    cluster = SimpleNamespace(last_synced_at=ago(3))
    observed = SimpleNamespace(observed_at=ago(600), created_at=ago(900), cluster=cluster)
    assert job_freshness(observed, NOW).observed_at == ago(3)
    new = SimpleNamespace(observed_at=None, created_at=ago(1), cluster=cluster)
    assert job_freshness(new, NOW).observed_at is None and not job_freshness(new, NOW).stale
    waiting = SimpleNamespace(
        observed_at=None, created_at=ago(60), cluster=SimpleNamespace(last_synced_at=ago(90))
    )
    assert job_freshness(waiting, NOW).stale
    cut_off = SimpleNamespace(
        observed_at=ago(600), created_at=ago(900), cluster=SimpleNamespace(last_synced_at=ago(300))
    )
    assert job_freshness(cut_off, NOW).stale


def test_it_tells_a_present_worker_from_one_missing_in_the_last_sync() -> None:
    task = SimpleNamespace(observed_at=ago(50))
    cluster = SimpleNamespace(last_synced_at=ago(2))
    present = SimpleNamespace(last_reported_at=ago(50))
    gone = SimpleNamespace(last_reported_at=ago(60))
    assert not worker_missing(present, task) and worker_missing(gone, task)
    assert worker_last_reported_at(present, task, cluster) == ago(2)
    assert worker_last_reported_at(gone, task, cluster) == ago(60)


def test_it_dates_a_listed_pod_instance_by_the_last_sync() -> None:
    cluster = SimpleNamespace(last_synced_at=ago(2))
    assert instance_last_seen_at(
        SimpleNamespace(gone_at=None, last_seen_at=ago(80)), cluster
    ) == ago(2)
    assert instance_last_seen_at(
        SimpleNamespace(gone_at=ago(40), last_seen_at=ago(45)), cluster
    ) == ago(45)
