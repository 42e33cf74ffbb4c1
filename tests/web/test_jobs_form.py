"""The create-job page (fields or YAML) and clone (spec §Job status: after a failure, fix the
configuration and clone it): every invalid field says why next to itself, nothing typed is lost,
and one spec (jobs.spec) serves the form, the YAML tab and clone."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from console.models import Cluster, Membership, Project
from jobs.choices import Action, JobPhase, TaskKind
from jobs.forms import parse_lines, suggest_clone_name
from jobs.models import Job, Operation
from jobs.operations import create_job
from jobs.spec import JobSpec, ResourcesSpec, TaskSpec


def role(index: int = 0, **values: str) -> dict[str, str]:
    fields = {"role": "worker", "kind": "StatefulSet", "image": "rlinf:1", "command": "",
              "args": "", "replicas": "1", "cpu": "", "memory": "", "gpus": "0",
              "node_selector": "", "env": ""}  # fmt: skip
    fields.update(values)
    return {f"roles-{index}-{key}": value for key, value in fields.items()}


def form(*roles: dict[str, str], **job: str) -> dict[str, str]:
    data = {"mode": "form", "name": "train", "cluster": "gpu-a", "namespace": "",
            "project": "vision", "roles-TOTAL_FORMS": str(len(roles)),
            "roles-INITIAL_FORMS": "0"}  # fmt: skip
    data.update(job)
    for values in roles:
        data.update(values)
    return data


def error_of(html: str, field_id: str) -> str:
    """The error list rendered right after the field (Django links it by aria-describedby)."""
    match = re.search(rf'<ul class="errorlist" id="{field_id}_error">(.*?)</ul>', html, re.S)
    assert match, f"no error next to {field_id}"
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def value_of(html: str, name: str) -> str:
    tag = re.search(rf'<(input|textarea)[^>]*name="{name}"[^>]*>([^<]*)', html)
    assert tag, name
    if tag.group(1) == "textarea":
        return tag.group(2).strip("\n")
    value = re.search(r'value="([^"]*)"', tag.group(0))
    return value.group(1) if value else ""


@pytest.fixture
def logged_in(client: Client, alice: User, cluster: Cluster) -> Client:
    client.force_login(alice)
    return client


def test_it_creates_a_job_from_the_form(logged_in: Client) -> None:
    data = form(
        role(role="head", image="rlinf:2", command="python -m rlinf.head --port 6379",
             args='--name "a b"', cpu="4", memory="16Gi", gpus="1",
             node_selector="gpu=a100\n\nzone = b", env="SEED=1\nMODE=rl"),
        role(1, role="worker", replicas="3"),
    )  # fmt: skip
    response = logged_in.post("/jobs/new/", data)
    job = Job.objects.get(name="train")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    head, worker = job.spec["tasks"]
    assert head["command"] == ["python", "-m", "rlinf.head", "--port", "6379"]
    assert head["args"] == ["--name", "a b"]
    assert head["resources"] == {"cpu": "4", "memory": "16Gi", "gpu": 1}
    assert head["node_selector"] == {"gpu": "a100", "zone": "b"}
    assert head["env"] == {"SEED": "1", "MODE": "rl"}
    assert (worker["role"], worker["replicas"], worker["resources"]["cpu"]) == ("worker", 3, "1")
    assert (job.phase, job.namespace, job.project.name) == (JobPhase.PENDING, "default", "vision")
    assert job.operations.get().action == Action.CREATE
    assert "Job train created" in logged_in.get(response["Location"]).content.decode()


def test_it_puts_every_error_next_to_its_field_and_keeps_what_was_typed(
    logged_in: Client,
) -> None:
    data = form(
        role(role="Head_1", image="", replicas="three", memory="512m", env="SEED"),
        role(1, role="worker", cpu="-1", node_selector="gpu a100", command='python "unclosed'),
        name="Train Job",
    )
    response = logged_in.post("/jobs/new/", data)
    assert response.status_code == 200
    html = response.content.decode()
    assert "not a valid job name" in error_of(html, "id_name")
    assert "not a valid role" in error_of(html, "id_roles-0-role")
    assert error_of(html, "id_roles-0-image") == "The image is required."
    assert error_of(html, "id_roles-0-replicas") == "Must be a whole number."
    assert "means milli-bytes" in error_of(html, "id_roles-0-memory")
    assert error_of(html, "id_roles-0-env") == "Line 1 is not KEY=value: SEED"
    assert "not a Kubernetes quantity" in error_of(html, "id_roles-1-cpu")
    assert "is not key=value" in error_of(html, "id_roles-1-node_selector")
    assert "check the quotes" in error_of(html, "id_roles-1-command")
    for name, typed in [("name", "Train Job"), ("roles-0-role", "Head_1"),
                        ("roles-0-replicas", "three"), ("roles-0-memory", "512m"),
                        ("roles-0-env", "SEED"), ("roles-1-cpu", "-1"),
                        ("roles-1-node_selector", "gpu a100"),
                        ("roles-1-command", "python &quot;unclosed")]:  # fmt: skip
        assert value_of(html, name) == typed, name
    assert not Job.objects.exists()


def test_it_says_which_cluster_and_project_are_wrong(logged_in: Client) -> None:
    html = logged_in.post("/jobs/new/", form(role(), cluster="")).content.decode()
    assert error_of(html, "id_cluster")
    html = logged_in.post("/jobs/new/", form(role(), project="speech")).content.decode()
    assert "Project: Select a valid choice" in html, "a hidden field's error shows on top"


def test_it_refuses_a_name_already_taken(logged_in: Client, alice: User) -> None:
    create_job(alice, job_spec())
    html = logged_in.post("/jobs/new/", form(role())).content.decode()
    assert "already exists in gpu-a/default" in error_of(html, "id_name")


def test_it_adds_and_removes_roles_without_javascript(logged_in: Client) -> None:
    typed = form(role(role="head", image="rlinf:2"), name="keep-me")
    html = logged_in.post("/jobs/new/", {**typed, "add_role": "1"}).content.decode()
    assert html.count("<legend>Role ") == 2
    assert value_of(html, "name") == "keep-me" and value_of(html, "roles-0-image") == "rlinf:2"
    assert value_of(html, "roles-1-replicas") == "1" and value_of(html, "roles-1-role") == ""
    assert 'class="errorlist"' not in html, "adding a role is not a submission"
    assert not Job.objects.exists()
    two = form(role(role="head"), role(1, role="worker", image="rlinf:3"), name="keep-me")
    html = logged_in.post("/jobs/new/", {**two, "remove_role": "0"}).content.decode()
    assert html.count("<legend>Role ") == 1
    assert value_of(html, "roles-0-role") == "worker"
    assert value_of(html, "roles-0-image") == "rlinf:3"


def test_it_shows_the_project_choice_only_to_members_of_several(
    logged_in: Client, alice: User, other_project: Project
) -> None:
    html = logged_in.get("/jobs/new/").content.decode()
    assert '<input type="hidden" name="project" value="vision"' in html
    Membership.objects.create(user=alice, project=other_project)
    html = logged_in.get("/jobs/new/").content.decode()
    assert '<select name="project"' in html


YAML = """
name: from-yaml
cluster: gpu-a
tasks:
  - role: worker
    replicas: 2
    image: rlinf:1
    resources: {cpu: 2, memory: 8Gi, gpu: 1}
