"""Concurrent stop and resume requests on one Job (spec §Job status; the transitions are
conditional UPDATEs so that racing requests cannot reach an illegal state).

50 threads, each with its own database connection, alternate stop and resume on one Job through
`jobs.operations`. PostgreSQL runs them truly in parallel under row locks; SQLite (a file with
IMMEDIATE transactions) serialises the writers, but the reads that decide still race.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from console.engine.one_job import reconcile_job
from console.kube import MANAGED_SELECTOR
from console.kube.gateway import STATEFULSETS
from console.models import ApiToken, Cluster
from jobs.choices import Action, JobPhase
from jobs.models import Job, Operation
from jobs.operations import OperationRefused, create_job, resume_job, stop_job
from jobs.spec import parse_job_spec
from simcluster.server import SimCluster
from tests.conftest import register_sim
from tests.engine.conftest import gateway, sync_until, task
from tests.jobs.test_spec import job_data

THREADS = 50
ROUNDS = 4
Result = Operation.Result


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def told(counts: Counter[str]) -> str:
    """What a race's requests got, for docs/benchmarks.md (bench/races.py)."""
    return ", ".join(f"{key.replace('_job:', ' ')}: {n}" for key, n in sorted(counts.items()))


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
    alice: User, cluster: Cluster, record_property: Callable[[str, object], None]
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
    record_property("seen", told(outcomes))

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


# --- stop, resume, clone and delete at once, through the API ---------------------------------

API_THREADS = 24
API_ROUNDS = 4
ACTIONS = ("stop", "resume", "clone")


def request_operation(client: Client, token: str, job: Job, action: str, copy: str) -> int:
    """One API request; its status code."""
    headers = {"Authorization": f"Bearer {token}"}
    path = f"/api/v1/jobs/{job.pk}"
    if action == "delete":
        return client.delete(f"{path}?confirm={job.name}", headers=headers).status_code
    body = json.dumps({"name": copy}) if action == "clone" else "{}"
    post = client.post(f"{path}/{action}", body, "application/json", headers=headers)
    return post.status_code


def in_parallel(count: int, work: Callable[[int], None]) -> list[Exception]:
    """Runs `work(index)` in `count` threads released together, each with its own database
    connection; returns what they raised."""
    errors: list[Exception] = []
    barrier = threading.Barrier(count)

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=60)
            work(index)
        except Exception as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return errors


