"""The real path of an operation: its on-commit `reconcile_job.delay()` travels over the
embedded broker to a Celery worker (no beat here, so nothing else could apply the Job)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection

from console.kube.gateway import STATEFULSETS
from console.models import Cluster
from jobs.models import Job, Operation
from tests.engine.conftest import gateway


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return (
        f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "TRAINYARD_VAR_DIR": str(tmp_path),  # a fresh broker file: no stale messages
        "TRAINYARD_FIELD_KEYS": ",".join(settings.TRAINYARD_FIELD_KEYS),  # this run's rows' key
        "PYTHONPATH": str(settings.BASE_DIR),
        "TRAINYARD_LOG_DETAIL": "true",  # the worker's per-task lines, which this test reads
    }


@pytest.fixture
def worker(env: dict[str, str], tmp_path: Path) -> Iterator[Path]:
    log_path = tmp_path / "worker.log"
    celery = [sys.executable, "-m", "celery", "-A", "console"]
    if settings.REDIS_URL:  # old messages in Redis would replay into this run
        subprocess.run([*celery, "purge", "-f"], env=env, check=True, timeout=60)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*celery, "worker", "--pool", "solo", "-l", "info"],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=settings.BASE_DIR,
        )  # fmt: skip
        yield log_path
        process.terminate()
        process.wait(timeout=30)


CREATE = """
import django
django.setup()
from django.contrib.auth.models import User
from jobs import operations
from jobs.spec import parse_job_spec
alice = User.objects.get(username="alice")
spec = parse_job_spec({"name": "queued", "cluster": "sim", "tasks": [
    {"role": "worker", "replicas": 2, "image": "ghcr.io/trainyard/rlinf-trainer:0.4.2"}]}, alice)
print(operations.create_job(alice, spec).pk)
"""


@pytest.mark.django_db(transaction=True)
def test_it_applies_an_operation_through_the_worker(
    alice: User, cluster: Cluster, worker: Path, env: dict[str, str]
) -> None:
    created = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CREATE)],
        env={**env, "DJANGO_SETTINGS_MODULE": "console.settings"},
        capture_output=True, text=True, timeout=60, check=True, cwd=settings.BASE_DIR,
    )  # fmt: skip
    job = Job.objects.get(pk=int(created.stdout.strip()))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the worker logs "succeeded" after the Operation's write
        applied = Operation.objects.filter(job=job, result="applied").exists()
        if applied and "succeeded" in worker.read_text(errors="replace"):
            break
        time.sleep(0.2)
    log = worker.read_text(errors="replace")
    assert Operation.objects.get(job=job).result == "applied", log
    assert "console.tasks.reconcile_job" in log and "succeeded" in log, log
    sts = gateway(cluster).get(STATEFULSETS, "default", "queued-worker")
    assert sts is not None and sts["spec"]["replicas"] == 2
