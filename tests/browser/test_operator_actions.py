"""An operator's walk in a real browser (issue 36, Show): register a cluster, cordon a node with
a reason, drain it against a PodDisruptionBudget that allows no disruption (Partly drained,
naming the budget), install an add-on and upgrade it to an image that never pulls (Failed);
then the same pages in 简体中文 and at 390 px. Each page is saved in the screenshots folder
(`make screenshots` refreshes docs/screenshots/) to be looked at."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from console.engine.addons import advance_attempt
from console.engine.cycle import sync_cluster
from console.engine.nodes import advance_drain
from console.models import AddonAttempt, Cluster, DrainRun, Node
from simcluster.resources import RESOURCES
from simcluster.server import SimCluster
from tests.browser.conftest import PASSWORD, log_in, shoot
from tests.conftest import make_operator

pytestmark = pytest.mark.browser
NODE = "sim-node-0"


def manifest(image: str) -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: metrics-agent}\n"
        "spec:\n  replicas: 1\n  progressDeadlineSeconds: 20\n"
        "  selector: {matchLabels: {app: metrics-agent}}\n"
        "  template:\n    metadata: {labels: {app: metrics-agent}}\n"
        f"    spec:\n      containers: [{{name: main, image: '{image}'}}]\n"
    )


@pytest.fixture
def olga(transactional_db: None) -> User:
    return make_operator(User.objects.create_user("olga", password=PASSWORD))


def budgeted_api(sim: SimCluster) -> None:
    """A Deployment pinned to the node and a budget that allows no disruption of it."""
    labels = {"app": "api"}
    pod = {"nodeSelector": {"kubernetes.io/hostname": NODE},
           "containers": [{"name": "main", "image": "nginx:1.27"}]}  # fmt: skip
    template = {"metadata": {"labels": labels}, "spec": pod}
    spec = {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}
    deployment = {"metadata": {"name": "api"}, "spec": spec}
    budget = {"metadata": {"name": "api-pdb"},
              "spec": {"selector": {"matchLabels": labels}, "minAvailable": 1}}  # fmt: skip
    with sim.cluster.store.lock:
        sim.cluster.writer.create(RESOURCES["deployments"], "default", deployment)
        sim.cluster.writer.create(RESOURCES["poddisruptionbudgets"], "default", budget)
    sim.advance(10)


def until_done(step: Any, ident: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while step(ident) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def walk(page: Page, base: str, sim: SimCluster, folder: Path) -> None:
    page.goto(f"{base}/clusters/new/")
    page.fill("#name", "sim")
    page.fill("#server", sim.url)
    page.fill("#token", sim.token)
    page.check('#register-form input[name="insecure"]')  # simcluster speaks plain http://
    shoot(page, folder, "cluster-register.png")
    page.click("#register-form button[type=submit]")
    expect(page).to_have_url(f"{base}/clusters/sim/")
    expect(page.locator("#insecure")).to_contain_text("TLS not verified")
    expect(page.locator('[data-permission="patch core/nodes"]')).to_have_attribute(
        "data-allowed", "yes"
    )
    shoot(page, folder, "cluster-checklist.png")
    cluster = Cluster.objects.get(name="sim")
    for _ in range(3):
        sync_cluster(cluster.pk)
    assert Node.objects.filter(cluster=cluster).count() == 3
    budgeted_api(sim)

    page.goto(f"{base}/nodes/sim/{NODE}/")
    page.fill("#cordon-reason", "replace the NIC")
    page.click("#cordon-form button[type=submit]")
    expect(page.locator(".cordon-reason")).to_contain_text("replace the NIC")
    expect(page.locator('[data-action="blocked"]')).to_contain_text("default/api-pdb")
    shoot(page, folder, "node-drain-preview.png")
    page.fill("#timeout-minutes", "1")
    page.click("#drain-form button[type=submit]")
    expect(page.locator("#drain-pods")).to_be_visible()
    run = DrainRun.objects.get()
    DrainRun.objects.filter(pk=run.pk).update(timeout_seconds=2)
    until_done(advance_drain, run.pk)
    page.reload()
    expect(page.locator('[data-state="partly_drained"]')).to_be_visible()
    expect(page.locator('tr[data-status="blocked"]')).to_contain_text("api-pdb")
    shoot(page, folder, "drain-partly-drained.png")

    page.goto(f"{base}/addons/sim/new/")
    page.fill("#name", "metrics")
    page.fill("#version", "1.0")
    page.fill("#manifest", manifest("ghcr.io/example/agent:1.0"))
    page.click("#addon-form button[type=submit]")
    expect(page).to_have_url(f"{base}/addons/sim/metrics/")
    until_done(advance_attempt, AddonAttempt.objects.get().pk)
    page.reload()
    expect(page.locator('[data-phase="Ready"]')).to_be_visible()
    page.fill("#new-version", "2.0")
    page.fill("#new-manifest", manifest("ghcr.io/example/nonexistent-agent:2.0"))
    page.click("text=Add the version")
    page.select_option("#desired", "2.0")
    page.click("#desired-form button[type=submit]")
    until_done(advance_attempt, AddonAttempt.objects.order_by("-pk").first().pk)  # type: ignore[union-attr]
    page.reload()
    expect(page.locator('[data-phase="Failed"]')).to_be_visible()
    expect(page.locator("[data-reason]")).to_contain_text("ProgressDeadlineExceeded")
    shoot(page, folder, "addon-upgrade-failed.png")


@pytest.fixture
def other_views(browser: Browser, browser_context_args: dict[str, Any]) -> Iterator[list[Any]]:
    """(suffix, page): 简体中文 at 390 and 1400 px, English at 390 px (the walk itself is
    English at 1400 px)."""
    views = []
    for suffix, locale, width in (("zh-390", "zh-CN", 390), ("zh-1400", "zh-CN", 1400),
                                  ("en-390", "en-US", 390)):  # fmt: skip
        args = {**browser_context_args, "locale": locale, "viewport": {"width": width,
                                                                       "height": 844}}  # fmt: skip
        views.append((suffix, browser.new_context(**args)))
    yield [(suffix, context.new_page()) for suffix, context in views]
    for _suffix, context in views:
        context.close()


def test_an_operator_registers_cordons_drains_and_installs_in_the_browser(
    page: Page, other_views: list[Any], live_server: Any, olga: User, sim: SimCluster,
    screenshots: Path,
) -> None:  # fmt: skip
    base = str(live_server)
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, base, "olga")
    walk(page, base, sim, screenshots)
    pages = [
        ("/clusters/sim/", "cluster-checklist"),
        (f"/nodes/sim/{NODE}/", "node-drain-preview"),
        (f"/drains/{DrainRun.objects.get().pk}/", "drain-partly-drained"),
        ("/addons/sim/metrics/", "addon-upgrade-failed"),
    ]
    for suffix, view in other_views:
        log_in(view, base, "olga")
        for path, name in pages:
            view.goto(f"{base}{path}")
            language = "zh-hans" if suffix.startswith("zh") else "en"
            expect(view.locator("html")).to_have_attribute("lang", language)
            shoot(view, screenshots, f"{name}-{suffix}.png")
            width = view.evaluate("document.documentElement.scrollWidth")
            wanted = int(suffix.rsplit("-", 1)[1])
            assert width <= wanted, f"{path} scrolls sideways at {wanted} px ({width} px)"
