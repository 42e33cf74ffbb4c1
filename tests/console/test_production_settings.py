"""The Celery settings that make faults survivable are what docs/operations.md §Celery under
faults says they are, and follow from the sync interval and the kube timeouts as it explains."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from console.engine import cycle as sync

DOCS = Path(settings.BASE_DIR, "docs", "operations.md")
# The settings a subprocess reports, as read with a given environment.
REPORT = """
import json
from console import settings as s
names = [n for n in dir(s) if n.startswith(("CELERY_", "TRAINYARD_"))]
print(json.dumps({n: getattr(s, n) for n in names} | {"DATABASES": s.DATABASES}, default=repr))
"""
DEFAULTS = (
    "TRAINYARD_SYNC_INTERVAL",
    "TRAINYARD_KUBE_CONNECT_TIMEOUT",
    "TRAINYARD_KUBE_READ_TIMEOUT",
)


def settings_with(**env: str) -> dict[str, Any]:
    """console.settings as a process started with these variables (and no REDIS_URL,
    DATABASE_URL or timing variables of ours unless given) reads them."""
    kept = {
        k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", *DEFAULTS)
    }
    done = subprocess.run(
        [sys.executable, "-c", REPORT], env=kept | env, cwd=settings.BASE_DIR,
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def documented_rows() -> dict[str, str]:
    """`| `NAME` | `value` | why |` rows of the Celery section: name -> value."""
    section = DOCS.read_text().split("## Celery under faults", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \| `([^`]*)` \|", section, re.MULTILINE))


def test_it_gives_sync_and_reconcile_the_sync_lease_as_soft_limit_and_one_call_more_as_hard() -> (
    None
):
    call = settings.TRAINYARD_KUBE_CONNECT_TIMEOUT + settings.TRAINYARD_KUBE_READ_TIMEOUT
    assert settings.TRAINYARD_TASK_SOFT_TIME_LIMIT == sync.lease_seconds()
    assert settings.TRAINYARD_TASK_TIME_LIMIT == sync.lease_seconds() + call
    for name in ("console.tasks.sync_cluster", "console.tasks.reconcile_job"):
        assert settings.CELERY_TASK_ANNOTATIONS[name] == {
            "acks_late": True,
            "soft_time_limit": settings.TRAINYARD_TASK_SOFT_TIME_LIMIT,
            "time_limit": settings.TRAINYARD_TASK_TIME_LIMIT,
        }


def test_it_acknowledges_the_tick_early_and_lets_it_expire_after_one_interval() -> None:
    from console.celery import app
    from console.tasks import reconcile_job, sync_all_clusters, sync_cluster

    app.finalize()
    interval = settings.TRAINYARD_SYNC_INTERVAL
    assert [t.acks_late for t in (sync_cluster, reconcile_job, sync_all_clusters)] == [
        True,
        True,
        False,
    ]
    tick = max(30, 3 * interval)
    assert (sync_all_clusters.soft_time_limit, sync_all_clusters.time_limit) == (tick, 2 * tick)
    assert settings.CELERY_BEAT_SCHEDULE["sync-clusters"]["options"] == {"expires": interval}


def test_it_reads_progress_from_logs_once_a_minute_under_the_syncs_limits() -> None:
    """docs/operations.md: `TRAINYARD_LOG_PROGRESS_SECONDS` and the `read_progress_from_logs`
    row of §Celery under faults."""
    from console.celery import app
    from console.tasks import read_progress_from_logs

    app.finalize()
    entry = settings.CELERY_BEAT_SCHEDULE["progress-from-logs"]
    assert entry["task"] == "console.tasks.read_progress_from_logs"
    assert entry["schedule"] == 60.0 and entry["options"] == {"expires": 60.0}
    limits = (read_progress_from_logs.soft_time_limit, read_progress_from_logs.time_limit)
    assert limits == (settings.TRAINYARD_TASK_SOFT_TIME_LIMIT, settings.TRAINYARD_TASK_TIME_LIMIT)
    assert (
        settings_with(TRAINYARD_LOG_PROGRESS_SECONDS="15")["TRAINYARD_LOG_PROGRESS_SECONDS"] == 15
    )


def test_it_routes_each_task_to_the_queue_of_its_purpose_and_the_dev_worker_takes_all() -> None:
    from console.celery import app

    route = app.amqp.router.route
    queues = {name: route({}, name)["queue"].name for name in settings.CELERY_TASK_ROUTES}
    assert queues == {
        "console.tasks.sync_cluster": "sync",
        "console.tasks.reconcile_job": "reconcile",
    }
    assert route({}, "console.tasks.sync_all_clusters")["queue"].name == "default"
    declared = [(queue.name, queue.routing_key) for queue in settings.CELERY_TASK_QUEUES]
    assert declared == [("default", "default"), ("sync", "sync"), ("reconcile", "reconcile")]
    worker = Path(settings.BASE_DIR, "Procfile.dev").read_text().split("\nworker: ")[1]
    assert "-Q default,sync,reconcile " in worker.split("\n")[0]


def test_it_is_what_the_operations_guide_says_with_the_defaults() -> None:
    defaults = settings_with()
    rows = documented_rows()
    assert set(rows) >= {
        "TRAINYARD_TASK_SOFT_TIME_LIMIT",
        "TRAINYARD_TASK_TIME_LIMIT",
        "TRAINYARD_BROKER_VISIBILITY_TIMEOUT",
        "CELERY_WORKER_PREFETCH_MULTIPLIER",
        "CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS",
        "CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP",
        "CELERY_BROKER_CONNECTION_MAX_RETRIES",
    }
    for name, value in rows.items():
        assert str(defaults[name]) == value, name


def test_it_keeps_a_message_invisible_on_redis_longer_than_a_worker_can_hold_it() -> None:
    fast = settings_with(
        REDIS_URL="redis://127.0.0.1:9/0",
        DATABASE_URL="postgres://trainyard@127.0.0.1:9/trainyard",
        TRAINYARD_SYNC_INTERVAL="1",
        TRAINYARD_KUBE_CONNECT_TIMEOUT="1",
        TRAINYARD_KUBE_READ_TIMEOUT="2",
    )
    assert (fast["TRAINYARD_TASK_SOFT_TIME_LIMIT"], fast["TRAINYARD_TASK_TIME_LIMIT"]) == (11, 14)
    options = fast["CELERY_BROKER_TRANSPORT_OPTIONS"]
    assert options["visibility_timeout"] == 2 * fast["TRAINYARD_TASK_TIME_LIMIT"] == 28
    assert (options["unacked_restore_interval"], options["unacked_restore_throttle"]) == (10, 1)
    database = fast["DATABASES"]["default"]
    assert (database["CONN_MAX_AGE"], database["CONN_HEALTH_CHECKS"]) == (60, True)
    assert database["OPTIONS"] == {
        "connect_timeout": 5, "server_side_binding": True, "prepare_threshold": 5,
    }  # fmt: skip


def test_it_prepares_nothing_when_told_to() -> None:
    """Behind a pooler in transaction mode a connection's prepared statements vanish."""
    pooled = settings_with(
        DATABASE_URL="postgres://trainyard@127.0.0.1:9/trainyard",
        TRAINYARD_DB_PREPARE_THRESHOLD="0",
    )
    options = pooled["DATABASES"]["default"]["OPTIONS"]
    assert (options["server_side_binding"], options["prepare_threshold"]) == (True, None)
    assert "prepare_threshold" not in settings_with()["DATABASES"]["default"]["OPTIONS"]  # SQLite


def test_it_sets_no_redis_options_for_the_embedded_broker() -> None:
    embedded = settings_with()
    assert "CELERY_BROKER_TRANSPORT_OPTIONS" not in embedded
    assert embedded["CELERY_BROKER_TRANSPORT"] == "console.broker:Transport"
