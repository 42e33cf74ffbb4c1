"""Two pods' clients resending the same batch at the same moment: every message is counted
once between them (an insert that ignores conflicts on the unique (job, pod, uid, seq)).
Meaningful on PostgreSQL, where the requests truly run in parallel (DATABASE_URL, .ci/run)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test import Client

from console.models import Cluster
from jobs.models import Job, Signal, WorkloadReport
from jobs.workload.intake import signal_token

THREADS = 2
ROUNDS = 10
JOBS = 20  # Jobs whose pods post at once, one after the other


def post_all(job: Job, batches: list[str], results: list[Any], barrier: threading.Barrier) -> None:
    try:
        client = Client()
        headers = {"Authorization": f"Bearer {signal_token(job.pk, job.run)}"}
        for body in batches:
            barrier.wait(timeout=60)
            response = client.post(
                f"/api/v1/jobs/{job.pk}/signals", body, "application/json", headers=headers
            )
            results.append(response.json())
    except Exception as exc:  # reported by the main thread
        results.append(exc)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_racing_requests_with_the_same_batch_count_each_message_once(
    alice: User, cluster: Cluster, settings: Any
) -> None:
    settings.TRAINYARD_SIGNAL_RATE = 1000
    cache.clear()
    job = Job.objects.create(
        project=alice.memberships.get().project, cluster=cluster, name="ppo", namespace="default",
        spec={"tasks": []},
    )  # fmt: skip
    batches = [
        json.dumps([
            {"kind": "progress", "pod": f"ppo-worker-{n % 4}", "uid": f"uid-{n % 4}",
             "seq": 100 * r + n, "step": n}
            for n in range(50)
        ])
        for r in range(ROUNDS)
    ]  # fmt: skip
    results: list[Any] = []
    barrier = threading.Barrier(THREADS)
    threads = [
        threading.Thread(target=post_all, args=(job, batches, results, barrier))
        for _ in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [r for r in results if not isinstance(r, dict)] == []
    assert sum(r["accepted"] for r in results) == 50 * ROUNDS
    assert sum(r["duplicates"] for r in results) == 50 * ROUNDS * (THREADS - 1)
    assert Signal.objects.filter(job=job).count() == 50 * ROUNDS


@pytest.mark.django_db(transaction=True)
def test_pods_posting_at_once_each_keep_their_word_in_the_report(
    alice: User, cluster: Cluster, settings: Any
) -> None:
    """The fold locks the Job's report row (docs/decisions.md, signals intake): pods posting a
    different kind each at the same moment all find their message in the one report, Job after
    Job; an unlocked read-modify-write loses some (two reads before either write)."""
    settings.TRAINYARD_SIGNAL_RATE = 1000
    cache.clear()
    kinds: dict[str, dict[str, Any]] = {
        "heartbeat": {}, "phase": {"phase": "training"}, "progress": {"step": 1},
        "checkpoint": {"step": 1, "path": "/ckpt/1"},
        "ray": {"expected_nodes": 6, "alive_nodes": 6},
        "completion": {"outcome": "succeeded"},
    }  # fmt: skip
    project = alice.memberships.get().project
    jobs = [
        Job.objects.create(project=project, cluster=cluster, name=f"ppo-{n}",
                           namespace="default", spec={"tasks": []})
        for n in range(JOBS)
    ]  # fmt: skip
    results: list[Any] = []
    barrier = threading.Barrier(len(kinds))
    threads = []
    for n, (kind, fields) in enumerate(kinds.items()):
        batches = [
            json.dumps({"kind": kind, "pod": f"ppo-worker-{n}", "uid": f"uid-{n}", "seq": 1,
                        **fields})
            for _job in jobs
        ]  # fmt: skip
        threads.append(threading.Thread(target=post_each, args=(jobs, batches, results, barrier)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [r for r in results if not isinstance(r, dict)] == []
    reports = WorkloadReport.objects.filter(job__in=jobs)
    assert {report.job_id: sorted(report.latest) for report in reports} == {
        job.pk: sorted(kinds) for job in jobs
    }


def post_each(
    jobs: list[Job], batches: list[str], results: list[Any], barrier: threading.Barrier
) -> None:
    """One batch to each Job in turn, every thread's for the same Job at the same moment."""
    try:
        client = Client()
        for job, body in zip(jobs, batches, strict=True):
            headers = {"Authorization": f"Bearer {signal_token(job.pk, job.run)}"}
            barrier.wait(timeout=60)
            response = client.post(
                f"/api/v1/jobs/{job.pk}/signals", body, "application/json", headers=headers
            )
            results.append(response.json())
    except Exception as exc:  # reported by the main thread
        results.append(exc)
    finally:
        connection.close()
