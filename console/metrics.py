"""/metrics in Prometheus' text format (prometheus-client), and what feeds it.

Three sources, because the figures are made in different processes:
- request latency is observed in each web process (`latency_middleware`); under gunicorn the
  workers share it through prometheus-client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR);
- sync cycles run in Celery workers, on other hosts as often as not: each cycle adds itself to
  one `SyncStats` row, and the scrape reads the totals from the database;
- cluster reachability and sync age, Jobs by phase and the queues' lengths are read at scrape
  time from the database and the broker (`ConsoleCollector`).
The choice is recorded in docs/decisions.md, "Metrics across processes".
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Count, F
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from console.models import Cluster, SyncStats
from jobs.choices import JobPhase
from jobs.models import Job

logger = logging.getLogger(__name__)

# Upper bounds (seconds) of the sync duration histogram; a last, open bucket follows.
SYNC_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0)
REQUEST_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.5, 5.0, 10.0)
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

REQUEST_SECONDS = Histogram(
    "trainyard_http_request_duration_seconds",
    "Time to answer a request, by URL name (unmatched: no URL), method and status.",
    ["view", "method", "status"],
    buckets=REQUEST_BUCKETS,
)


def latency_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = get_response(request)
        match = request.resolver_match
        view = (match.view_name or match.route) if match else "unmatched"
        method = request.method if request.method in METHODS else "other"
        elapsed = time.perf_counter() - started
        REQUEST_SECONDS.labels(view, method, str(response.status_code)).observe(elapsed)
        return response

    return middleware


# --- sync cycles, recorded by the worker ------------------------------------------------------


class CycleFigures(Protocol):
    """What a sync cycle reports (`console.engine.cycle.SyncResult`), as the metrics read it."""

    @property
    def cluster_id(self) -> int: ...
    @property
    def skipped(self) -> bool: ...
    @property
    def reachable(self) -> bool: ...
    @property
    def seconds(self) -> float: ...
    @property
    def cpu_seconds(self) -> float: ...
    @property
    def api_requests(self) -> int: ...
    @property
    def bytes_received(self) -> int: ...
    @property
    def rows_written(self) -> int: ...


def record_sync(result: CycleFigures) -> None:
    """Adds one cycle to its cluster's totals (console.tasks.sync_cluster calls it)."""
    outcome = (
        SyncStats.Result.SKIPPED
        if result.skipped
        else SyncStats.Result.SYNCED
        if result.reachable
        else SyncStats.Result.UNREACHABLE
    )
    figures = {
        "seconds": result.seconds,
        "cpu_seconds": result.cpu_seconds,
        "api_requests": result.api_requests,
        "bytes_received": result.bytes_received,
        "rows_written": result.rows_written,
    }
    _add(result.cluster_id, outcome, figures)


def record_failed_sync(cluster_id: int, seconds: float) -> None:
    """A cycle that raised (its soft time limit included): its time, nothing else known."""
    figures = {
        "seconds": seconds,
        "cpu_seconds": 0.0,
        "api_requests": 0,
        "bytes_received": 0,
        "rows_written": 0,
    }
    _add(cluster_id, SyncStats.Result.FAILED, figures)


def _add(cluster_id: int, outcome: str, figures: dict[str, float]) -> None:
    """One UPDATE; the first cycle of a bucket creates its row, and of two creating it at once
    the loser adds to the winner's. Never fails the task: metrics are not worth a lost sync."""
    key = {
        "cluster_id": cluster_id,
        "result": outcome,
        "bucket": bisect_left(SYNC_BUCKETS, figures["seconds"]),
    }
    added = {name: F(name) + value for name, value in figures.items()} | {"cycles": F("cycles") + 1}
    try:
        if SyncStats.objects.filter(**key).update(**added):
            return
        try:
            with transaction.atomic():
                SyncStats.objects.create(**key, **figures, cycles=1)
        except IntegrityError:  # created meanwhile, or the cluster is gone
            SyncStats.objects.filter(**key).update(**added)
    except DatabaseError:
        logger.warning("sync metrics of cluster %s not recorded", cluster_id, exc_info=True)


# --- read at scrape time ----------------------------------------------------------------------


def _timestamp(moment: Any) -> float | None:
    return moment.timestamp() if moment is not None else None


def cluster_metrics() -> Iterator[Metric]:
    """Reachability, the time of the last successful sync and attempt, and the age of the
    last successful sync, per cluster (a cluster never synced has no age)."""
    now = timezone.now().timestamp()
    labels = ["cluster"]
    reachable = GaugeMetricFamily(
        "trainyard_cluster_reachable", "1 if the last sync reached the cluster.", labels=labels
    )
    synced = GaugeMetricFamily(
        "trainyard_cluster_last_sync_timestamp_seconds",
        "When the last successful sync started (Unix time).",
        labels=labels,
    )
    attempted = GaugeMetricFamily(
        "trainyard_cluster_last_attempt_timestamp_seconds",
        "When the last sync attempt started (Unix time).",
        labels=labels,
    )
    age = GaugeMetricFamily(
        "trainyard_cluster_sync_age_seconds",
        "Seconds since the last successful sync started.",
        labels=labels,
    )
    rows = Cluster.objects.values_list("name", "reachable", "last_synced_at", "last_attempt_at")
    for name, is_reachable, last_synced_at, last_attempt_at in rows:
        reachable.add_metric([name], float(is_reachable))
        if (synced_at := _timestamp(last_synced_at)) is not None:
            synced.add_metric([name], synced_at)
            age.add_metric([name], max(0.0, now - synced_at))
        if (attempted_at := _timestamp(last_attempt_at)) is not None:
            attempted.add_metric([name], attempted_at)
    yield from (reachable, synced, attempted, age)


