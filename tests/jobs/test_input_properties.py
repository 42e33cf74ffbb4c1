"""Property: whatever spec arrives, as YAML on the create page (either tab switch included) or as
JSON to the API (a new Job or a clone's overrides), the answer is never a 500 and costs under
100 ms. Hostile shapes are generated on purpose: aliases, anchors and merge keys, deep nesting,
NUL bytes, lone surrogates, huge numbers, wrong types, and valid specs changed at random.

The cost is the request's CPU time in the test's thread (the server's work, whatever else the
machine is doing); the wall time is reported too. The suite runs a sample; a longer run sets
TRAINYARD_PROPERTY_EXAMPLES (examples per test) and prints the figures with `-s`.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.models import ApiToken, Cluster
from jobs.models import Job
from jobs.operations import create_job
from jobs.spec import parse_job_spec
from tests.jobs.test_spec import job_data

EXAMPLES = int(os.environ.get("TRAINYARD_PROPERTY_EXAMPLES", "60"))
BUDGET = 0.100
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 60,  # the suite's sample is the same on every run
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
costs: dict[str, list[tuple[float, float]]] = {}

# --- values ---------------------------------------------------------------------------------

bad_text = st.sampled_from(["\x00", "\ud800", "\udfff", "a\x00b", "x\udc80y"])
texts = st.one_of(st.text(max_size=30), bad_text, st.text(max_size=5).map(lambda t: t + "\x00"))
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=0, max_value=4000).map(lambda n: 10**n),
    st.floats(allow_nan=False),
    st.sampled_from([2**63, -(2**63) - 1, 1e308, 10**4299]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def deep(draw: st.DrawFn) -> Any:
    """A list or mapping nested 20 to 700 levels (deeper, Python's own JSON writer stops)."""
    value: Any = draw(scalars)
    for _level in range(draw(st.integers(min_value=20, max_value=700))):
        value = [value] if draw(st.booleans()) else {"a": value}
    return value


FIELDS = [
    "name", "cluster", "project", "namespace", "tasks", "tasks.0", "tasks.0.role",
    "tasks.0.kind", "tasks.0.replicas", "tasks.0.image", "tasks.0.command", "tasks.0.args",
    "tasks.0.args.0", "tasks.0.env", "tasks.0.env.RAY_ADDRESS", "tasks.0.resources",
    "tasks.0.resources.cpu", "tasks.0.resources.memory", "tasks.0.resources.gpu",
    "tasks.0.node_selector", "tasks.1.role", "tasks.1.replicas", "extra",
]  # fmt: skip


def _replace(data: Any, path: str, value: Any) -> Any:
    """`data` with the dotted `path` set to `value`, copying only the containers on the path
    (a deep value is never copied); unchanged when the path no longer exists."""
    head, _, rest = path.partition(".")
    if isinstance(data, dict):
        child = data.get(head, {}) if rest else None
        return {**data, head: _replace(child, rest, value) if rest else value}
    if isinstance(data, list) and head.isdigit() and int(head) < len(data):
        copy = list(data)
        copy[int(head)] = _replace(copy[int(head)], rest, value) if rest else value
        return copy
    return data


@st.composite
def job_specs(draw: st.DrawFn) -> Any:
    """A valid spec with up to four fields replaced by anything, or anything at all."""
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        return draw(st.one_of(values, deep()))
    data = job_data(name=draw(st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)))
    for path in draw(st.lists(st.sampled_from(FIELDS), max_size=4, unique=True)):
        data = _replace(data, path, draw(st.one_of(values, deep())))
    return data


# --- YAML texts -----------------------------------------------------------------------------


def _aliases(width: int, depth: int) -> str:
    lines = [f"a0: &a0 [{','.join(['x'] * width)}]"]
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * width)}]" for i in range(1, depth)]
    return "\n".join(lines) + f"\nname: *a{depth - 1}\n"


HOSTILE_YAML = [
    st.builds(_aliases, st.integers(1, 12), st.integers(1, 12)),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: "{a: " * n + "1" + "}" * n),
    st.integers(1, 200).map(lambda n: "".join(f"{'  ' * i}a:\n" for i in range(n))),
    st.just("base: &b {role: w, image: x}\ntasks:\n- <<: *b\n  replicas: 2\n"),
    st.just("name: !!python/object/apply:os.system ['true']\n"),
    st.just('name: "\\0"\ncluster: "\\ud800"\n'),
    st.integers(1, 60_000).map(lambda n: f"name: {'9' * n}\n"),
    st.just("a: 2024-13-45\nb: 1e99999\nc: 0x" + "f" * 500 + "\n"),
    st.integers(1, 30_000).map(lambda n: "tasks: [" + "1," * n + "]\n"),
    st.text(max_size=200),
]


