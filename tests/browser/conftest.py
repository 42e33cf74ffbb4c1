"""Browser tests: Debian's Chromium driven by Playwright against Django's live server, with an
in-process simcluster registered as a Cluster and synced in the background (STACK.md "Browser
tests")."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import Page, expect

from console.engine.cycle import sync_cluster
from console.models import Cluster
from simcluster.server import SimCluster
from tests.conftest import open_to_every_project

# Playwright's sync API runs an event loop in the test's thread; the ORM calls made there (the
# fixtures, the assertions) are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]
# `make screenshots` refreshes the pictures kept in docs/screenshots/; a plain test run writes
# them under var/ so that it never changes a tracked file.
SCREENSHOTS = Path(os.environ.get("TRAINYARD_SCREENSHOTS_DIR") or ROOT / "var" / "screenshots")


@pytest.fixture(scope="session")
def base_url() -> str | None:
    """pytest-playwright's own fallback is a fixture method, deprecated by pytest (an error with
    warnings as errors); the tests build their URLs from `live_server`."""
    return None


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "viewport": {"width": 1280, "height": 800}, "locale": "en-US",
            "timezone_id": "UTC"}  # fmt: skip


PASSWORD = "a-long-password"


def log_in(page: Page, base: str, username: str = "alice", landing: str = "/") -> None:
    """Through the login form, as a person would; waits until the landing page is shown."""
    suffix = f"?next={landing}" if landing != "/" else ""
    page.goto(f"{base}/accounts/login/{suffix}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit].primary")
    expect(page).to_have_url(f"{base}{landing}")


def shoot(page: Page, folder: Path, name: str) -> None:
    page.screenshot(path=str(folder / name), full_page=True)


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


class Syncer:
    """Runs `console.engine.cycle.sync_cluster` every `interval` seconds in a thread, as the beat
    would.
    `paused()` holds it between two cycles, so a test can see a state before the sync moves on."""

    def __init__(self, cluster_id: int, interval: float = 0.5) -> None:
        self.cluster_id, self.interval = cluster_id, interval
        self.errors: list[BaseException] = []
        self._stop, self._running = threading.Event(), threading.Event()
        self._idle = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="syncer", daemon=True)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                with self._idle:
                    if self._running.is_set():
                        sync_cluster(self.cluster_id)
        except BaseException as error:  # reported by the fixture, not lost in the thread
            self.errors.append(error)
        finally:
            connection.close()

    def start(self) -> None:
        self._running.set()
        self._thread.start()

    def pause(self) -> None:
        """Returns once no cycle is in progress; none starts until `resume()`."""
        self._running.clear()
        with self._idle:
            pass

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=3, gpus_per_node=4, speed=10) as cluster:
        yield cluster


@pytest.fixture
def sim_cluster(sim: SimCluster, tmp_path: Path, transactional_db: None) -> Cluster:
    """The simcluster registered as the console's Cluster named `sim`, which every project
    of the test may use."""
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    return open_to_every_project(
        Cluster.objects.create(name="sim", kubeconfig=kubeconfig.read_text())
    )


@pytest.fixture
def syncer(sim_cluster: Cluster) -> Iterator[Syncer]:
    running = Syncer(sim_cluster.pk)
    running.start()
    yield running
    running.stop()
    assert not running.errors, running.errors
