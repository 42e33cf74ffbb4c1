"""A Celery task keeps its database connection as a web request does (console.celery)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from celery.fixups.django import DjangoWorkerFixup
from celery.signals import task_postrun, task_prerun
from django.db import connection

from console.celery import app

pytestmark = pytest.mark.django_db(transaction=True)


class _Task:
    request = SimpleNamespace(is_eager=False)


def _run_a_task(fixup: DjangoWorkerFixup) -> None:
    """What a worker does around a task: the fixup's handlers and every other receiver."""
    sender = _Task()
    fixup.on_task_prerun(sender)
    task_prerun.send(sender=sender)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    fixup.on_task_postrun(sender)
    task_postrun.send(sender=sender)


def test_tasks_share_one_connection_until_it_is_too_old(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)  # PostgreSQL's setting
    fixup = DjangoWorkerFixup(app)
    connection.close()
    connection.ensure_connection()
    opened = connection.connection
    for _ in range(20):
        _run_a_task(fixup)
    assert connection.connection is opened

    connection.close_at = time.monotonic() - 1  # past CONN_MAX_AGE
    _run_a_task(fixup)
    assert connection.connection is not None and connection.connection is not opened
