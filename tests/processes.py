"""Real processes for the tests that need them: Celery workers and beats over a real broker, a
Redis server of the test's own, and a gate that holds a simcluster request so that a test knows a
worker is in the middle of a task."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

from simcluster.api import Request, Response
from simcluster.server import SimCluster

CELERY = [sys.executable, "-m", "celery", "-A", "console"]


def database_url() -> str:
    """The test database, for a process started by the test."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    credentials = f"{db['USER']}:{db['PASSWORD']}"
    return f"postgres://{credentials}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Polls `condition()` every 0.2 s; fails naming `what` when it is still false at the end."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.2)


@contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """CI's Redis (REDIS_URL, set by .ci/run) or, without one, a redis-server of this test's own."""
    if settings.REDIS_URL:
        yield settings.REDIS_URL
        return
    with own_redis_server(directory, free_port()) as url:
        yield url


@contextmanager
def own_redis_server(directory: Path, port: int) -> Iterator[str]:
    """A redis-server of the test's own on `port`, keeping nothing on disk. Never the machine's
    own: a test may stop this one."""
    binary = shutil.which("redis-server")
    assert binary, "this test needs redis-server (scripts/ensure-test-tools installs it)"
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(directory)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: _answers(port), 20, f"redis-server on port {port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=20)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as peer:
            peer.sendall(b"PING\r\n")
            return peer.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class Processes:
    """Starts Celery processes in sessions of their own (so that a SIGKILL reaches a worker's pool
    processes too, as when its container dies) and stops whatever is left at the end."""

    def __init__(self, env: dict[str, str], directory: Path) -> None:
        self.env = env
        self.directory = directory
        self.started: list[subprocess.Popen[bytes]] = []

    def purge(self) -> None:
        """Old messages in a shared Redis would replay into this run."""
        subprocess.run([*CELERY, "purge", "-f"], env=self.env, check=True, timeout=60,
                       capture_output=True, cwd=settings.BASE_DIR)  # fmt: skip

    def start(self, name: str, *args: str, command: list[str] = CELERY) -> subprocess.Popen[bytes]:
        log = (self.directory / f"{name}.log").open("ab")
        process = subprocess.Popen(
            [*command, *args], env=self.env, stdout=log, stderr=subprocess.STDOUT,
            cwd=settings.BASE_DIR, start_new_session=True,
        )  # fmt: skip
        log.close()
        self.started.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.directory / f"{name}.log").read_text(errors="replace")

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL to the process and every process it started: nothing runs any clean-up."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def stop_all(self) -> None:
        """A warm stop (SIGTERM to the main process, as Kubernetes does), then SIGKILL to
        whatever of its session is left."""
        for process in self.started:
            if process.poll() is None:
                process.terminate()
        for process in self.started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=20)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


class Gate:
    """Holds the first simcluster request of `method` whose path ends with `suffix` until
    released, then drops it unanswered by the cluster (the API server never applies it): the
    worker that sent it is provably in the middle of its task, and only a later task can do
    the work."""

    def __init__(self, sim: SimCluster, method: str, suffix: str) -> None:
        self.arrived = threading.Event()
        self.released = threading.Event()
        self._handle = sim.handle
        self._method, self._suffix = method, suffix
        sim.handle = self.handle  # type: ignore[method-assign]

    def handle(self, request: Request) -> Response:
        held = request.method == self._method and request.path.endswith(self._suffix)
        if held and not self.arrived.is_set():
            self.arrived.set()
            self.released.wait(60)
            return Response(503, b"{}")
        return self._handle(request)


def prometheus_binary() -> str:
    """Debian's prometheus, installed through scripts/ensure-test-tools when missing."""
    if shutil.which("prometheus") is None:
        subprocess.run([str(settings.BASE_DIR / "scripts" / "ensure-test-tools")], check=True)
    binary = shutil.which("prometheus")
    assert binary, "this test needs prometheus (scripts/ensure-test-tools installs it)"
    return binary


@contextmanager
def prometheus_server(directory: Path, target: str, metrics_path: str) -> Iterator[str]:
    """A Prometheus of the test's own on a free port, scraping `target` every second, with its
    storage under `directory`; stopped at the end. Yields its URL once it is ready."""
    port = free_port()
    config = directory / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: dcgm\n    honor_labels: true\n"
        f"    metrics_path: {metrics_path}\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    with (directory / "prometheus.log").open("ab") as log:
        server = subprocess.Popen(
            [prometheus_binary(), f"--config.file={config}",
             f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(url), 30, f"prometheus on port {port}")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
