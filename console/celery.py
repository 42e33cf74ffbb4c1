"""The Celery app. Tasks are thin: they take ids and call plain functions (console/tasks.py)."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery
from celery.signals import beat_init
from kombu import Connection

# Seconds a probe (/readyz, the queue lengths of /metrics) waits for the broker.
BROKER_TIMEOUT = 3

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
