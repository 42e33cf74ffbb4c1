"""Concurrent stop and resume requests on one Job (spec §Job status; the transitions are
conditional UPDATEs so that racing requests cannot reach an illegal state).

50 threads, each with its own database connection, alternate stop and resume on one Job through
`jobs.operations`. PostgreSQL runs them truly in parallel under row locks; SQLite (a file with
IMMEDIATE transactions) serialises the writers, but the reads that decide still race.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection

from console.models import Cluster
from jobs.choices import Action, JobPhase
from jobs.models import Job, Operation
from jobs.operations import OperationRefused, create_job, resume_job, stop_job
from jobs.spec import parse_job_spec
from tests.jobs.test_spec import job_data

THREADS = 50
ROUNDS = 4
Result = Operation.Result


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


class Recorder:
    """Thread-safe stand-in for `reconcile_job.delay`: counts what was scheduled."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.job_ids: list[int] = []

    def __call__(self, job_id: int) -> None:
        with self.lock:
            self.job_ids.append(job_id)


def hammer(user: User, job_id: int, index: int, outcomes: Counter[str], errors: list[Any],
           barrier: threading.Barrier) -> None:  # fmt: skip
    try:
        job = Job.objects.select_related("project").get(pk=job_id)
        barrier.wait(timeout=60)
        for step in range(ROUNDS):
            operate = stop_job if (index + step) % 2 == 0 else resume_job
            try:
                operate(user, job)
                outcomes[f"{operate.__name__}:accepted"] += 1
            except OperationRefused:
                outcomes[f"{operate.__name__}:refused"] += 1
    except Exception as exc:  # reported by the main thread
        errors.append(exc)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_it_ends_in_one_legal_state_with_one_operation_per_transition(
    alice: User, cluster: Cluster
) -> None:
    recorder = Recorder()
    with mock.patch("console.tasks.reconcile_job.delay", recorder):
        job = create_job(alice, parse_job_spec(job_data(), alice))
        Job.objects.filter(pk=job.pk).update(phase=JobPhase.RUNNING)
        recorder.job_ids.clear()
        outcomes: Counter[str] = Counter()
        errors: list[Any] = []
        barrier = threading.Barrier(THREADS)
        threads = [
            threading.Thread(target=hammer, args=(alice, job.pk, i, outcomes, errors, barrier))
            for i in range(THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    assert errors == []
    assert sum(outcomes.values()) == THREADS * ROUNDS

    job.refresh_from_db()
    assert (job.phase, job.stopped) in {(JobPhase.STOPPED, True), (JobPhase.PENDING, False)}

    accepted = list(
        Operation.objects.filter(job=job, result=Result.ACCEPTED)
        .exclude(action=Action.CREATE)
        .order_by("pk")
        .values_list("action", flat=True)
    )
    # Every accepted operation is a real transition: stop, resume, stop, ... from Running.
    assert accepted == [Action.STOP, Action.RESUME] * (len(accepted) // 2) + [Action.STOP] * (
        len(accepted) % 2
    )
    assert len(accepted) >= 2
    assert job.stopped == (accepted[-1] == Action.STOP)
    assert accepted.count(Action.STOP) == outcomes["stop_job:accepted"]
    assert accepted.count(Action.RESUME) == outcomes["resume_job:accepted"]
    assert job.run == 1 + outcomes["resume_job:accepted"]

    refused = Operation.objects.filter(job=job, result=Result.REFUSED).count()
    assert refused == outcomes["stop_job:refused"] + outcomes["resume_job:refused"]
    assert recorder.job_ids == [job.pk] * len(accepted)
    assert sorted(job.tasks.values_list("role", flat=True)) == ["head", "worker"]
