"""An operator's walk in a real browser (issue 36, Show): register a cluster, cordon a node with
a reason, drain it against a PodDisruptionBudget that allows no disruption (Partly drained,
naming the budget), install an add-on (Ready) and upgrade it to an image that never pulls
(Failed), and, under the shipped RBAC, an add-on whose namespace the console may not apply in
(the missing permission named). Then the same actions in 简体中文 at 390 px, and the pages in
the other languages and widths. Each page is saved in the screenshots folder (`make
screenshots` refreshes docs/screenshots/) to be looked at."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from console.engine.addons import advance_attempt
from console.engine.connection import refresh_access
from console.engine.cycle import sync_cluster
from console.engine.nodes import advance_drain
from console.models import AddonAttempt, Cluster, DrainRun, Node
from simcluster.access import rules_from_rbac
from simcluster.resources import RESOURCES
from simcluster.server import SimCluster
from tests.browser.conftest import PASSWORD, log_in, shoot
from tests.conftest import make_operator

pytestmark = pytest.mark.browser
NODE = "sim-node-0"
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CUT = ".some(table => table.scrollWidth > table.parentElement.clientWidth)"  # scrolls in its box


def manifest(image: str, name: str = "metrics-agent") -> str:
    return (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\n"
        "spec:\n  replicas: 1\n  progressDeadlineSeconds: 20\n"
        f"  selector: {{matchLabels: {{app: {name}}}}}\n"
        f"  template:\n    metadata: {{labels: {{app: {name}}}}}\n"
        f"    spec:\n      containers: [{{name: main, image: '{image}'}}]\n"
    )


@pytest.fixture
def olga(transactional_db: None) -> User:
    return make_operator(User.objects.create_user("olga", password=PASSWORD))


def budgeted_api(sim: SimCluster, node: str, app: str) -> None:
    """A Deployment pinned to the node and a budget that allows no disruption of it."""
    labels = {"app": app}
    pod = {"nodeSelector": {"kubernetes.io/hostname": node},
           "containers": [{"name": "main", "image": "nginx:1.27"}]}  # fmt: skip
    template = {"metadata": {"labels": labels}, "spec": pod}
    spec = {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}
    deployment = {"metadata": {"name": app}, "spec": spec}
    budget = {"metadata": {"name": f"{app}-pdb"},
              "spec": {"selector": {"matchLabels": labels}, "minAvailable": 1}}  # fmt: skip
    with sim.cluster.store.lock:
        sim.cluster.writer.create(RESOURCES["deployments"], "default", deployment)
        sim.cluster.writer.create(RESOURCES["poddisruptionbudgets"], "default", budget)
    sim.advance(10)


def shipped_rbac(sim: SimCluster) -> None:
    """simcluster answers permission checks as the shipped RBAC would: the data-plane role and
    the opt-in operators' role, whose add-on rights are bound in kube-system only."""
    objects = [
        doc
        for name in ("rbac-data-plane.yaml", "rbac-operator-actions.yaml")
        for doc in yaml.safe_load_all((DEPLOY / name).read_text())
        if doc
    ]
    sim.set_access_rules(rules_from_rbac(objects))


