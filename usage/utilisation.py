"""GPU utilisation from NVIDIA's DCGM exporter (issue 33, Build 4; docs/usage.md "Prometheus").

Once per sync cycle and cluster, when the cluster has a Prometheus (its `prometheus_url`, else
TRAINYARD_PROMETHEUS_URL), one range query reads the utilisation of every pod since it was last
counted. Each Worker's latest value is kept (`usage.PodUtilisation`) and the GPU-seconds its pod
spent `progressing` are split into busy and low-utilisation (jobs.status.usage.split_progressing).

It informs, nothing more: no class of the ledger, and so no idle judgement, reads it (a hung
NCCL collective can show 100 %; RLinf idles some GPUs by design while others work).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Q

from console.models import Cluster
from jobs.choices import UsageClass
from jobs.status.usage import Sample, Stretch, split_progressing, utilisation_percent
from usage.models import GpuInterval, PodUtilisation
from usage.prometheus import PrometheusError, Series, query_range

logger = logging.getLogger(__name__)

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
# Both metrics in one query, averaged over a pod's GPUs. `exported_*`: the pod's labels when the
# scrape renamed them (a Prometheus that scrapes the exporter's own pod without honor_labels).
QUERY = (
    "avg by (__name__, namespace, pod, exported_namespace, exported_pod) "
    f'({{__name__=~"{GPU_UTIL}|{ENGINE_ACTIVE}"}})'
)
MAX_WINDOW = timedelta(hours=1)  # a pod first measured, or a Prometheus back after a gap


def prometheus_for(cluster: Cluster) -> str:
    """Where the cluster's utilisation is read ("" for nowhere)."""
    return cluster.prometheus_url or settings.TRAINYARD_PROMETHEUS_URL


@dataclass
class Watched:
    """A pod the ledger saw hold GPUs in the window, and what is counted of it already."""

    uid: str
    job_id: int
    run: int
    namespace: str
    name: str
    gpus: int
    after: datetime
    last_end: datetime | None = None
    progressing: list[Stretch] = field(default_factory=list)


def watched_pods(cluster_id: int, now: datetime) -> list[Watched]:
    """The pods whose intervals reach past what was counted of them (at most MAX_WINDOW ago)."""
    floor = now - MAX_WINDOW
    intervals = (
        GpuInterval.objects.filter(cluster_id=cluster_id)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=floor))
        .order_by("started_at")
        .values_list(
            "pod_uid", "job_id", "run", "job__namespace", "pod_name", "usage_class",
            "started_at", "ended_at", "gpus",
        )
    )  # fmt: skip
    pods: dict[str, Watched] = {}
    for uid, job_id, run, namespace, name, klass, since, until, gpus in intervals:
        pod = pods.setdefault(
            uid, Watched(uid, job_id, run, namespace, name, gpus, max(since, floor))
        )
        pod.gpus = gpus
        pod.last_end = None if until is None else max(until, pod.last_end or until)
        if klass == UsageClass.PROGRESSING:
            pod.progressing.append((since, until or now, gpus))
    counted = PodUtilisation.objects.filter(pod_uid__in=list(pods)).values_list(
        "pod_uid", "counted_until"
    )
    for uid, until in counted:
        pods[uid].after = max(until, floor)
    return [p for p in pods.values() if p.last_end is None or p.last_end > p.after]


def samples_by_pod(series: list[Series]) -> dict[tuple[str, str], list[Sample]]:
    """Each (namespace, pod)'s utilisation over time, the finer metric where both are served."""
    values: dict[tuple[str, str], dict[datetime, dict[str, float]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for one in series:
        labels = one.labels
        pod = labels.get("exported_pod") or labels.get("pod", "")
        namespace = labels.get("exported_namespace") or labels.get("namespace", "")
        if pod:
            for moment, value in one.points:
                values[(namespace, pod)][moment][labels.get("__name__", "")] = value
    found: dict[tuple[str, str], list[Sample]] = {}
    for key, by_moment in values.items():
        found[key] = [
            Sample(moment, percent)
            for moment, metrics in sorted(by_moment.items())
            if (percent := utilisation_percent(metrics.get(GPU_UTIL), metrics.get(ENGINE_ACTIVE)))
            is not None
        ]
    return found


def measure(cluster: Cluster, now: datetime) -> int:
    """The cycle's utilisation step (after its transaction: a request leaves the console).
    Returns the rows written; a Prometheus that does not answer is logged and counts nothing,
    and the next cycle reads the time it missed (up to MAX_WINDOW)."""
    url = prometheus_for(cluster)
    if not url:
        return 0
    pods = watched_pods(cluster.pk, now)
    if not pods:
        return 0
    start, step = min(pod.after for pod in pods), settings.TRAINYARD_PROMETHEUS_STEP
    timeout = float(settings.TRAINYARD_PROMETHEUS_TIMEOUT)
    try:
        series = query_range(url, QUERY, start, now, step, timeout)
    except PrometheusError as error:
        logger.warning("cluster %s: GPU utilisation not read: %s", cluster.name, error)
        return 0
    found = samples_by_pod(series)
    written = 0
    for pod in pods:
        samples = [s for s in found.get((pod.namespace, pod.name), ()) if s.at > pod.after]
        if samples:
            written += _count(cluster.pk, pod, samples, timedelta(seconds=step))
    return written


def _count(cluster_id: int, pod: Watched, samples: list[Sample], step: timedelta) -> int:
    """Adds the samples to the pod's row: conditional on what was counted, so that two
    writers never count a sample twice."""
    split = split_progressing(
        samples, step, pod.after, pod.progressing, settings.TRAINYARD_GPU_BUSY_PERCENT
    )
    last = samples[-1]
    updated = PodUtilisation.objects.filter(pod_uid=pod.uid, counted_until__lt=last.at).update(
        gpus=pod.gpus, percent=last.percent, measured_at=last.at, counted_until=last.at,
        busy_gpu_seconds=F("busy_gpu_seconds") + split.busy_gpu_seconds,
        low_gpu_seconds=F("low_gpu_seconds") + split.low_gpu_seconds,
    )  # fmt: skip
    if updated:
        return updated
    _row, created = PodUtilisation.objects.get_or_create(
        pod_uid=pod.uid,
        defaults={
            "job_id": pod.job_id, "run": pod.run, "cluster_id": cluster_id,
            "pod_name": pod.name, "gpus": pod.gpus, "percent": last.percent, "measured_at": last.at,
            "counted_until": last.at, "busy_gpu_seconds": split.busy_gpu_seconds,
            "low_gpu_seconds": split.low_gpu_seconds,
        },
    )  # fmt: skip
    return int(created)