def job_metrics() -> Iterator[Metric]:
    """Jobs by cluster and phase, every phase shown (0 when none), deleted ones left out."""
    jobs = GaugeMetricFamily(
        "trainyard_jobs", "Jobs by cluster and phase.", labels=["cluster", "phase"]
    )
    counted = (
        Job.objects.filter(delete_requested_at__isnull=True)
        .values_list("cluster__name", "phase")
        .annotate(count=Count("pk"))
    )
    counts = {(cluster, phase): count for cluster, phase, count in counted}
    for cluster in Cluster.objects.values_list("name", flat=True):
        for phase in JobPhase.values:
            jobs.add_metric([cluster, phase], counts.get((cluster, phase), 0))
    yield jobs


def sync_metrics() -> Iterator[Metric]:
    """The cycles' duration histogram by cluster and result, and their summed costs."""
    totals: defaultdict[tuple[str, str], list[float]] = defaultdict(
        lambda: [0.0] * (len(SYNC_BUCKETS) + 1)
    )
    sums: defaultdict[tuple[str, str], float] = defaultdict(float)
    costs: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in SyncStats.objects.select_related("cluster"):
        key = (row.cluster.name, row.result)
        totals[key][row.bucket] += row.cycles
        sums[key] += row.seconds
        for cost in COSTS:
            costs[cost][row.cluster.name] += getattr(row, cost)
    yield _histogram(totals, sums)
    for cost, (name, help_text) in COSTS.items():
        family = CounterMetricFamily(name, help_text, labels=["cluster"])
        for cluster, value in sorted(costs[cost].items()):
            family.add_metric([cluster], value)
        yield family


COSTS = {
    "cpu_seconds": ("trainyard_sync_cpu_seconds", "CPU seconds the sync cycles used."),
    "api_requests": ("trainyard_sync_api_requests", "Requests the sync cycles sent."),
    "bytes_received": ("trainyard_sync_received_bytes", "Bytes the sync cycles received."),
    "rows_written": ("trainyard_sync_rows_written", "Database rows the sync cycles wrote."),
}


def _histogram(
    totals: dict[tuple[str, str], list[float]], sums: dict[tuple[str, str], float]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "trainyard_sync_duration_seconds",
        "Duration of sync cycles, by cluster and result (synced, unreachable, skipped, failed).",
        labels=["cluster", "result"],
    )
    bounds = [*(str(bound) for bound in SYNC_BUCKETS), "+Inf"]
    for key, counts in sorted(totals.items()):
        cumulative, buckets = 0.0, []
        for bound, count in zip(bounds, counts, strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        family.add_metric(list(key), buckets, sums[key])
    return family


def queue_metrics() -> Iterator[Metric]:
    """Messages waiting in each Celery queue (on Redis, the lengths of its lists). Absent when
    the broker does not answer: /readyz says so."""
    from console.celery import broker_connection

    family = GaugeMetricFamily(
        "trainyard_celery_queue_length", "Messages waiting in the queue.", labels=["queue"]
    )
    try:
        with broker_connection() as broker:
            channel = broker.default_channel
            for queue in settings.CELERY_TASK_QUEUES:
                family.add_metric([queue.name], channel.queue_declare(queue.name).message_count)
    except Exception:  # any transport's failure: the scrape goes on without the queues
        logger.warning("queue lengths not read", exc_info=True)
        return
    yield family


# Signal intake (POST /api/v1/jobs/{id}/signals, jobs.workload.intake): counted by the web process
# that took it, like the request latency, so every process's counts add up under gunicorn.
SIGNALS_RECEIVED = Counter(
    "trainyard_signals_received",
    "Signal messages received from pods, by cluster and kind (duplicates included).",
    labelnames=["cluster", "kind"],
)
SIGNALS_DUPLICATE = Counter(
    "trainyard_signals_duplicate",
    "Signal messages recognised as resent (counted once), by cluster.",
    labelnames=["cluster"],
)


def count_signals(cluster: str, items: Sequence[Any], accepted: int) -> None:
    for item in items:
        SIGNALS_RECEIVED.labels(cluster, item.kind).inc()
    if duplicates := len(items) - accepted:
        SIGNALS_DUPLICATE.labels(cluster).inc(duplicates)


SCRAPED: tuple[Callable[[], Iterable[Metric]], ...] = (
    cluster_metrics,
    job_metrics,
    sync_metrics,
    queue_metrics,
)


class ConsoleCollector(Collector):
    def collect(self) -> Iterable[Metric]:
        for source in SCRAPED:
            yield from source()


def exposition() -> bytes:
    """This process's metrics (all web processes' under gunicorn), then the scraped ones."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        own = CollectorRegistry()
        multiprocess.MultiProcessCollector(own)  # type: ignore[no-untyped-call]
    else:
        own = REGISTRY
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(ConsoleCollector())
    return generate_latest(own) + generate_latest(scraped)


def _authorized(request: HttpRequest) -> bool:
    token = settings.TRAINYARD_METRICS_TOKEN
    if not token:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), token)


def metrics(request: HttpRequest) -> HttpResponse:
    """Behind TRAINYARD_METRICS_TOKEN when it is set (docs/operations.md, "Health and
    metrics"); open otherwise, for a network policy to guard."""
    if not _authorized(request):
        return HttpResponse(status=401, headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
    return HttpResponse(exposition(), content_type="text/plain; version=0.0.4; charset=utf-8")