def until_done(step: Any, ident: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while step(ident) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def register(page: Page, base: str, sim: SimCluster, folder: Path) -> Cluster:
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
    return cluster


def cordon_and_drain(page: Page, base: str, sim: SimCluster, shot: Callable[[str], None],
                     node: str, app: str) -> None:  # fmt: skip
    """Cordon with a reason, then a drain that a budget blocks: Partly drained, naming it."""
    budgeted_api(sim, node, app)
    page.goto(f"{base}/nodes/sim/{node}/")
    page.fill("#cordon-reason", "replace the NIC")
    page.click("#cordon-form button[type=submit]")
    expect(page.locator(".cordon-reason")).to_contain_text("replace the NIC")
    expect(page.locator('[data-action="blocked"]')).to_contain_text(f"default/{app}-pdb")
    shot("node-drain-preview")
    page.fill("#timeout-minutes", "1")
    page.click("#drain-form button[type=submit]")
    expect(page.locator("#drain-pods")).to_be_visible()
    run = DrainRun.objects.get(node_name=node)
    DrainRun.objects.filter(pk=run.pk).update(timeout_seconds=2)
    until_done(advance_drain, run.pk)
    page.reload()
    expect(page.locator('[data-state="partly_drained"]')).to_be_visible()
    expect(page.locator('tr[data-status="blocked"]')).to_contain_text(f"{app}-pdb")
    shot("drain-partly-drained")


def install_and_fail_an_upgrade(
    page: Page, base: str, shot: Callable[[str], None], name: str
) -> None:
    """Register with "Install now": Ready; add a version whose image never pulls and apply it:
    Failed, naming ProgressDeadlineExceeded."""
    page.goto(f"{base}/addons/sim/new/")
    page.fill("#name", name)
    page.fill("#version", "1.0")
    page.fill("#manifest", manifest("ghcr.io/example/agent:1.0", f"{name}-agent"))
    expect(page.locator("#install")).to_be_checked()
    page.click("#addon-form button[type=submit]")
    expect(page).to_have_url(f"{base}/addons/sim/{name}/")
    until_done(advance_attempt, AddonAttempt.objects.get(addon__name=name).pk)
    page.reload()
    expect(page.locator('[data-phase="Ready"]')).to_be_visible()
    expect(page.locator('#addon-attempts tr[data-outcome="succeeded"]')).to_be_visible()
    shot("addon-ready")
    page.fill("#new-version", "2.0")
    page.fill("#new-manifest", manifest("ghcr.io/example/nonexistent-agent:2.0", f"{name}-agent"))
    page.click("#version-form button[type=submit]")
    page.select_option("#desired", "2.0")
    page.click("#desired-form button[type=submit]")
    latest = AddonAttempt.objects.filter(addon__name=name).order_by("-pk").first()
    assert latest is not None and latest.to_version == "2.0"
    until_done(advance_attempt, latest.pk)
    page.reload()
    expect(page.locator('[data-phase="Failed"]')).to_be_visible()
    expect(page.locator("[data-reason]")).to_contain_text("ProgressDeadlineExceeded")
    shot("addon-upgrade-failed")


def a_missing_permission(
    page: Page, base: str, cluster: Cluster, shot: Callable[[str], None], name: str
) -> None:
    """Under the shipped RBAC an add-on in another namespace than kube-system: "Install now"
    is not offered there, and its page names the permissions the console lacks."""
    page.goto(f"{base}/addons/sim/new/")
    page.fill("#name", name)
    page.fill("#namespace", "monitoring")
    page.fill("#version", "1.0")
    page.fill("#manifest", manifest("ghcr.io/example/agent:1.0", f"{name}-agent"))
    page.uncheck("#install")
    page.click("#addon-form button[type=submit]")
    expect(page).to_have_url(f"{base}/addons/sim/{name}/")
    assert refresh_access(cluster.pk)  # as the check queued by the registration does
    page.reload()
    missing = page.locator('[data-missing="addons"]')
    expect(missing).to_contain_text("patch apps/deployments (namespace monitoring)")
    expect(page.locator("#desired-form")).to_have_count(0)
    shot("addon-missing-permission")


@pytest.fixture
def other_views(browser: Browser, browser_context_args: dict[str, Any]) -> Iterator[list[Any]]:
    """(suffix, page): 简体中文 at 390 and 1400 px, English at 390 px (the walk itself is
    English at 1400 px; the first one walks through the same actions in 简体中文)."""
    views = []
    for suffix, locale, width in (("zh-390", "zh-CN", 390), ("zh-1400", "zh-CN", 1400),
                                  ("en-390", "en-US", 390)):  # fmt: skip
        args = {**browser_context_args, "locale": locale, "viewport": {"width": width,
                                                                       "height": 844}}  # fmt: skip
        views.append((suffix, browser.new_context(**args)))
    yield [(suffix, context.new_page()) for suffix, context in views]
    for _suffix, context in views:
        context.close()


def no_sideways_scroll(page: Page, width: int) -> None:
    scrolled = page.evaluate("document.documentElement.scrollWidth")
    assert scrolled <= width, f"{page.url} scrolls sideways at {width} px ({scrolled} px)"


def test_an_operator_registers_cordons_drains_and_installs_in_the_browser(
    page: Page, other_views: list[Any], live_server: Any, olga: User, sim: SimCluster,
    screenshots: Path,
) -> None:  # fmt: skip
    base = str(live_server)
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, base, "olga")
    cluster = register(page, base, sim, screenshots)
    shot = lambda name: shoot(page, screenshots, f"{name}.png")  # noqa: E731
    cordon_and_drain(page, base, sim, shot, NODE, "api")
    install_and_fail_an_upgrade(page, base, shot, "metrics")
    shipped_rbac(sim)
    a_missing_permission(page, base, cluster, shot, "exporter")

    # The same actions in 简体中文 on a phone: another node, other add-ons.
    (_suffix, zh), *others = other_views
    log_in(zh, base, "olga")
    expect(zh.locator("html")).to_have_attribute("lang", "zh-hans")

    def zh_shot(name: str) -> None:
        no_sideways_scroll(zh, 390)
        for table in (
            "#addon-attempts",
            "#drain-pods",
            "#drain-preview",
        ):  # read whole, not cut at a column
            cut = f"[...document.querySelectorAll('{table}')]" + CUT
            assert not zh.evaluate(cut), f"{table} is cut off at 390 px on {zh.url}"
        shoot(zh, screenshots, f"{name}-zh-390.png")

    sim.set_access_rules(None)
    assert refresh_access(cluster.pk)
    cordon_and_drain(zh, base, sim, zh_shot, "sim-node-1", "web")
    install_and_fail_an_upgrade(zh, base, zh_shot, "agents")
    shipped_rbac(sim)
    a_missing_permission(zh, base, cluster, zh_shot, "scraper")
    zh.goto(f"{base}/clusters/sim/")
    zh_shot("cluster-checklist")

    pages = [
        ("/clusters/sim/", "cluster-checklist"),
        (f"/nodes/sim/{NODE}/", "node-drain-preview"),
        (f"/drains/{DrainRun.objects.get(node_name=NODE).pk}/", "drain-partly-drained"),
        ("/addons/sim/metrics/", "addon-upgrade-failed"),
        ("/addons/sim/exporter/", "addon-missing-permission"),
    ]
    for suffix, view in others:
        log_in(view, base, "olga")
        for path, name in pages:
            view.goto(f"{base}{path}")
            language = "zh-hans" if suffix.startswith("zh") else "en"
            expect(view.locator("html")).to_have_attribute("lang", language)
            shoot(view, screenshots, f"{name}-{suffix}.png")
            no_sideways_scroll(view, int(suffix.rsplit("-", 1)[1]))
