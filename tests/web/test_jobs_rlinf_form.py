"""The create page's "RLinf on Ray" template (issue "RLinf-ready jobs"): a choice beside the
ordinary form, judged by the API's rules (`jobs.spec.parse_rlinf_spec`) with each error next to
its field, a Job created as any other, the job page saying which template made it, and clone
keeping the expanded spec whole."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from console.models import ApiToken, Cluster, Node, Project
from jobs.models import Job
from tests.web.test_jobs_form import error_of, value_of

NEW = "/jobs/new/?template=rlinf"


def choices(**values: str) -> dict[str, str]:
    """What a person types into the template's form (the rest as the form shows it)."""
    data = {
        "template": "rlinf", "name": "ppo", "project": "vision", "cluster": "gpu-a",
        "namespace": "", "image": "rlinf/rlinf:agentic-0.2", "nodes": "2", "gpus_per_node": "8",
        "cpu": "16", "memory": "128Gi", "entry": "embodied", "config_name": "maniskill_ppo_mlp",
        "overrides": "runner.max_epochs=3\nactor.lr=1e-5", "output_claim": "rl-out",
        "log_path": "", "resume_from": "", "placement": "actor: 0-7\nrollout: 8-15", "env": "",
        "stop_on_completion": "on", "heartbeat_seconds": "30", "stall_after_seconds": "",
    }  # fmt: skip
    return data | values


def nodes(cluster: Cluster, *gpus: int) -> None:
    for index, count in enumerate(gpus):
        Node.objects.create(
            cluster=cluster, name=f"gpu-{index}", phase=Node.Phase.ONLINE, gpu_capacity=count,
            observed_at=timezone.now(),
        )  # fmt: skip


@pytest.fixture
def logged_in(client: Client, alice: User, cluster: Cluster) -> Client:
    nodes(cluster, 8, 8)
    client.force_login(alice)
    return client


def test_it_offers_the_template_beside_the_ordinary_form(logged_in: Client) -> None:
    ordinary = logged_in.get("/jobs/new/").content.decode()
    assert 'href="/jobs/new/?template=rlinf"' in ordinary and "Custom job" in ordinary
    assert 'name="roles-0-image"' in ordinary and 'name="config_name"' not in ordinary
    page = logged_in.get(NEW).content.decode()
    assert re.search(r'<a href="/jobs/new/\?template=rlinf"[^>]*aria-current="page"', page)
    assert 'name="template" value="rlinf"' in page and 'name="roles-0-image"' not in page
    assert value_of(page, "nodes") == "1" and value_of(page, "gpus_per_node") == "8"
    assert value_of(page, "memory") == "128Gi" and value_of(page, "entry") == "embodied"
    assert 'placeholder="/output/&lt;job name&gt;"' in page
    assert re.search(r'name="stop_on_completion"[^>]*checked', page)
    assert "Ray refuses a node whose Ray or Python version differs" in page


def test_it_creates_the_expanded_job(logged_in: Client, alice: User) -> None:
    answer = logged_in.post("/jobs/new/", choices())
    job = Job.objects.get(name="ppo")
    assert answer.status_code == 302 and answer["Location"] == job.get_absolute_url()
    assert job.spec["template"] == "rlinf" and job.spec["policies"]["stop_on_completion"]
    head, worker = job.spec["tasks"]
    assert (head["role"], head["replicas"], worker["role"], worker["replicas"]) == (
        "head",
        1,
        "worker",
        1,
    )
    assert "ray start --head" in head["args"][0] and "actor.lr=1e-5" in head["args"][0]
    assert """'cluster.component_placement.rollout="8-15"'""" in head["args"][0]
    assert 'out="/output/${TRAINYARD_JOB}"' in head["args"][0]
    assert '--address="${TRAINYARD_JOB}-head-0.${TRAINYARD_JOB}-head:6379"' in worker["args"][0]
    assert worker["volumes"] == [{"claim": "rl-out", "mount_path": "/output", "read_only": False,
                                  "sub_path": None}]  # fmt: skip
    assert [task.role for task in job.tasks.order_by("pk")] == ["head", "worker"]
    page = logged_in.get(job.get_absolute_url()).content.decode()
    assert "Made by the RLinf on Ray template" in page
    token = ApiToken.issue(alice, "t")[1]
    api = Client(headers={"Authorization": f"Bearer {token}"}).get(f"/api/v1/jobs/{job.pk}")
    assert api.json()["template"] == "rlinf"  # the page and the API say the same


def test_unchecking_stop_on_completion_is_kept(logged_in: Client) -> None:
    data = choices()
    del data["stop_on_completion"]
    logged_in.post("/jobs/new/", data)
    assert Job.objects.get(name="ppo").spec["policies"]["stop_on_completion"] is False


