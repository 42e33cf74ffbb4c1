"""The create page's Form and YAML tabs show one spec: switching carries what was typed across,
both ways, and the errors on show with it; without JavaScript too (the tabs post the spec)."""

from __future__ import annotations

import html as html_lib
import re
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from console.models import Cluster
from jobs.models import Job
from tests.web.test_jobs_form import error_of, form, role, value_of


@pytest.fixture
def logged_in(client: Client, alice: User, cluster: Cluster) -> Client:
    client.force_login(alice)
    return client


def yaml_of(page: str) -> Any:
    return yaml.safe_load(html_lib.unescape(value_of(page, "yaml")))


def current_tab(page: str) -> str:
    match = re.search(r'<span class="tab"[^>]*aria-current="page">([^<]+)</span>', page)
    assert match
    return match.group(1)


TYPED = role(role="learner", image="rlinf:2", replicas="3", command="python -m train",
             args="--lr '0.1 0.2'", cpu="4", memory="16Gi", gpus="1",
             env="A=1\nB=two", node_selector="pool=a100")  # fmt: skip


def test_it_carries_what_was_typed_from_the_form_to_the_yaml_tab(logged_in: Client) -> None:
    page = logged_in.post("/jobs/new/", {**form(TYPED, name="ppo"), "switch": "yaml"})
    assert page.status_code == 200
    page_text = page.content.decode()
    assert current_tab(page_text) == "YAML"
    assert yaml_of(page_text) == {
        "name": "ppo",
        "cluster": "gpu-a",
        "project": "vision",
        "tasks": [
            {
                "role": "learner",
                "kind": "StatefulSet",
                "replicas": 3,
                "image": "rlinf:2",
                "command": ["python", "-m", "train"],
                "args": ["--lr", "0.1 0.2"],
                "env": {"A": "1", "B": "two"},
                "resources": {"cpu": "4", "memory": "16Gi", "gpu": 1},
                "node_selector": {"pool": "a100"},
                "tolerations": [],
                "volumes": [],
            }
        ],
        "policies": {
            "stop_on_completion": False,
            "heartbeat_seconds": 30,
            "progress_from_logs": False,
        },
    }
    assert "errorlist" not in page_text  # nothing was submitted: no errors yet
    assert not Job.objects.exists()


def test_it_carries_the_yaml_to_the_form_tab_and_back_unchanged(logged_in: Client) -> None:
    first = logged_in.post("/jobs/new/", {**form(TYPED, name="ppo"), "switch": "yaml"})
    text = html_lib.unescape(value_of(first.content.decode(), "yaml"))
    edited = text.replace("replicas: 3", "replicas: 5").replace("name: ppo", "name: ppo-2")
    page = logged_in.post("/jobs/new/", {"mode": "yaml", "yaml": edited, "switch": "form"})
    page_text = page.content.decode()
    assert current_tab(page_text) == "Form"
    assert value_of(page_text, "name") == "ppo-2"
    assert value_of(page_text, "roles-0-replicas") == "5"
    assert value_of(page_text, "roles-0-args") == "--lr &#x27;0.1 0.2&#x27;"
    assert html_lib.unescape(value_of(page_text, "roles-0-env")) == "A=1\nB=two"
    posted = {**form(TYPED, name="ppo-2"), "roles-0-replicas": "5", "switch": "yaml"}
    back = logged_in.post("/jobs/new/", posted)
    assert yaml_of(back.content.decode()) == yaml.safe_load(edited)


def test_it_carries_the_form_errors_to_the_yaml_tab(logged_in: Client) -> None:
    bad = form(role(replicas="three", image=""), name="Bad_Name")
    shown = logged_in.post("/jobs/new/", bad).content.decode()
    assert 'name="checked"' in shown  # the form showed errors
    page = logged_in.post("/jobs/new/", {**bad, "checked": "1", "switch": "yaml"}).content.decode()
    errors = error_of(page, "id_yaml")
    assert "name: &#x27;Bad_Name&#x27; is not a valid job name" in errors
    assert "tasks.0.replicas: Must be a whole number." in errors
    assert "tasks.0.image: The image is required." in errors
    assert yaml_of(page)["tasks"][0]["replicas"] == "three"


def test_it_carries_the_yaml_errors_to_the_form_tab(logged_in: Client) -> None:
    text = "name: ppo\ncluster: gpu-a\ntasks:\n- role: w\n  image: x\n  replicas: -1\n"
    page = logged_in.post(
        "/jobs/new/", {"mode": "yaml", "yaml": text, "checked": "1", "switch": "form"}
    ).content.decode()
    assert current_tab(page) == "Form"
    assert error_of(page, "id_roles-0-replicas") == "Must be at least 0."
    assert value_of(page, "roles-0-replicas") == "-1"


