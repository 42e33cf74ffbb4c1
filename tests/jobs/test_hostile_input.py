"""Bad input costs nothing and never answers 500: YAML that expands or nests without end, text
the database cannot store, values of the wrong type. Each is refused with the field and the
reason, wherever YAML or JSON enters (the YAML and clone tabs, the API, the admin's kubeconfig
field, `add_cluster`), and judged within a small, fixed budget of time and memory."""

from __future__ import annotations

import gc
import html as html_lib
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import translation

from console.kubeconfig import KubeconfigRejected, validate_kubeconfig
from console.models import ApiToken, Cluster
from jobs.models import Job
from jobs.operations import create_job
from jobs.spec import SpecInvalid, job_spec_from_yaml, parse_job_spec
from tests.conftest import KUBECONFIG
from tests.jobs.test_spec import job_data, put
from tests.web.test_jobs_form import form, role, value_of

DEEP = "[" * 900 + "]" * 900
# Nine levels of nine aliases: 432 bytes that PyYAML expands to 9**9 strings before any check.
LAUGHS = "a0: &a0 [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)
)


def yaml_errors(text: str, user: User) -> dict[str, str]:
    with pytest.raises(SpecInvalid) as refused:
        job_spec_from_yaml(text, user)
    return refused.value.errors


def api(user: User, method: str, path: str, raw: str) -> Any:
    token = ApiToken.issue(user, name="test")[1]
    client = Client(enforce_csrf_checks=True)
    return getattr(client, method)(
        f"/api/v1{path}",
        data=raw,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


@pytest.fixture
def job(alice: User, cluster: Cluster) -> Job:
    return create_job(alice, parse_job_spec(job_data(), alice))


# --- item 15: YAML that expands is refused before it costs anything ------------------------


def test_it_refuses_chained_aliases_within_50_ms_and_20_mb(alice: User, cluster: Cluster) -> None:
    text = LAUGHS + "name: *a8\ncluster: gpu-a\ntasks: [{role: w, image: x}]\n"
    assert len(text.encode()) < 500
    tracemalloc.start()
    started = time.thread_time()  # CPU time: a busy machine stretches wall time, not this
    try:
        errors = yaml_errors(text, alice)
        elapsed = time.thread_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert errors == {
        "yaml": "Line 1, column 5: anchors and aliases (&name, *name) are not accepted; "
        "write each value out."
    }
    assert elapsed < 0.05 and peak < 20 * 2**20, (elapsed, peak)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: &n train\n", "Line 1, column 7: anchors and aliases"),
        ("name: *n\n", "Line 1, column 7: anchors and aliases"),
        ("tasks:\n- <<: {role: w}\n  image: x\n", "Line 2, column 3: merge keys (<<) are not"),
    ],
)
def test_it_refuses_anchors_aliases_and_merge_keys(
    alice: User, cluster: Cluster, text: str, expected: str
) -> None:
    assert yaml_errors(text, alice)["yaml"].startswith(expected)


def test_it_refuses_a_spec_of_too_many_values_fast(alice: User, cluster: Cluster) -> None:
    """Under the size cap, 30,000 values would take PyYAML a third of a second to build."""
    text = "name: x\ncluster: gpu-a\ntasks: [{role: w, image: x, args: [" + "1," * 30_000 + "]}]"
    assert len(text.encode()) < 64 * 1024
    gc.collect()  # a full collection of what earlier tests left is not this parse's cost
    started = time.thread_time()  # CPU time: a busy machine stretches wall time, not this
    errors = yaml_errors(text, alice)
    assert time.thread_time() - started < 0.05
    assert "more than 2000 values" in errors["yaml"]


# --- item 16: nesting, NUL, surrogates and wrong types are 4xx naming the field -------------


def test_it_refuses_deep_nesting_in_yaml_on_the_yaml_and_clone_tabs(
    client: Client, alice: User, job: Job
) -> None:
    deep = "Line 1, column 21: nested more than 20 levels deep."
    assert yaml_errors(DEEP, alice) == {"yaml": deep}
    client.force_login(alice)
    for url in ("/jobs/new/", f"/jobs/{job.pk}/clone/"):
        response = client.post(url, {"mode": "yaml", "yaml": f"name: {DEEP}\n"})
        assert response.status_code == 200
        assert "nested more than 20 levels deep" in response.content.decode()


