"""Health probes, /metrics and structured logs (issue 13, item 6; docs/operations.md, "Health
and metrics").

The probes are tried with the database and the broker really down: a process of its own started
with DATABASE_URL and REDIS_URL naming a closed port. /metrics is scraped and read back with
prometheus-client's own parser."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from kombu import Connection
from prometheus_client.parser import text_string_to_metric_families

from console import metrics
from console.celery import app as celery_app
from console.engine.cycle import SyncResult
from console.models import Cluster, SyncStats
from console.structured_logging import JsonFormatter, log_context
from console.tasks import sync_cluster
from jobs.choices import JobPhase
from jobs.models import Job
from tests.processes import free_port, redis_server

POD = "10.42.0.7:8000"  # a probe's or a scrape's Host: the pod's address, not an allowed host
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
PROBE = """
import django, json
django.setup()
from django.test import Client
answers = {path: Client().get(path, HTTP_HOST="10.42.0.7:8000") for path in ("/healthz", "/readyz")}
print(json.dumps({path: [r.status_code, r.content.decode()] for path, r in answers.items()}))
"""


def probe(tmp_path: Path, database_down: bool, broker_down: bool) -> dict[str, Any]:
    """/healthz and /readyz as a web process configured this way answers them."""
    closed = free_port()  # nothing listens there
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env |= {"TRAINYARD_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "console.settings"}
    if database_down:
        env["DATABASE_URL"] = f"postgres://trainyard@127.0.0.1:{closed}/trainyard"
    if broker_down:
        env["REDIS_URL"] = f"redis://127.0.0.1:{closed}/0"
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=settings.BASE_DIR,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answers: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return {path: (status, body) for path, (status, body) in answers.items()}


@pytest.mark.parametrize(
    ("database_down", "broker_down", "ready"),
    [
        (False, False, {"database": "ok", "broker": "ok"}),
        (True, False, {"database": "unavailable (OperationalError)", "broker": "ok"}),
        (False, True, {"database": "ok", "broker": "unavailable (OperationalError)"}),
        (
            True,
            True,
            {
                "database": "unavailable (OperationalError)",
                "broker": "unavailable (OperationalError)",
            },
        ),
    ],
)
def test_it_is_alive_whatever_is_down_and_ready_only_when_both_answer(
    tmp_path: Path, database_down: bool, broker_down: bool, ready: dict[str, str]
) -> None:
    answers = probe(tmp_path, database_down, broker_down)
    assert answers["/healthz"] == (200, "ok\n")
    status, body = answers["/readyz"]
    assert (status, json.loads(body)) == (503 if database_down or broker_down else 200, ready)


@pytest.mark.django_db
def test_it_answers_the_probes_for_anyone_at_the_pods_address_without_a_session(
    django_assert_num_queries: Any,
) -> None:
    client = Client()
    with django_assert_num_queries(0):
        assert client.get("/healthz", HTTP_HOST=POD).status_code == 200
    assert client.get("/readyz", HTTP_HOST=POD).status_code == 200
    assert client.post("/healthz", HTTP_HOST=POD).status_code == 405
    assert client.get("/", HTTP_HOST=POD).status_code == 400  # the pages still check the host


# --- /metrics ---------------------------------------------------------------------------------


def scrape(client: Client, token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.get("/metrics", HTTP_HOST=POD, headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    families = text_string_to_metric_families(response.content.decode())
    return {family.name: family for family in families}


def samples(family: Any, name: str | None = None) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of a family (or its `name` series) by their sorted labels."""
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for sample in family.samples
        if name is None or sample.name == name
    }


@pytest.fixture
def clusters(db: None) -> Iterator[tuple[Cluster, Cluster]]:
    with time_machine.travel(NOW, tick=False):
        gpu_a = Cluster.objects.create(
            name="gpu-a", kubeconfig="-", reachable=True,
            last_synced_at=NOW - timedelta(seconds=30), last_attempt_at=NOW - timedelta(seconds=5),
        )  # fmt: skip
        gpu_b = Cluster.objects.create(name="gpu-b", kubeconfig="-")
        yield gpu_a, gpu_b


