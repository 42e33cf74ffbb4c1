"""The Celery app. Tasks are thin: they take ids and call plain functions (console/tasks.py)."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery
from celery.signals import beat_init, task_postrun, task_prerun
from kombu import Connection

# Seconds a probe (/readyz, the queue lengths of /metrics) waits for the broker.
BROKER_TIMEOUT = 3

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Celery's Django fixup closes the database connection before and after every task unless this
# is set (then it closes it every 2 x this many tasks): each reconcile and each sync opened a
# new connection, and PostgreSQL forked a backend for it, warmed its caches and threw it away.
# Tasks keep their connection as the web processes do, for CONN_MAX_AGE with health checks
# (`_old_connections_closed`, below).
app.conf["CELERY_DB_REUSE_MAX"] = 1_000


@contextmanager
def broker_connection() -> Iterator[Connection]:
    """A connection to the broker that gives up after BROKER_TIMEOUT instead of retrying for as
    long as a worker would."""
    with app.connection_for_read() as broker:
        broker.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT)
        yield broker


@beat_init.connect
def _record_policies(**_: Any) -> None:
    """The beat process (one per installation) records deploy-time policy changes as it starts."""
    from console.policies import record_if_changed

    record_if_changed()


@task_prerun.connect
@task_postrun.connect
def _old_connections_closed(**_: Any) -> None:
    """As Django does around each request: a connection past CONN_MAX_AGE, or one that failed
    (a database restart), is closed, and the next query opens a new one."""
    from django.db import close_old_connections

    close_old_connections()
