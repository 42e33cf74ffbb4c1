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
from jobs.models import Job, Signal
from jobs.signals import signal_token

THREADS = 2
ROUNDS = 10


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