def test_it_shows_reachability_sync_age_and_jobs_by_phase(
    clusters: tuple[Cluster, Cluster], alice: User
) -> None:
    gpu_a, _ = clusters
    for name, phase in [("a", JobPhase.RUNNING), ("b", JobPhase.RUNNING), ("c", JobPhase.FAILED)]:
        Job.objects.create(project=alice.memberships.get().project, name=name, cluster=gpu_a,
                           namespace="default", spec={"tasks": []}, phase=phase)  # fmt: skip
    Job.objects.filter(name="c").update(delete_requested_at=NOW)  # gone for its users

    families = scrape(Client())
    assert samples(families["trainyard_cluster_reachable"]) == {
        (("cluster", "gpu-a"),): 1.0,
        (("cluster", "gpu-b"),): 0.0,
    }
    assert samples(families["trainyard_cluster_sync_age_seconds"]) == {
        (("cluster", "gpu-a"),): 30.0
    }
    synced = samples(families["trainyard_cluster_last_sync_timestamp_seconds"])
    assert synced == {(("cluster", "gpu-a"),): (NOW - timedelta(seconds=30)).timestamp()}
    jobs = samples(families["trainyard_jobs"])
    assert jobs[(("cluster", "gpu-a"), ("phase", "Running"))] == 2.0
    assert jobs[(("cluster", "gpu-a"), ("phase", "Failed"))] == 0.0
    assert len(jobs) == 2 * len(JobPhase.values)


def test_it_adds_up_every_cycle_a_worker_recorded_by_cluster_and_result(
    clusters: tuple[Cluster, Cluster],
) -> None:
    gpu_a, gpu_b = clusters
    cycle = SyncResult(gpu_a.pk, "gpu-a", reachable=True, cpu_seconds=0.1, api_requests=8,
                       bytes_received=1000, rows_written=3)  # fmt: skip
    for seconds in (0.05, 0.3, 0.3, 200.0):
        metrics.record_sync(SyncResult(**{**cycle.__dict__, "seconds": seconds}))
    metrics.record_sync(SyncResult(gpu_b.pk, "gpu-b", message="refused", seconds=5.0))
    metrics.record_sync(SyncResult(gpu_a.pk, skipped=True, seconds=0.01))
    metrics.record_failed_sync(gpu_b.pk, 101.0)

    family = scrape(Client())["trainyard_sync_duration_seconds"]
    synced = {k: v for k, v in samples(family, "trainyard_sync_duration_seconds_bucket").items()
              if ("result", "synced") in k}  # fmt: skip
    assert synced[(("cluster", "gpu-a"), ("le", "0.1"), ("result", "synced"))] == 1
    assert synced[(("cluster", "gpu-a"), ("le", "0.5"), ("result", "synced"))] == 3
    assert synced[(("cluster", "gpu-a"), ("le", "120.0"), ("result", "synced"))] == 3
    assert synced[(("cluster", "gpu-a"), ("le", "+Inf"), ("result", "synced"))] == 4
    counts = samples(family, "trainyard_sync_duration_seconds_count")
    assert counts == {
        (("cluster", "gpu-a"), ("result", "synced")): 4,
        (("cluster", "gpu-a"), ("result", "skipped")): 1,
        (("cluster", "gpu-b"), ("result", "unreachable")): 1,
        (("cluster", "gpu-b"), ("result", "failed")): 1,
    }
    sums = samples(family, "trainyard_sync_duration_seconds_sum")
    assert sums[(("cluster", "gpu-a"), ("result", "synced"))] == pytest.approx(200.65)
    requests = samples(scrape(Client())["trainyard_sync_api_requests"])
    assert requests[(("cluster", "gpu-a"),)] == 32


