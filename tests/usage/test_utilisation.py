"""GPU utilisation from the DCGM exporter (issue 33, Build 4; docs/usage.md "Prometheus"),
against a real Prometheus (Debian's `prometheus`, started here) scraping simcluster's
DCGM-shaped exporter every second: the sync's one range query per cycle keeps each Worker's
latest value and splits `progressing` into busy and low-utilisation GPU-seconds, and it never
moves a run into another class."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from console.models import ApiToken, Cluster, Project
from jobs.choices import UsageClass
from jobs.models import Job
from simcluster.server import SimCluster
from tests.conftest import register_sim
from tests.engine.conftest import submit, task
from tests.processes import free_port, prometheus_server, wait_for
from tests.usage.conftest import say, sync
from tests.usage.test_api import held, job_of
from usage import utilisation
from usage.models import GpuInterval, PodUtilisation

GPUS = {"cpu": "1", "memory": "1Gi", "gpu": 2}
POD = "train-worker-0"


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.TRAINYARD_PROMETHEUS_STEP = 1
    settings.TRAINYARD_GPU_BUSY_PERCENT = 30
    cache.clear()


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=1, gpus_per_node=4, seed=0, speed=1, addons=False) as running:
        yield running


@pytest.fixture
def prometheus(sim: SimCluster, tmp_path: Path) -> Iterator[str]:
    directory = tmp_path / "prometheus"
    directory.mkdir()
    with prometheus_server(directory, f"127.0.0.1:{sim.port}", "/dcgm/metrics") as url:
        yield url


def scraped(prometheus: str, pod: str, percent: float, after: datetime) -> bool:
    """Prometheus holds a sample of the pod's GPUs at `percent` scraped 2 s after `after` (so
    that a range query at 1 s steps has a point inside the time since)."""
    query = f'DCGM_FI_DEV_GPU_UTIL{{pod="{pod}"}} == {percent}'
    url = f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': f'timestamp({query})'})}"
    with urllib.request.urlopen(url, timeout=5) as answer:
        result = json.loads(answer.read())["data"]["result"]
    return any(float(item["value"][1]) > after.timestamp() + 2 for item in result)


def running(cluster: Cluster, job: Job) -> None:
    """Syncs until the pod's GPUs are held while it runs (the ledger's `silent`)."""

    def silent() -> bool:
        sync(cluster)
        held = GpuInterval.objects.filter(job=job, ended_at__isnull=True)
        return held.filter(usage_class="silent").exists()

    wait_for(silent, 30, "the pod running")


def test_it_splits_progressing_by_the_utilisation_prometheus_scraped(
    alice: User, sim: SimCluster, prometheus: str, tmp_path: Path
) -> None:
    cluster = register_sim(sim, tmp_path)
    Cluster.objects.filter(pk=cluster.pk).update(prometheus_url=prometheus)
    sim.set_gpu_utilisation("default", POD, 90)
    job = submit(alice, cluster, "train", task("worker", resources=GPUS))
    running(cluster, job)
    say(job, {"kind": "progress", "step": 1})  # progressing from here
    progressing_since = datetime.now(UTC)
    wait_for(lambda: scraped(prometheus, POD, 90, progressing_since), 20, "a busy scrape")
    sync(cluster)
    busy = PodUtilisation.objects.get(pod_name=POD)
    assert (busy.percent, busy.gpus, busy.low_gpu_seconds) == (90.0, 2, 0.0)
    assert busy.busy_gpu_seconds > 0

    sim.set_gpu_utilisation("default", POD, 5)  # a hung collective or a starved rollout
    turned_low = datetime.now(UTC)
    wait_for(lambda: scraped(prometheus, POD, 5, turned_low), 20, "a low scrape")
    sync(cluster)
    low = PodUtilisation.objects.get(pod_name=POD)
    assert low.percent == 5.0 and low.low_gpu_seconds > 0
    assert low.busy_gpu_seconds >= busy.busy_gpu_seconds
    progressing = GpuInterval.objects.get(job=job, usage_class="progressing")
    assert progressing.ended_at is None  # it informs: the class stays progressing
    held = 2 * (datetime.now(UTC) - progressing.started_at).total_seconds()
    assert low.busy_gpu_seconds + low.low_gpu_seconds <= held

    sync(cluster)  # nothing new scraped is counted once only
    again = PodUtilisation.objects.get(pod_name=POD)
    assert again.counted_until >= low.counted_until
    assert again.busy_gpu_seconds + again.low_gpu_seconds <= held + 2 * 2

    token = ApiToken.issue(alice, name="t")[1]
    body = Client().get(f"/api/v1/jobs/{job.pk}", headers={"Authorization": f"Bearer {token}"})
    utilisation = body.json()["usage"]["utilisation"]
    assert utilisation["percent"] == 5.0 and utilisation["workers"][0]["pod"] == POD
    assert utilisation["low_utilisation_gpu_hours"] > 0
    client = Client()
    client.force_login(alice)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    section = html[html.index('id="usage"') :]
    assert "GPU utilisation by Worker" in section and "5 %" in section


@pytest.mark.parametrize(
    ("prometheus_url", "logged"),
    [
        ("http://169.254.169.254", "cloud metadata"),  # refused before any connection
        ("http://127.0.0.1:{port}", "No answer"),  # nothing listens there
    ],
)
def test_it_counts_nothing_and_says_why_when_prometheus_cannot_be_read(
    alice: User, project: Project, cluster: Cluster, prometheus_url: str, logged: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    Cluster.objects.filter(pk=cluster.pk).update(
        prometheus_url=prometheus_url.format(port=free_port())
    )
    job = job_of(alice, project, cluster, "ppo")
    held(job, UsageClass.PROGRESSING, 2, datetime.now(UTC) - timedelta(minutes=5), None)
    assert utilisation.measure(Cluster.objects.get(pk=cluster.pk), datetime.now(UTC)) == 0
    assert logged in caplog.text and not PodUtilisation.objects.exists()