def test_it_keeps_what_the_form_cannot_parse_as_typed(logged_in: Client) -> None:
    typed = form(role(command="python 'unclosed", env="NOT A LINE"))
    page = logged_in.post("/jobs/new/", {**typed, "switch": "yaml"}).content.decode()
    task = yaml_of(page)["tasks"][0]
    assert task["command"] == "python 'unclosed" and task["env"] == "NOT A LINE"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("name: [x\n", "Line 2, column 1: expected &#x27;,&#x27; or &#x27;]&#x27;"),
        ("name: x\ncolor: red\n", "The form has no field for color"),
        ("name: x\ntasks:\n- role: w\n  env: [A]\n", "The form cannot show tasks.0.env"),
        (
            "name: x\ntasks:\n- role: w\n  volumes: [{claim: out, mount_path: /out}]\n",
            "The form has no field for tasks.0.volumes",
        ),
        (
            "name: x\ntasks:\n- role: w\n  shm_size: 8Gi\n",
            "The form has no field for tasks.0.shm_size",
        ),
        ("- just\n- a list\n", "The YAML must be a mapping"),
        ("tasks:\n" + "- {role: w}\n" * 21, "The form shows at most 20 roles"),
    ],
)
def test_it_stays_on_the_yaml_tab_when_the_form_cannot_hold_it(
    logged_in: Client, text: str, reason: str
) -> None:
    page = logged_in.post(
        "/jobs/new/", {"mode": "yaml", "yaml": text, "switch": "form"}
    ).content.decode()
    assert current_tab(page) == "YAML"
    assert reason in error_of(page, "id_yaml")
    assert html_lib.unescape(value_of(page, "yaml")) == text.rstrip("\n")


def test_the_tabs_work_on_the_clone_page_too(logged_in: Client, alice: User) -> None:
    logged_in.post("/jobs/new/", form(TYPED, name="ppo"))
    job = Job.objects.get(name="ppo")
    page = logged_in.get(f"/jobs/{job.pk}/clone/").content.decode()
    assert 'name="switch" value="yaml"' in page
    posted = {**form(TYPED, name="ppo-2"), "switch": "yaml"}
    page = logged_in.post(f"/jobs/{job.pk}/clone/", posted).content.decode()
    assert yaml_of(page)["name"] == "ppo-2"


def test_it_carries_the_policies_between_the_tabs(logged_in: Client) -> None:
    """Issue 10: the Job's policies are fields of the form and a mapping of the YAML."""
    typed = {**form(TYPED, name="ppo"), "stop_on_completion": "on", "heartbeat_seconds": "10",
             "stall_after_seconds": "600", "switch": "yaml"}  # fmt: skip
    page = logged_in.post("/jobs/new/", typed).content.decode()
    policies = {"stop_on_completion": True, "heartbeat_seconds": 10,
                "stall_after_seconds": 600, "progress_from_logs": False}  # fmt: skip
    assert yaml_of(page)["policies"] == policies
    text = html_lib.unescape(value_of(page, "yaml"))
    text = text.replace("progress_from_logs: false", "progress_from_logs: true")
    back = logged_in.post("/jobs/new/", {"mode": "yaml", "yaml": text, "switch": "form"})
    shown = back.content.decode()
    assert current_tab(shown) == "Form"
    assert re.search(r'<input type="checkbox" name="stop_on_completion"[^>]* checked', shown)
    assert re.search(r'<input type="checkbox" name="progress_from_logs"[^>]* checked', shown)
    assert value_of(shown, "heartbeat_seconds") == "10"
    assert value_of(shown, "stall_after_seconds") == "600"


def test_it_carries_policy_errors_from_the_yaml_to_their_fields(logged_in: Client) -> None:
    text = ("name: ppo\ncluster: gpu-a\ntasks:\n- role: w\n  image: x\n"
            "policies: {heartbeat_seconds: 2, stop_on_completion: maybe}\n")  # fmt: skip
    page = logged_in.post(
        "/jobs/new/", {"mode": "yaml", "yaml": text, "checked": "1", "switch": "form"}
    ).content.decode()
    assert current_tab(page) == "Form"
    assert error_of(page, "id_heartbeat_seconds") == "Must be at least 5."
    assert error_of(page, "id_stop_on_completion") == "Must be true or false."
    unknown = "name: ppo\npolicies: {retry: 3}\n"
    page = logged_in.post(
        "/jobs/new/", {"mode": "yaml", "yaml": unknown, "switch": "form"}
    ).content.decode()
    assert current_tab(page) == "YAML"
    assert "The form has no field for policies.retry" in error_of(page, "id_yaml")