@pytest.mark.django_db
def test_it_records_the_cycle_a_sync_task_ran_and_names_its_cluster_in_the_log(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="console.tasks"):
        sync_cluster(cluster.pk)  # nothing answers for this cluster
    stats = SyncStats.objects.get(cluster=cluster)
    assert (stats.result, stats.cycles) == (SyncStats.Result.UNREACHABLE, 1)
    record = next(r for r in caplog.records if r.name == "console.tasks")
    line = json.loads(JsonFormatter().format(record))
    # An unreachable cluster's summary is the cycle's warning (issue 31, item 4).
    assert (line["cluster"], line["skipped"], line["level"]) == ("gpu-a", False, "WARNING")
    assert "UNREACHABLE" in line["message"]


@pytest.mark.django_db
def test_it_measures_each_page_and_api_call_by_its_url_name(alice: User) -> None:
    client = Client()
    client.force_login(alice)
    client.get("/jobs/")
    client.get("/jobs/", headers={"HX-Request": "true"})
    client.get("/no-such-page/")
    family = scrape(client)["trainyard_http_request_duration_seconds"]
    counts = samples(family, "trainyard_http_request_duration_seconds_count")
    assert counts[(("method", "GET"), ("status", "200"), ("view", "jobs"))] >= 2
    assert counts[(("method", "GET"), ("status", "404"), ("view", "unmatched"))] >= 1


@pytest.mark.django_db
def test_it_counts_the_messages_waiting_in_each_queue_of_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with redis_server(tmp_path) as redis_url:
        monkeypatch.setitem(celery_app.conf, "broker_url", redis_url)
        monkeypatch.setitem(celery_app.conf, "broker_transport", None)
        before = samples(scrape(Client())["trainyard_celery_queue_length"])
        with Connection(redis_url) as broker:
            for cluster_id in (1, 2, 3):
                sync_cluster.apply_async((cluster_id,), connection=broker)
        after = samples(scrape(Client())["trainyard_celery_queue_length"])
        with Connection(redis_url) as broker:
            broker.default_channel.queue_purge("sync")
    assert set(after) == {(("queue", "default"),), (("queue", "sync"),), (("queue", "reconcile"),)}
    assert after[(("queue", "sync"),)] - before[(("queue", "sync"),)] == 3
    assert after[(("queue", "reconcile"),)] == before[(("queue", "reconcile"),)]


def test_it_answers_a_scrape_without_the_token_with_401(settings: Any, db: None) -> None:
    settings.TRAINYARD_METRICS_TOKEN = "scrape-me"
    client = Client()
    assert client.get("/metrics", HTTP_HOST=POD).status_code == 401
    wrong = client.get("/metrics", HTTP_HOST=POD, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong["WWW-Authenticate"].startswith("Bearer")
    assert "trainyard_jobs" in scrape(client, token="scrape-me")


# --- structured logs --------------------------------------------------------------------------


def test_it_writes_one_json_line_per_event_with_the_ids_of_its_context() -> None:
    record = logging.makeLogRecord(
        {"name": "console.engine.cycle", "levelno": logging.WARNING, "levelname": "WARNING",
         "msg": "cluster %s unreachable", "args": ("gpu-a",), "job_id": 7}
    )  # fmt: skip
    with log_context(cluster_id=3):
        line = JsonFormatter().format(record)
    assert "\n" not in line
    event = json.loads(line)
    assert event["message"] == "cluster gpu-a unreachable"
    assert (event["cluster_id"], event["job_id"], event["logger"]) == (3, 7, "console.engine.cycle")
    assert "cluster_id" not in json.loads(JsonFormatter().format(record))


def test_it_refuses_a_log_format_it_does_not_know(tmp_path: Path) -> None:
    env = dict(os.environ, TRAINYARD_LOG_FORMAT="xml", TRAINYARD_VAR_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", "import console.settings"],
        env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "TRAINYARD_LOG_FORMAT must be one of text, json" in done.stderr


def test_it_warns_a_deployment_check_of_an_open_metrics_endpoint(settings: Any, db: None) -> None:
    from django.core.checks import run_checks

    settings.TRAINYARD_METRICS_TOKEN = ""
    assert "trainyard.W001" in {m.id for m in run_checks(include_deployment_checks=True)}
    settings.TRAINYARD_METRICS_TOKEN = "scrape-me"
    assert "trainyard.W001" not in {m.id for m in run_checks(include_deployment_checks=True)}