"""


def test_it_creates_a_job_from_yaml(logged_in: Client) -> None:
    response = logged_in.post("/jobs/new/", {"mode": "yaml", "yaml": YAML})
    job = Job.objects.get(name="from-yaml")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.spec["tasks"][0]["resources"] == {"cpu": "2", "memory": "8Gi", "gpu": 1}


def test_it_shows_yaml_errors_next_to_the_yaml_and_keeps_it(logged_in: Client) -> None:
    broken = "name: x\ntasks: [\n"
    html = logged_in.post("/jobs/new/", {"mode": "yaml", "yaml": broken}).content.decode()
    assert error_of(html, "id_yaml") == "Line 3, column 1: expected a value."
    assert value_of(html, "yaml") == broken.rstrip("\n")
    invalid = YAML.replace("image: rlinf:1", "image: ''").replace("replicas: 2", "replicas: -1")
    html = logged_in.post("/jobs/new/", {"mode": "yaml", "yaml": invalid}).content.decode()
    errors = error_of(html, "id_yaml")
    assert "tasks.0.image: The image is required." in errors
    assert "tasks.0.replicas: Must be at least 0." in errors
    assert 'aria-current="page">YAML' in html
    assert not Job.objects.exists()


def test_it_offers_a_yaml_tab_that_works_without_javascript(logged_in: Client) -> None:
    html = logged_in.get("/jobs/new/?mode=yaml").content.decode()
    assert '<input type="hidden" name="mode" value="yaml">' in html
    assert "cluster: gpu-a" in html, "the only cluster is filled in"


def job_spec(name: str = "train") -> JobSpec:
    task = TaskSpec(
        role="worker", kind=TaskKind.STATEFULSET, replicas=2, image="rlinf:1",
        command=["python", "train.py"], args=["--lr", "3e-4"], env={"SEED": "7"},
        resources=ResourcesSpec(cpu="4", memory="16Gi", gpu=1), node_selector={"gpu": "a100"},
    )  # fmt: skip
    return JobSpec(name=name, cluster="gpu-a", tasks=[task])


def test_it_opens_clone_prefilled_with_a_free_name(logged_in: Client, alice: User) -> None:
    source = create_job(alice, job_spec())
    create_job(alice, job_spec("train-2"))
    html = logged_in.get(f"/jobs/{source.pk}/clone/").content.decode()
    assert "Clone train" in html
    expected = {"name": "train-3", "roles-0-role": "worker", "roles-0-image": "rlinf:1",
                "roles-0-replicas": "2", "roles-0-command": "python train.py",
                "roles-0-args": "--lr 3e-4", "roles-0-cpu": "4", "roles-0-memory": "16Gi",
                "roles-0-gpus": "1", "roles-0-node_selector": "gpu=a100",
                "roles-0-env": "SEED=7"}  # fmt: skip
    for name, value in expected.items():
        assert value_of(html, name) == value, name
    yaml = logged_in.get(f"/jobs/{source.pk}/clone/?mode=yaml").content.decode()
    assert "name: train-3" in yaml and "- python" in yaml


def test_it_creates_the_clone_and_records_it(logged_in: Client, alice: User) -> None:
    source = create_job(alice, job_spec())
    Job.objects.filter(pk=source.pk).update(phase=JobPhase.FAILED)
    data = form(role(role="worker", image="rlinf:1-fixed", replicas="2"), name="train-2")
    response = logged_in.post(f"/jobs/{source.pk}/clone/", data)
    clone = Job.objects.get(name="train-2")
    assert response["Location"] == f"/jobs/{clone.pk}/"
    assert clone.cloned_from == source and clone.phase == JobPhase.PENDING
    assert clone.spec["tasks"][0]["image"] == "rlinf:1-fixed"
    operation = Operation.objects.get(job=clone)
    assert (operation.action, operation.result) == (Action.CLONE, Operation.Result.ACCEPTED)
    assert Job.objects.get(pk=source.pk).phase == JobPhase.FAILED, "the original stays"


def test_it_lets_a_viewer_clone_into_a_project_of_their_own(
    client: Client, alice: User, bob: User, project: Project, other_project: Project,
    cluster: Cluster,
) -> None:  # fmt: skip
    source = create_job(alice, job_spec())
    Membership.objects.filter(user=bob).update(role=Membership.Role.VIEWER)
    client.force_login(bob)
    assert client.get(f"/jobs/{source.pk}/clone/").status_code == 403
    Membership.objects.create(user=bob, project=other_project)
    html = client.get(f"/jobs/{source.pk}/clone/").content.decode()
    assert '<input type="hidden" name="project" value="speech"' in html


def test_it_hides_clone_of_a_job_from_outsiders(
    client: Client, alice: User, charlie: User, cluster: Cluster
) -> None:
    source = create_job(alice, job_spec())
    client.force_login(charlie)
    assert client.get(f"/jobs/{source.pk}/clone/").status_code == 404
    assert client.post(f"/jobs/{source.pk}/clone/", form(role())).status_code == 404


@pytest.mark.parametrize(
    ("name", "taken", "suggested"),
    [
        ("train", [], "train-2"),
        ("train", ["train-2", "train-3"], "train-4"),
        ("train-2", ["train-3"], "train-4"),
        ("rl-run-9", [], "rl-run-10"),
        ("a" * 40, [], "a" * 38 + "-2"),
    ],
)
def test_it_suggests_a_free_name_for_a_clone(name: str, taken: list[str], suggested: str) -> None:
    assert suggest_clone_name(name, taken) == suggested


def test_it_reads_key_value_lines() -> None:
    assert parse_lines("a=1\n\n b = x=y \n", "key=value") == {"a": "1", "b": "x=y"}


# --- the workload policies (issue 10) ---------------------------------------------------------


def test_it_creates_a_job_with_its_policies(logged_in: Client) -> None:
    posted = {**form(role()), "stop_on_completion": "on", "heartbeat_seconds": "15",
              "stall_after_seconds": "", "progress_from_logs": "on"}  # fmt: skip
    response = logged_in.post("/jobs/new/", posted)
    assert response.status_code == 302, response.content.decode()
    assert Job.objects.get().spec["policies"] == {
        "stop_on_completion": True, "heartbeat_seconds": 15, "stall_after_seconds": None,
        "progress_from_logs": True, "stop_when_idle_minutes": None,
    }  # fmt: skip


def test_it_puts_each_policy_error_next_to_its_field(logged_in: Client) -> None:
    posted = {**form(role()), "heartbeat_seconds": "ten", "stall_after_seconds": "3"}
    page = logged_in.post("/jobs/new/", posted).content.decode()
    assert error_of(page, "id_heartbeat_seconds") == "Must be a whole number."
    assert error_of(page, "id_stall_after_seconds") == "Must be at least 5."
    assert value_of(page, "heartbeat_seconds") == "ten", "what was typed is kept"
    assert not Job.objects.exists()


def test_it_prefills_the_clone_with_the_original_policies(logged_in: Client, alice: User) -> None:
    posted = {**form(role()), "stop_on_completion": "on", "stall_after_seconds": "900"}
    assert logged_in.post("/jobs/new/", posted).status_code == 302
    page = logged_in.get(f"/jobs/{Job.objects.get().pk}/clone/").content.decode()
    assert re.search(r'<input type="checkbox" name="stop_on_completion"[^>]* checked', page)
    assert not re.search(r'<input type="checkbox" name="progress_from_logs"[^>]* checked', page)
    assert value_of(page, "heartbeat_seconds") == "30"
    assert value_of(page, "stall_after_seconds") == "900"
    assert "Stopped, with the outcome beside it" in page, "the help text"
