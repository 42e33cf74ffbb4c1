"""The "RLinf on Ray" template in a real browser (issue "RLinf-ready jobs"): chosen beside the
ordinary form, refused with the node named when it asks for more GPUs than the simulated
cluster's nodes have, previewed as the Job spec it makes, created, and named on the job page as
the template that made it. Screenshots at 1400 px and 390 px, and in 简体中文, go to the
screenshots folder (`make screenshots` refreshes docs/screenshots/)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client, config
from playwright.sync_api import Page, expect

from console.models import Cluster, Membership
from jobs.models import Job
from simcluster.server import SimCluster
from tests.browser import conftest
from tests.browser.conftest import Syncer, shoot
from tests.conftest import open_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# A sync cycle every 0.5 s; the nodes page polls every 5 s. LIVE is only an upper bound for a
# busy machine: every wait below ends at the event it waits for.
LIVE = 60_000


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password="a-long-password")
    Membership.objects.create(user=user, project=open_project("vision"))
    return user


@pytest.fixture
def output_claim(sim: SimCluster, tmp_path: Path) -> str:
    """The claim the job's outputs go to: the user's, made before the job (the console neither
    creates nor deletes it)."""
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig-user")
    api = config.new_client_from_config(config_file=str(kubeconfig))
    claim = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "rl-outputs"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Ti"}}},
    }  # fmt: skip
    core: Any = client.CoreV1Api(api)  # takes a plain manifest as well as its models
    core.create_namespaced_persistent_volume_claim("default", claim)
    api.close()
    return "rl-outputs"


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    viewport = page.viewport_size
    assert viewport is not None and width <= viewport["width"], f"page is {width} px wide"


def fill_the_template(page: Page, claim: str = "rl-outputs") -> None:
    page.fill("#id_name", "ppo-maniskill")
    page.select_option("#id_cluster", "sim")
    page.fill("#id_image", "rlinf/rlinf:agentic-rlinf0.1-torch2.6.0")
    page.fill("#id_nodes", "2")
    page.fill("#id_cpu", "8")
    page.fill("#id_memory", "64Gi")
    page.fill("#id_config_name", "maniskill_ppo_openvlaoft")
    page.fill("#id_overrides", "runner.max_epochs=200\nactor.optim.lr=1e-5")
    page.fill("#id_placement", "actor: 0-3\nrollout: 4-7")
    page.fill("#id_output_claim", claim)


def test_it_creates_a_job_from_the_template(
    page: Page, live_server: object, alice: User, sim_cluster: Cluster, syncer: Syncer,
    output_claim: str, screenshots: Path,
) -> None:  # fmt: skip
    base = str(live_server)
    page.set_viewport_size({"width": 1400, "height": 900})
    conftest.log_in(page, base, landing="/nodes/")
    # The GPU check reads the synced Nodes: wait until the first sync has stored them.
    expect(page.locator("#node-rows")).to_contain_text("sim-node-", timeout=LIVE)
    page.goto(f"{base}/jobs/new/")
    page.click("#template-rlinf")
    expect(page.locator(".template-choice [aria-current=page]")).to_have_text("RLinf on Ray")
    expect(page.locator("#id_stop_on_completion")).to_be_checked()
    expect(page.locator("#ray-version-note")).to_contain_text("Ray refuses a node")

    fill_the_template(page)  # 8 GPUs per node, the form's default: more than a node has
    page.click("button.primary:has-text('Create job')")
    expect(page.locator("#id_gpus_per_node_error")).to_have_text(
        "The largest schedulable node of sim, sim-node-0, has 4 GPUs."
    )
    expect(page.locator("#rlinf-errors")).to_contain_text("GPUs per node")
    expect(page.locator("#id_placement")).to_have_value("actor: 0-3\nrollout: 4-7")
    shoot(page, screenshots, "job-new-rlinf-errors.png")

    page.fill("#id_gpus_per_node", "4")
    page.click("button:has-text('Show the Job spec it makes')")
    preview = page.locator("#rlinf-preview pre")
    expect(preview).to_contain_text("role: worker")
    expect(preview).to_contain_text("${TRAINYARD_JOB}-head-0.${TRAINYARD_JOB}-head:6379")
    assert not Job.objects.exists()
    shoot(page, screenshots, "job-new-rlinf.png")
    page.set_viewport_size({"width": 390, "height": 844})
    no_sideways_scroll(page)
    shoot(page, screenshots, "job-new-rlinf-phone.png")

    page.click("button.primary:has-text('Create job')")
    expect(page.locator(".messages")).to_contain_text("Job ppo-maniskill created")
    expect(page.locator("#job-template")).to_contain_text("Made by the RLinf on Ray template")
    running = page.locator('#job-status h1 .badge[data-status="Running"]')
    expect(running).to_be_visible(timeout=LIVE)
    roles = page.locator("tbody.task th[scope=row]")
    expect(roles).to_have_text([re.compile("^head"), re.compile("^worker")])
    no_sideways_scroll(page)
    shoot(page, screenshots, "job-rlinf-phone.png")
    page.set_viewport_size({"width": 1400, "height": 900})
    shoot(page, screenshots, "job-rlinf.png")
    job = Job.objects.get(name="ppo-maniskill")
    assert job.spec["template"] == "rlinf"


def test_it_reads_in_chinese(
    page: Page, live_server: object, alice: User, sim_cluster: Cluster, screenshots: Path
) -> None:
    base = str(live_server)
    conftest.log_in(page, base, landing="/jobs/new/")
    page.select_option("#language", "zh-hans")
    page.click("form:has(#language) button")
    expect(page.locator("#language")).to_have_value("zh-hans")
    page.click("#template-rlinf")
    expect(page.locator("#ray-version-note")).to_contain_text("Ray")
    fill_the_template(page)
    page.fill("#id_placement", "actor: 0-99")
    page.click("button.primary")
    expect(page.locator("#id_placement_error")).to_contain_text("actor")
    page.set_viewport_size({"width": 1400, "height": 900})
    shoot(page, screenshots, "job-new-rlinf-zh.png")
    page.set_viewport_size({"width": 390, "height": 844})
    no_sideways_scroll(page)
    shoot(page, screenshots, "job-new-rlinf-zh-phone.png")
