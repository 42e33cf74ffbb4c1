"""The platform pages in a real browser, on real data from an in-process simcluster: the dashboard
(counts, cluster sync age, jobs needing attention), a Workflow's DAG (spec §Workflow status), and
Clusters, Nodes and Add-ons (spec §Node and Addon status); live refresh; 简体中文 and back.
Each page is saved in the screenshots folder
(`make screenshots` refreshes docs/screenshots/) to be looked at."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from console.engine.cycle import sync_cluster
from console.models import Addon, Cluster, Membership, Node
from jobs.choices import TaskKind
from jobs.models import Job, Workflow
from jobs.operations import create_job, create_workflow
from jobs.spec import JobSpec, ResourcesSpec, TaskSpec, WorkflowJobSpec, WorkflowSpec
from simcluster.server import SimCluster
from tests.browser.conftest import Syncer, shoot
from tests.conftest import open_project

pytestmark = pytest.mark.browser

LIVE = 20_000


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password="a-long-password")
    Membership.objects.create(user=user, project=open_project("vision"))
    return user


def sync_until(cluster: Cluster, done: object, seconds: float = 30) -> None:
    """Sync as the beat would until `done()` holds (the simcluster runs at 10x speed)."""
    deadline = time.monotonic() + seconds
    while True:
        sync_cluster(cluster.pk)
        if done() or time.monotonic() > deadline:  # type: ignore[operator]
            return
        time.sleep(0.3)


def seed(alice: User, sim: SimCluster, cluster: Cluster) -> Workflow:
    """A trainer, a crash-looping job, a job too big for any node, one whose image does not
    exist, a batch job that failed, and a three-step workflow."""
    sim.cordon("sim-node-2")
    serve = TaskSpec(
        role="worker",
        replicas=2,
        image="rlinf/trainer:0.4",
        command=["python", "-m", "rlinf.train"],
        resources=ResourcesSpec(gpu=1),
    )
    crash = TaskSpec(
        role="worker", replicas=1, image="rlinf/trainer:0.4", command=["sim", "crash", "10", "1"]
    )
    huge = TaskSpec(
        role="actor", replicas=1, image="rlinf/trainer:0.4", resources=ResourcesSpec(gpu=64)
    )
    create_job(alice, JobSpec(name="ppo-trainer", cluster="sim", tasks=[serve]))
    create_job(alice, JobSpec(name="crashy-sft", cluster="sim", tasks=[crash]))
    create_job(alice, JobSpec(name="huge-actor", cluster="sim", tasks=[huge]))
    typo = TaskSpec(role="worker", replicas=1, image="rlinf/trainer:nonexistent")
    create_job(alice, JobSpec(name="typo-image", cluster="sim", tasks=[typo]))
    broken = TaskSpec(
        role="eval", kind=TaskKind.JOB, replicas=1, image="rlinf/tools:0.4",
        command=["sim", "crash", "2", "3"],
    )  # fmt: skip
    create_job(alice, JobSpec(name="eval-broken", cluster="sim", tasks=[broken]))
    step = TaskSpec(
        role="prep",
        kind=TaskKind.JOB,
        replicas=1,
        image="rlinf/tools:0.4",
        command=["sim", "run", "2"],
    )
    train = TaskSpec(role="trainer", replicas=1, image="rlinf/trainer:0.4")
    check = TaskSpec(
        role="eval",
        kind=TaskKind.JOB,
        replicas=1,
        image="rlinf/tools:0.4",
        command=["sim", "run", "2"],
    )
    return create_workflow(alice, WorkflowSpec(name="math-pipeline", jobs=[
        WorkflowJobSpec(name="math-prepare", cluster="sim", tasks=[step]),
        WorkflowJobSpec(name="math-train", cluster="sim", tasks=[train],
                        depends_on=["math-prepare"]),
        WorkflowJobSpec(name="math-evaluate", cluster="sim", tasks=[check],
                        depends_on=["math-prepare", "math-train"]),
    ]))  # fmt: skip


def settled() -> bool:
    phases = dict(Job.objects.values_list("name", "phase"))
    crashy = Job.objects.get(name="crashy-sft").tasks.get().workers.first()
    typo = Job.objects.get(name="typo-image").tasks.get().workers.first()
    return (
        phases.get("ppo-trainer") == "Running"
        and phases.get("math-prepare") == "Succeeded"
        and phases.get("math-train") == "Running"
        and phases.get("crashy-sft") == "Running"  # it was ready before its first crash
        and crashy is not None
        and crashy.restart_count > 0
        and phases.get("eval-broken") == "Failed"
        and typo is not None
        and typo.reason in ("ErrImagePull", "ImagePullBackOff")
    )


def log_in(page: Page, base: str, folder: Path) -> None:
    page.goto(f"{base}/")
    expect(page).to_have_url(f"{base}/accounts/login/?next=/")
    shoot(page, folder, "login.png")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "a-long-password")
    page.click("button[type=submit].primary")
    expect(page).to_have_url(f"{base}/")


@pytest.mark.django_db(transaction=True)
def test_it_shows_the_platform_pages_with_real_data(
    page: Page, live_server: object, alice: User, sim: SimCluster, sim_cluster: Cluster,
    screenshots: Path,
) -> None:  # fmt: skip
    workflow = seed(alice, sim, sim_cluster)
    sync_until(sim_cluster, settled)
    assert settled(), dict(Job.objects.values_list("name", "phase"))
    syncer = Syncer(sim_cluster.pk)
    syncer.start()
    try:
        walk(page, str(live_server), workflow, sim, screenshots)
    finally:
        syncer.stop()
    assert not syncer.errors, syncer.errors


def walk(page: Page, base: str, workflow: Workflow, sim: SimCluster, folder: Path) -> None:
    log_in(page, base, folder)
    dashboard(page, base, folder)
    workflows(page, base, workflow, folder)
    clusters(page, base, folder)
    nodes(page, base, sim, folder)
    addons(page, base, folder)
    languages(page, base, folder)


def dashboard(page: Page, base: str, folder: Path) -> None:
    """Each job is listed as soon as a known problem shows, in the troubleshooting panel's
    words; the Failed job until alice, a member, has opened it."""
    expect(page.locator("h1")).to_have_text("Dashboard")
    running = page.locator('a.phase-count[data-phase="Running"] .count')
    expect(running).to_have_text("3")  # ppo-trainer, crashy-sft, math-train
    expect(page.locator('a.phase-count[data-phase="Succeeded"]')).to_have_attribute(
        "href", "/jobs/?phase=Succeeded"
    )
    page.set_viewport_size({"width": 1400, "height": 900})
    # Between two crashes the pod runs and is ready again: then the panel says nothing to alice.
    expect(page.locator('tr[data-job="crashy-sft"]')).to_contain_text("Crash loop", timeout=LIVE)
    expect(page.locator('tr[data-job="huge-actor"]')).to_contain_text("Unschedulable: huge-actor")
    expect(page.locator('tr[data-job="typo-image"]')).to_contain_text(
        "Image cannot be pulled: typo-image-worker-0"
    )
    expect(page.locator('tr[data-job="eval-broken"]')).to_contain_text("Failed, and no member")
    expect(page.locator('tr[data-job="ppo-trainer"]')).to_have_count(0)
    expect(page.locator('tr[data-cluster="sim"]')).to_contain_text("reachable")
    expect(page.locator('tr[data-cluster="sim"]')).to_contain_text("last synced")
    shoot(page, folder, "dashboard.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    shoot(page, folder, "dashboard-phone.png")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the dashboard scrolls sideways on a phone ({width} px)"
    page.set_viewport_size({"width": 1280, "height": 800})
    page.click('tr[data-job="eval-broken"] a')
    expect(page.locator("h1")).to_contain_text("eval-broken")
    page.goto(f"{base}/")
    expect(page.locator('tr[data-job="typo-image"]')).to_be_visible()
    expect(page.locator('tr[data-job="eval-broken"]')).to_have_count(0)


def workflows(page: Page, base: str, workflow: Workflow, folder: Path) -> None:
    page.click("nav >> text=Workflows")
    row = page.locator('tr[data-workflow="math-pipeline"]')
    expect(row).to_contain_text("vision")
    expect(row.locator('.child-count .badge[data-status="Succeeded"]')).to_be_visible()
    shoot(page, folder, "workflows.png")
    row.locator("a").click()
    expect(page).to_have_url(f"{base}/workflows/{workflow.pk}/")
    boxes = page.locator("svg.dag .dag-node")
    expect(boxes).to_have_count(3)
    phase = '.dag-node[data-job="{}"] .dag-phase'
    expect(page.locator(phase.format("math-prepare"))).to_have_text("✔ Succeeded")
    expect(page.locator(phase.format("math-train"))).to_have_text("▶ Running")
    evaluate = page.locator('tr[data-job="math-evaluate"] td.waiting')
    expect(evaluate).to_contain_text("math-train")
    expect(page.locator(".notice.warn")).to_contain_text("may never reach a terminal state")
    shoot(page, folder, "workflow.png")
    page.click('.dag-node[data-job="math-train"]')
    expect(page).to_have_url(f"{base}/jobs/{Job.objects.get(name='math-train').pk}/")


def clusters(page: Page, base: str, folder: Path) -> None:
    page.goto(f"{base}/clusters/")
    row = page.locator('tr[data-cluster="sim"]')
    expect(row.locator('.badge[data-status="Reachable"]')).to_contain_text("reachable")
    expect(row.locator("td.num").first).to_have_text("3")
    expect(page.locator("body")).not_to_contain_text("apiVersion")
    shoot(page, folder, "clusters.png")


def nodes(page: Page, base: str, sim: SimCluster, folder: Path) -> None:
    page.goto(f"{base}/nodes/?cluster=sim")
    cordoned = page.locator('tr[data-node="sim-node-2"]')
    expect(cordoned.locator('.badge[data-status="Online"]')).to_be_visible()
    expect(cordoned.locator("td[data-schedulable]")).to_contain_text("No (cordoned)")
    shoot(page, folder, "nodes.png")
    sim.node_offline("sim-node-1")  # the page refreshes itself while it is visible
    lost = page.locator('tr[data-node="sim-node-1"] .badge[data-status="Offline"]')
    expect(lost).to_be_visible(timeout=LIVE)
    assert Node.objects.get(name="sim-node-1").phase == Node.Phase.OFFLINE


def addons(page: Page, base: str, folder: Path) -> None:
    page.goto(f"{base}/addons/")
    expect(page.locator(".notice")).to_contain_text("Ready means the add-on has reached")
    expect(page.locator("tr[data-addon]")).to_have_count(Addon.objects.count())
    claim = page.locator('tr[data-addon="kuberay-operator"] [data-ready-claims]')
    expect(claim).to_contain_text("Ready only means the workload is available", timeout=LIVE)
    assert Addon.objects.count() >= 2
    shoot(page, folder, "addons.png")


def languages(page: Page, base: str, folder: Path) -> None:
    page.goto(f"{base}/")
    page.select_option("#language", "zh-hans")
    page.click("form:has(#language) button")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    expect(page.locator("#language")).to_have_value("zh-hans")
    page.set_viewport_size({"width": 1400, "height": 900})
    expect(page.locator('tr[data-job="typo-image"]')).to_contain_text("typo-image-worker-0")
    shoot(page, folder, "zh-dashboard.png")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.select_option("#language", "en")
    page.click("form:has(#language) button")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator("h1")).to_have_text("Dashboard")