def test_it_refuses_deep_nesting_in_a_kubeconfig_in_the_admin_and_add_cluster(
    olga: User, tmp_path: Path
) -> None:
    with pytest.raises(KubeconfigRejected, match="nested more than 20 levels deep"):
        validate_kubeconfig(KUBECONFIG + f"extra: {DEEP}\n")
    olga.is_superuser = olga.is_staff = True
    olga.save()
    client = Client()
    client.force_login(olga)
    data = {"name": "gpu-b", "kubeconfig": DEEP, "namespace": "default", "context": ""}
    response = client.post("/admin/console/cluster/add/", data)
    assert response.status_code == 200
    assert "nested more than 20 levels deep" in response.content.decode()
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG + "extra:\n" + "".join(f"  {line}\n" for line in LAUGHS.split("\n")))
    with pytest.raises(CommandError, match="anchors and aliases"):
        call_command("add_cluster", "gpu-b", "--kubeconfig", str(path))


def test_it_refuses_deep_nesting_in_a_json_body(alice: User, cluster: Cluster) -> None:
    nested: Any = "x"
    for _level in range(900):
        nested = [nested]
    body = json.dumps(job_data(tasks=[{"role": "w", "image": "x", "args": nested}]))
    response = api(alice, "post", "/jobs", body)
    assert response.status_code == 422
    [(path, message)] = response.json()["errors"].items()
    assert path.startswith("tasks.0.args.0.0") and message == "Nested more than 20 levels deep."


STRING_FIELDS = [
    "name",
    "cluster",
    "project",
    "namespace",
    "tasks.0.role",
    "tasks.0.image",
    "tasks.0.command.0",
    "tasks.0.args.1",
    "tasks.0.env.RAY_ADDRESS",
    "tasks.0.node_selector.nvidia.com/gpu.product",
    "tasks.0.resources.memory",
]
BAD_TEXT = {
    "\x00": "Contains a NUL character (\\u0000), which cannot be stored.",
    "\ud800": "Contains an unpaired surrogate (such as \\ud800): not valid Unicode text.",
}


def _put_text(path: str, text: str) -> dict[str, Any]:
    """job_data with `text` appended to the string at `path` ("x" where there is none); a node
    selector's label key holds dots, so its path is split by hand."""
    data = job_data()
    if path.startswith("tasks.0.node_selector."):
        data["tasks"][0]["node_selector"][path.removeprefix("tasks.0.node_selector.")] += text
        return data
    value: Any = data
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value.get(part, "x")
    return put(data, path, value + text)


@pytest.mark.parametrize("field", STRING_FIELDS)
@pytest.mark.parametrize("text", list(BAD_TEXT))
def test_it_refuses_nul_and_lone_surrogates_naming_the_field(
    alice: User, cluster: Cluster, field: str, text: str
) -> None:
    """PostgreSQL stores no NUL in text or jsonb; a lone surrogate is not Unicode at all. CI runs
    this on PostgreSQL too (DATABASE_URL)."""
    response = api(alice, "post", "/jobs", json.dumps(_put_text(field, text)))
    assert response.status_code == 422, response.content
    assert response.json()["errors"] == {field: BAD_TEXT[text]}
    assert not Job.objects.exists()


@pytest.mark.parametrize("text", list(BAD_TEXT))
def test_it_refuses_nul_and_surrogates_in_a_mapping_key(
    alice: User, cluster: Cluster, text: str
) -> None:
    data = put(job_data(), f"tasks.1.env.A{text}", "1")
    response = api(alice, "post", "/jobs", json.dumps(data))
    assert response.status_code == 422
    escaped = "A\\x00" if text == "\x00" else "A\\ud800"
    assert response.json()["errors"] == {f"tasks.1.env.{escaped}": BAD_TEXT[text]}


@pytest.mark.parametrize("escape", ["\\0", "\\ud800"])
def test_it_refuses_nul_and_surrogates_written_as_yaml_escapes(
    client: Client, alice: User, cluster: Cluster, escape: str
) -> None:
    text = f'name: train\ncluster: gpu-a\ntasks: [{{role: w, image: x, env: {{A: "1{escape}"}}}}]'
    client.force_login(alice)
    html = client.post("/jobs/new/", {"mode": "yaml", "yaml": text}).content.decode()
    if escape == "\\0":
        assert "tasks.0.env.A: Contains a NUL character" in html
    else:  # libyaml itself refuses an escape that names half a character
        assert "Line 4, column" not in html and "backslash escape" in html
    assert not Job.objects.exists()