def test_each_refusal_is_next_to_its_field_with_a_summary(logged_in: Client) -> None:
    bad = choices(overrides="runner.max_epochs=3\nactor.lr=1", placement="actor: 0-99")
    page = logged_in.post("/jobs/new/", bad).content.decode()
    assert not Job.objects.exists()
    assert (
        error_of(page, "id_placement") == "actor: GPU rank 99 is beyond the 16 GPUs of 2 node(s)."
    )
    assert 'id="rlinf-errors"' in page and 'href="#id_placement"' in page
    assert value_of(page, "overrides") == "runner.max_epochs=3\nactor.lr=1"  # kept as typed
    page = logged_in.post("/jobs/new/", choices(overrides="no equals")).content.decode()
    refused = html.unescape(error_of(page, "id_overrides"))
    assert refused == "'no equals' is not a Hydra override (key=value)."
    page = logged_in.post("/jobs/new/", choices(gpus_per_node="16")).content.decode()
    assert error_of(page, "id_gpus_per_node") == (
        "The largest schedulable node of gpu-a, gpu-0, has 8 GPUs."
    )
    page = logged_in.post("/jobs/new/", choices(nodes="3")).content.decode()
    assert "Only 2 schedulable nodes of gpu-a have 8 GPUs" in error_of(page, "id_gpus_per_node")


def test_the_form_own_parsing_and_the_job_fields_are_judged_too(logged_in: Client) -> None:
    page = logged_in.post("/jobs/new/", choices(placement="actor 0-7")).content.decode()
    assert error_of(page, "id_placement") == "Line 1 is not component: ranks: actor 0-7"
    page = logged_in.post("/jobs/new/", choices(image="")).content.decode()
    assert error_of(page, "id_image") == "This field is required."
    page = logged_in.post("/jobs/new/", choices(name="Bad_Name")).content.decode()
    assert "job name" in error_of(page, "id_name")
    assert not Job.objects.exists()


def test_preview_shows_the_spec_and_creates_nothing(logged_in: Client) -> None:
    page = logged_in.post("/jobs/new/", choices(preview="1")).content.decode()
    assert not Job.objects.exists()
    preview = re.search(r'id="rlinf-preview".*?<pre class="detail">(.*?)</pre>', page, re.S)
    assert preview and "role: head" in preview[1] and "role: worker" in preview[1]
    assert "template: rlinf" in preview[1] and value_of(page, "name") == "ppo"


def test_a_clone_opens_on_the_yaml_tab_with_the_whole_expanded_spec(logged_in: Client) -> None:
    logged_in.post("/jobs/new/", choices())
    job = Job.objects.get(name="ppo")
    page = logged_in.get(f"/jobs/{job.pk}/clone/").content.decode()
    assert 'id="clone-formless"' in page and "template" in page
    yaml_text = value_of(page, "yaml")
    assert "template: rlinf" in yaml_text and "claim: rl-out" in yaml_text
    data = {"mode": "yaml", "yaml": html.unescape(yaml_text)}
    answer = logged_in.post(f"/jobs/{job.pk}/clone/", data)
    clone = Job.objects.get(name="ppo-2")
    assert answer.status_code == 302 and clone.cloned_from_id == job.pk
    assert clone.spec["template"] == "rlinf" and clone.spec["tasks"] == job.spec["tasks"]


def test_an_ordinary_clone_still_opens_on_the_form(logged_in: Client) -> None:
    logged_in.post("/jobs/new/", choices())
    job = Job.objects.get(name="ppo")
    job.spec = {**job.spec, "template": None}
    for task in job.spec["tasks"]:
        task.pop("volumes")
    job.save()
    page = logged_in.get(f"/jobs/{job.pk}/clone/").content.decode()
    assert 'id="clone-formless"' not in page and 'name="roles-0-image"' in page
    yaml_text = html.unescape(
        value_of(logged_in.get(f"/jobs/{job.pk}/clone/?mode=yaml").content.decode(), "yaml")
    )
    switch = {"mode": "yaml", "switch": "form", "yaml": yaml_text}
    switched = logged_in.post(f"/jobs/{job.pk}/clone/", switch).content.decode()
    assert "has no field for template" not in switched


def test_it_is_in_chinese(logged_in: Client) -> None:
    logged_in.cookies["django_language"] = "zh-hans"
    page = logged_in.get(NEW, headers={"Accept-Language": "zh-hans"}).content.decode()
    assert "自定义 Job" in page and "Ray 节点" in page


def test_it_asks_anonymous_users_to_log_in(client: Client, cluster: Cluster) -> None:
    answer = client.post("/jobs/new/", choices())
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
    assert not Job.objects.exists()


def test_it_creates_only_where_the_user_may(
    logged_in: Client, charlie: User, other_project: Project
) -> None:
    """alice may not create in charlie's project: it is not one she may choose."""
    page = logged_in.post("/jobs/new/", choices(project="speech")).content.decode()
    assert not Job.objects.exists() and 'href="#id_project">Project</a>' in page
    outsider = Client()
    outsider.force_login(User.objects.create_user("dora", password="password"))
    assert outsider.get(NEW).status_code == 403  # no project to create in: who can grant it