@pytest.mark.django_db(transaction=True)
def test_it_takes_one_delete_and_keeps_every_other_operation_legal_under_a_crowd(
    alice: User, cluster: Cluster, record_property: Callable[[str, object], None]
) -> None:
    """Spec §Stop, resume or delete: 24 API clients at once each send stop, resume and clone in
    turn, and every third one a delete last. One delete is accepted; before it, accepted stops
    and resumes alternate; after it, a request finds no Job (404) or is refused (409); each clone
    is a new Job; each request that found the Job leaves exactly one Operation."""
    recorder = Recorder()
    token = ApiToken.issue(alice, name="crowd")[1]
    with mock.patch("console.tasks.reconcile_job.delay", recorder):
        job = create_job(alice, parse_job_spec(job_data(), alice))
        Job.objects.filter(pk=job.pk).update(phase=JobPhase.RUNNING)
        recorder.job_ids.clear()
        statuses: Counter[tuple[str, int]] = Counter()

        def operate(index: int) -> None:
            client = Client()
            for step in range(API_ROUNDS):
                last = step == API_ROUNDS - 1
                action = "delete" if last and index % 3 == 0 else ACTIONS[(index + step) % 3]
                status = request_operation(client, token, job, action, f"copy-{index}-{step}")
                statuses[(action, status)] += 1

        errors = in_parallel(API_THREADS, operate)
    assert errors == []
    assert sum(statuses.values()) == API_THREADS * API_ROUNDS
    record_property("seen", told(Counter({f"{a} {s}": n for (a, s), n in statuses.items()})))
    # After the delete, a request either finds the Job gone (404) or is refused (409).
    assert {status for (action, status) in statuses if action != "clone"} <= {200, 202, 404, 409}
    assert {status for (action, status) in statuses if action == "clone"} <= {201, 404}

    operations = Operation.objects.filter(job=job).exclude(action=Action.CREATE).order_by("pk")
    accepted = [op.action for op in operations if op.result == Result.ACCEPTED]
    assert accepted.count(Action.DELETE) == 1 and accepted[-1] == Action.DELETE
    transitions = accepted[:-1]
    assert transitions == [Action.STOP, Action.RESUME] * (len(transitions) // 2) + [Action.STOP] * (
        len(transitions) % 2
    )
    # A refusal answers 409, an acceptance 200 or 202 (or 404 when the delete landed between
    # the acceptance and its answer): one Operation per request that found the Job.
    refused = operations.filter(result=Result.REFUSED).count()
    assert refused == sum(n for (_action, status), n in statuses.items() if status == 409)
    assert accepted.count(Action.DELETE) == statuses[("delete", 202)]
    for action in ("stop", "resume"):
        answered = statuses[(action, 200)]
        assert answered <= accepted.count(Action(action)) <= answered + statuses[(action, 404)]
    assert transitions, statuses

    job.refresh_from_db()
    assert job.delete_requested_at is not None
    expected = {"": (JobPhase.RUNNING, False), Action.STOP: (JobPhase.STOPPED, True)}
    last = transitions[-1] if transitions else ""
    assert (job.phase, job.stopped) == expected.get(last, (JobPhase.PENDING, False))

    clones = Job.objects.filter(cloned_from=job)
    assert clones.count() == statuses[("clone", 201)]
    clone_operations = Operation.objects.filter(job__in=clones, action=Action.CLONE)
    assert clone_operations.filter(result=Result.ACCEPTED).count() == clones.count()
    scheduled = Counter(recorder.job_ids)
    assert scheduled[job.pk] == len(accepted)
    assert all(scheduled[pk] == 1 for pk in clones.values_list("pk", flat=True))


# --- the same name created at once ------------------------------------------------------------

CREATORS = 16


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=8, speed=100) as cluster:
        yield cluster


@pytest.fixture
def sim_cluster(db: None, sim: SimCluster, tmp_path: Path) -> Cluster:
    return register_sim(sim, tmp_path)


@pytest.mark.django_db(transaction=True)
def test_it_creates_one_job_and_one_statefulset_per_task_when_a_name_is_sent_at_once(
    alice: User, sim_cluster: Cluster, record_property: Callable[[str, object], None]
) -> None:
    """16 API clients create the same Job at once: one 201, the others 422 naming the field; then
    the reconciles (all at once too, as redelivered messages would) and a sync make exactly one
    StatefulSet per Task."""
    token = ApiToken.issue(alice, name="creators")[1]
    body = json.dumps({"name": "twin", "cluster": "sim", "tasks": [task("head"), task("worker")]})
    statuses: Counter[int] = Counter()

    def create(index: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        statuses[
            Client().post("/api/v1/jobs", body, "application/json", headers=headers).status_code
        ] += 1

    recorder = Recorder()
    with mock.patch("console.tasks.reconcile_job.delay", recorder):
        assert in_parallel(CREATORS, create) == []
    record_property("seen", told(Counter({f"create {s}": n for s, n in statuses.items()})))
    assert statuses == {201: 1, 422: CREATORS - 1}
    job = Job.objects.get(name="twin")
    assert Operation.objects.filter(job=job).values_list("action", "result").get() == (
        Action.CREATE,
        Result.ACCEPTED,
    )
    assert recorder.job_ids == [job.pk]

    assert in_parallel(8, lambda _index: reconcile_job(job.pk)) == []
    sync_until(sim_cluster, lambda: job.tasks.filter(applied_at__isnull=False).count() == 2)
    listed = gateway(sim_cluster).list(STATEFULSETS, MANAGED_SELECTOR, "default")
    assert sorted(item["metadata"]["name"] for item in listed) == ["twin-head", "twin-worker"]
    assert not job.tasks.exclude(apply_error="").exists()