@st.composite
def yaml_texts(draw: st.DrawFn) -> str:
    """A hostile document, a generated spec written as YAML, or one with text spliced in."""
    choice = draw(st.integers(min_value=0, max_value=2))
    if choice == 0:
        return draw(st.one_of(*HOSTILE_YAML))
    try:
        text = yaml.safe_dump(draw(job_specs()), allow_unicode=False, width=2**20)
    except RecursionError:  # PyYAML's writer recurses too: write the depth by hand
        text = "tasks: " + "[" * 900 + "]" * 900
    if choice == 2:
        at = draw(st.integers(min_value=0, max_value=len(text)))
        text = text[:at] + draw(st.one_of(*HOSTILE_YAML)) + text[at:]
    return text


# --- requests -------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    for name, measured in costs.items():
        cpu = sorted(c for c, _wall in measured)
        wall = sorted(w for _cpu, w in measured)
        print(
            f"\n{name}: {len(measured)} requests, CPU max {cpu[-1] * 1000:.1f} ms, "
            f"p99 {cpu[int(len(cpu) * 0.99)] * 1000:.1f} ms; wall max {wall[-1] * 1000:.1f} ms"
        )


def answer(name: str, send: Callable[[], Any]) -> Any:
    """Sends one request; no 500, and its CPU cost within BUDGET. The garbage collector waits
    while it is measured: a full collection owed to the test process's own heap (hypothesis,
    schemathesis) is no cost of the request."""
    gc.disable()
    try:
        cpu, wall = time.thread_time(), time.perf_counter()
        response = send()
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    finally:
        gc.enable()
    costs.setdefault(name, []).append((cpu, wall))
    assert response.status_code < 500, response.content[:300]
    assert cpu < BUDGET, f"{name} took {cpu * 1000:.0f} ms of CPU"
    return response


@pytest.fixture
def web(client: Client, alice: User, cluster: Cluster) -> Client:
    client.force_login(alice)
    client.get("/jobs/new/")  # the first request builds caches (URL resolver, templates)
    return client


@pytest.fixture
def api(alice: User, cluster: Cluster) -> Callable[[str, str], Any]:
    token = ApiToken.issue(alice, name="property")[1]
    client = Client()

    def post(path: str, body: str) -> Any:
        headers = {"Authorization": f"Bearer {token}"}
        return client.post(path, body, content_type="application/json", headers=headers)

    post("/api/v1/jobs", "{}")  # warm up, as above
    return post


@SETTINGS
@given(text=yaml_texts(), switch=st.sampled_from(["", "form"]))
def test_any_yaml_on_the_create_page_is_judged_without_500_in_100_ms(
    web: Client, text: str, switch: str
) -> None:
    data = {"mode": "yaml", "yaml": text, "switch": switch}
    response = answer("YAML create page", lambda: web.post("/jobs/new/", data))
    assert response.status_code in (200, 302)


@SETTINGS
@given(spec=job_specs())
def test_any_json_spec_is_judged_without_500_in_100_ms(
    api: Callable[[str, str], Any], spec: Any
) -> None:
    response = answer("JSON POST /jobs", lambda: api("/api/v1/jobs", json.dumps(spec)))
    assert response.status_code in (201, 403, 413, 422)


@pytest.fixture
def source(alice: User, cluster: Cluster) -> Job:
    return create_job(alice, parse_job_spec(job_data(name="source"), alice))


@SETTINGS
@given(overrides=job_specs(), name=st.one_of(texts, values))
def test_any_clone_override_is_judged_without_500_in_100_ms(
    api: Callable[[str, str], Any], source: Job, overrides: Any, name: Any
) -> None:
    body = json.dumps({"name": name, "overrides": overrides})
    path = f"/api/v1/jobs/{source.pk}/clone"
    response = answer("JSON POST /jobs/{id}/clone", lambda: api(path, body))
    assert response.status_code in (201, 403, 413, 422)
