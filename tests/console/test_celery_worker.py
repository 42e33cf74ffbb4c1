"""The real topology: a Celery worker with its embedded beat, over the configured broker (the
embedded SQLite broker by default, Redis in CI), syncs a registered cluster without being asked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from console.models import Cluster, Node
from simcluster.server import SimCluster


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    credentials = f"{db['USER']}:{db['PASSWORD']}"
    return f"postgres://{credentials}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def worker_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(),
        TRAINYARD_VAR_DIR=str(tmp_path),  # a fresh broker file for this run
        TRAINYARD_SYNC_INTERVAL="1",
        # The fresh var dir would give the worker a key of its own: it must read this one's rows.
        TRAINYARD_FIELD_KEYS=",".join(settings.TRAINYARD_FIELD_KEYS),
    )
    return env


@pytest.fixture
def worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    celery = [sys.executable, "-m", "celery", "-A", "console"]
    if settings.REDIS_URL:  # old messages in Redis would replay into this run
        subprocess.run([*celery, "purge", "-f"], env=worker_env, check=True, timeout=60)
    log = (tmp_path / "worker.log").open("wb")
    process = subprocess.Popen(
        [*celery, "worker", "-B", "-s", str(tmp_path / "beat"), "--pool", "solo", "-l", "info"],
        env=worker_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield process
    process.terminate()
    process.wait(timeout=30)
    log.close()


@pytest.mark.django_db(transaction=True)
def test_it_syncs_a_registered_cluster_on_the_beat(
    worker: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    with SimCluster(nodes=2, gpus_per_node=4, speed=20) as sim:
        kubeconfig = tmp_path / "kubeconfig"
        sim.write_kubeconfig(kubeconfig)
        cluster = Cluster.objects.create(name="sim", kubeconfig=kubeconfig.read_text())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and worker.poll() is None:
            cluster.refresh_from_db()
            if cluster.last_synced_at and Node.objects.filter(cluster=cluster).count() == 2:
                break
            time.sleep(0.5)
        log = (tmp_path / "worker.log").read_text(errors="replace")
        assert worker.poll() is None, log
        assert cluster.reachable, log
        assert cluster.last_synced_at is not None, log
        assert set(Node.objects.values_list("phase", flat=True)) == {Node.Phase.ONLINE}
    # The worker's own log, as `make run` shows it (issue 31, item 4): each cycle's summary
    # (written just after the cycle's rows), no line per task received or done nor per beat tick.
    summary = re.compile(r"^sync of cluster sim \(\d+\): (relist|watch): ", re.MULTILINE)
    deadline = time.monotonic() + 20
    while not summary.search(log) and time.monotonic() < deadline:
        time.sleep(0.2)
        log = (tmp_path / "worker.log").read_text(errors="replace")
    assert summary.search(log), log
    assert not re.search(r"Task console\.tasks\.\w+\[[-0-9a-f]+\] (received|succeeded)", log), log
    assert "Sending due task" not in log, log