def test_a_clone_override_of_the_wrong_type_is_422_naming_the_field(alice: User, job: Job) -> None:
    body = {"name": "train-2", "overrides": {"tasks": [{"role": ["x"]}]}}
    response = api(alice, "post", f"/jobs/{job.pk}/clone", json.dumps(body))
    assert response.status_code == 422
    assert response.json()["errors"]["tasks.2.role"] == "Must be a string."


def test_a_deep_clone_override_is_422_naming_the_field(alice: User, job: Job) -> None:
    nested: Any = {}
    for _level in range(900):
        nested = {"a": nested}
    body = {"name": "train-2", "overrides": {"tasks": [{"role": "head", "env": nested}]}}
    response = api(alice, "post", f"/jobs/{job.pk}/clone", json.dumps(body))
    assert response.status_code == 422
    [path] = response.json()["errors"]
    assert path.startswith("overrides.tasks.0.env.a.a")


def test_a_body_over_the_spec_cap_is_413(alice: User, cluster: Cluster) -> None:
    body = json.dumps(job_data(tasks=[{"role": "w", "image": "x", "args": ["y" * 70_000]}]))
    response = api(alice, "post", "/jobs", body)
    assert response.status_code == 413
    assert response.json() == {"message": "The request body is larger than 64 KiB."}


@pytest.mark.parametrize("switch", ["", "yaml"])
def test_a_form_claiming_a_hundred_million_roles_builds_at_most_twenty(
    client: Client, alice: User, cluster: Cluster, switch: str
) -> None:
    """Django builds up to max_num + 1,000 forms for a posted TOTAL_FORMS: 1,020 empty role
    forms took 8 s to render. At most MAX_TASKS are built, as for a real spec of 20 roles."""
    client.force_login(alice)
    data = {**form(role()), "roles-TOTAL_FORMS": str(10**8), "switch": switch}
    page = client.post("/jobs/new/", data).content.decode()
    if switch:
        assert len(yaml.safe_load(html_lib.unescape(value_of(page, "yaml")))["tasks"]) == 20
    else:
        assert page.count('<fieldset class="card role">') == 20
        assert "Please submit at most 20 forms." in page


# --- item 13: YAML errors in plain words, in the reader's language --------------------------

PLAIN_WORDS = [
    ("name: a: b\n", "Line 1, column 8: a ': ' cannot start a value here; put quotes around "
     "text that contains ': '."),
    ("tasks:\n  - role: a\n   image: b\n", "Line 3, column 4: expected a list item ('- ...') "
     "at this indentation."),
    ("a:\n  b: 1\n c: 2\n", "Line 3, column 2: expected 'key: value' at this indentation; "
     "check the spaces."),
    ("name: x\n\tcluster: y\n", "Line 2, column 1: a tab cannot indent YAML; use spaces."),
    ('name: "abc\n', "Line 2, column 1: the text ends inside quotes; close the quote."),
    ("a: [1, 2\n", "Line 2, column 1: expected ',' or ']' to go on with or close the list."),
    ("a: @x\n", "Line 1, column 4: this character cannot start a value; put the value in quotes."),
    ("a: !!python/object:os.system x\n", "Line 1, column 4: tags (!!python/..., !custom) are "
     "not accepted; write plain values."),
    ("a: 1\n---\nb: 2\n", "Line 2, column 1: expected a single document; remove the '---' and "
     "what follows."),
    ("a: 2024-13-45\n", "Line 1, column 4: this value cannot be read (a date or number out of "
     "range?); put it in quotes."),
    ("a: " + "9" * 5000 + "\n", "Line 1, column 4: this value cannot be read (a date or number "
     "out of range?); put it in quotes."),
    ("a: b\x07\n", "Line 1, column 5: the text contains a control character (such as NUL), "
     "which YAML does not allow."),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), PLAIN_WORDS)
def test_it_says_where_and_what_was_expected_in_plain_words(
    alice: User, cluster: Cluster, text: str, expected: str
) -> None:
    assert yaml_errors(text, alice) == {"yaml": expected}


def test_it_says_it_in_chinese_too(alice: User, cluster: Cluster) -> None:
    with translation.override("zh-hans"):
        message = yaml_errors("name: x\n\tcluster: y\n", alice)["yaml"]
    assert message == "第 2 行第 1 列：YAML 不能用制表符缩进，请用空格。"
