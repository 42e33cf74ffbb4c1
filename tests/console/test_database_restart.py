"""PostgreSQL restarted under load (issue 13, item 2): bench/database_restart.py's set-up,
CI-sized — a PostgreSQL server of the test's own stopped under a worker, a beat and gunicorn
while an operator stops and resumes Jobs through the API — and the two rules that make it
survivable: a request answers 503 saying the database is not answering, and a cycle that failed
with the database gives its lease back as soon as the database answers."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError
from django.db.backends.utils import CursorWrapper
from django.test import Client

from bench.database_restart import RECOVERY_TARGET, measure, table
from console import tokens
from console.engine import cycle
from console.models import Cluster


def test_it_survives_a_postgresql_restart_under_load() -> None:
    figures = measure(before=6, down=3, after=10)
    report = table(figures) + f"\n{figures}"
    assert figures.alive, report  # no process restarted
    assert all(answer.status for answer in figures.answers), report  # every request answered
    for kinds in (("readyz",), ("stop", "resume")):
        recovered = figures.first_ok_after_up(kinds)
        assert recovered is not None and recovered <= RECOVERY_TARGET, (kinds, report)
    assert figures.synced_after is not None and figures.synced_after <= RECOVERY_TARGET, report
    down = {answer.status for answer in figures.during("down") if answer.kind != "page"}
    assert down <= {200, 503}, report  # 200: asked before the server had stopped
    assert figures.accepted > 0 and figures.stored["applied"] >= figures.accepted, report
    assert figures.stored["accepted"] == figures.stored["failed"] == 0, report
    assert figures.ended == figures.expected, report


def _database_down(*args: Any, **kwargs: Any) -> None:
    raise OperationalError("connection refused")


@pytest.mark.django_db
def test_a_page_and_the_api_answer_503_while_the_database_does_not_answer(alice: User) -> None:
    page, api = Client(raise_request_exception=False), Client(raise_request_exception=False)
    page.force_login(alice)
    token = tokens.issue(alice, "ci", days=1)
    with mock.patch.object(CursorWrapper, "execute", _database_down):
        answered = page.get("/jobs/")
        called = api.get("/api/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert answered.status_code == 503 and answered["Retry-After"] == "5"
    assert "The database is not answering" in answered.content.decode()
    assert called.status_code == 503 and called["Retry-After"] == "5"
    assert called.json()["message_code"] == "database.unavailable"


@pytest.mark.django_db(transaction=True)  # the cycle closes the broken connection
def test_a_cycle_that_failed_with_the_database_gives_its_lease_back_once_it_answers(
    cluster: Cluster,
) -> None:
    finish, attempts = cycle.finish, []
    slept: list[float] = []
    # The cycle's own view of the time module: patching time.sleep itself would make every
    # other thread of the process (a client's, a simulated cluster's) sleep for no time.
    clock = SimpleNamespace(
        monotonic=time.monotonic, process_time=time.process_time, sleep=slept.append
    )

    def finish_once_the_database_answers(cluster_id: int, lease: Any, **fields: Any) -> None:
        attempts.append(lease)
        if len(attempts) < 3:
            raise OperationalError("connection refused")
        finish(cluster_id, lease, **fields)

    with (
        mock.patch.object(cycle, "_cycle", side_effect=OperationalError("server closed")),
        mock.patch.object(cycle, "finish", finish_once_the_database_answers),
        mock.patch.object(cycle, "time", clock),
        pytest.raises(OperationalError, match="server closed"),
    ):
        cycle.sync_cluster(cluster.pk)
    assert len(attempts) == 3 and len(slept) == 2
    cluster.refresh_from_db()
    assert cluster.sync_lease_until is None  # the next tick syncs it
