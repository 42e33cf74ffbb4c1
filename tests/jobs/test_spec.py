"""The JobSpec schema: every field's rule, all errors at once, YAML import/export, clone merging.

Names and quantities follow Kubernetes' own rules, because the console turns a spec into
StatefulSets, batch Jobs and headless Services named `<job>-<role>` (contract: Kubernetes names).
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from console.models import Cluster, Membership, Project
from jobs.models import Job, Workflow
from jobs.spec import (
    JobSpec,
    SpecInvalid,
    job_spec_from_yaml,
    job_spec_to_yaml,
    merge_overrides,
    parse_job_spec,
    parse_workflow_spec,
    quantity_value,
    spec_of,
)


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def job_data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "ppo-math",
        "cluster": "gpu-a",
        "tasks": [
            {
                "role": "head",
                "image": "rlinf/rlinf:0.3",
                "command": ["python", "-m", "rlinf.train"],
                "args": ["--config", "ppo.yaml"],
                "env": {"RAY_ADDRESS": "auto"},
                "resources": {"cpu": "4", "memory": "16Gi", "gpu": 1},
                "node_selector": {"nvidia.com/gpu.product": "A100-SXM4-80GB"},
                "volumes": [{"claim": "outputs", "mount_path": "/outputs"}],
                "tolerations": [
                    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
                ],
            },
            {"role": "worker", "replicas": 4, "image": "rlinf/rlinf:0.3"},
        ],
    }
    data.update(changes)
    return data


def put(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `data` with the dotted `path` (creating mappings on the way) set to `value`."""
    data = copy.deepcopy(data)
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    node[int(last) if isinstance(node, list) else last] = value
    return data


def errors_of(data: Any, user: User) -> dict[str, str]:
    with pytest.raises(SpecInvalid) as refused:
        parse_job_spec(data, user)
    return refused.value.errors


INVALID = [
    ("name", "Bad_Name"),
    ("name", "ppo-"),
    ("name", "-ppo"),
    ("name", "1ppo"),  # a Service name (DNS-1035) starts with a letter
    ("name", "a" * 41),
    ("name", ""),
    ("name", 7),
    ("cluster", 3),
    ("namespace", "Team_A"),
    ("namespace", "a" * 64),
    ("tasks.0.role", "Head"),
    ("tasks.0.role", "a" * 13),
    ("tasks.0.role", ""),
    ("tasks.0.kind", "Deployment"),
    ("tasks.0.replicas", -1),
    ("tasks.0.replicas", 1001),
    ("tasks.0.replicas", 10**30),
    ("tasks.0.replicas", 1.5),
    ("tasks.0.replicas", True),
    ("tasks.0.replicas", "four"),
    ("tasks.0.image", ""),
    ("tasks.0.image", "   "),
    ("tasks.0.image", "rlinf/rlinf :0.3"),
    ("tasks.0.image", 5),
    ("tasks.0.command", "python train.py"),
    ("tasks.0.command.0", 1),
    ("tasks.0.args.1", 0.001),
    ("tasks.0.env", ["A=1"]),
    ("tasks.0.env", {"1A": "x"}),
    ("tasks.0.env", {"A-B": "x"}),
    ("tasks.0.env", {"TRAINYARD_RUN": "x"}),
    ("tasks.0.env.LR", 0.001),
    ("tasks.0.resources.cpu", "-1"),
    ("tasks.0.resources.cpu", "4 GB"),
    ("tasks.0.resources.cpu", "abc"),
    ("tasks.0.resources.cpu", "0"),
    ("tasks.0.resources.cpu", ""),
    ("tasks.0.resources.cpu", "1.2.3"),
    ("tasks.0.resources.cpu", True),
    ("tasks.0.resources.cpu", -2),
    ("tasks.0.resources.memory", "-1"),
    ("tasks.0.resources.memory", "4 GB"),
    ("tasks.0.resources.memory", "abc"),
    ("tasks.0.resources.memory", "0"),
    ("tasks.0.resources.memory", "0Gi"),
    ("tasks.0.resources.memory", "512m"),
    ("tasks.0.resources.memory", "16GiB"),
    ("tasks.0.resources.memory", "1e999"),
    ("tasks.0.resources.gpu", -1),
    ("tasks.0.resources.gpu", 65),
    ("tasks.0.resources.gpu", 0.5),
    ("tasks.0.resources.gpu", "two"),
    ("tasks.0.resources.gpu", False),
    ("tasks.0.resources.tpu", 1),
    ("tasks.0.node_selector", {"bad key!": "x"}),
    ("tasks.0.node_selector", {"gpu": "A100 80GB"}),
    ("tasks.0.node_selector", {"x" * 64: "v"}),
    ("tasks.0.node_selector", {"-bad.com/gpu": "v"}),
    ("tasks.0.node_selector", {"gpu": "v" * 64}),
    ("tasks.0.node_selector.gpu", 1),
    ("tasks.0.priority", "high"),
    # storage and placement (issue 11, item 3)
    ("tasks.0.volumes", {"claim": "outputs", "mount_path": "/outputs"}),
    ("tasks.0.volumes", [{"claim": f"c{i}", "mount_path": f"/m{i}"} for i in range(9)]),
    (
        "tasks.0.volumes",
        [{"claim": "a", "mount_path": "/out"}, {"claim": "b", "mount_path": "/out"}],
    ),
    (
        "tasks.0.volumes",
        [{"claim": "a", "mount_path": "/out"}, {"claim": "b", "mount_path": "/out/ckpt"}],
    ),
    ("tasks.0.volumes.0", "outputs"),
    ("tasks.0.volumes.0.claim", "Outputs"),
    ("tasks.0.volumes.0.claim", "out_puts"),
    ("tasks.0.volumes.0.claim", "a" * 254),
    ("tasks.0.volumes.0.mount_path", "outputs"),
    ("tasks.0.volumes.0.mount_path", "/"),
    ("tasks.0.volumes.0.mount_path", "/outputs/"),
    ("tasks.0.volumes.0.mount_path", "/outputs/../etc"),
    ("tasks.0.volumes.0.mount_path", "/dev/shm"),
    ("tasks.0.volumes.0.mount_path", "/proc"),
    ("tasks.0.volumes.0.mount_path", "/sys/fs"),
    ("tasks.0.volumes.0.read_only", "yes"),
    ("tasks.0.volumes.0.sub_path", "/abs"),
    ("tasks.0.volumes.0.sub_path", "a/../../b"),
    ("tasks.0.volumes.0.sub_path", ""),
    ("tasks.0.volumes.0.size", "10Gi"),
    ("tasks.0.shm_size", "8 GB"),
    ("tasks.0.shm_size", "0"),
    ("tasks.0.shm_size", "512m"),
    ("tasks.0.shm_size", "32Gi"),  # above the 16Gi memory request
    ("tasks.0.tolerations", {"key": "pool"}),
    ("tasks.0.tolerations.0", "pool"),
    ("tasks.0.tolerations.0.key", "bad key!"),
    ("tasks.0.tolerations.0.operator", "In"),
    ("tasks.0.tolerations.0.effect", "NoScheduled"),
    ("tasks.0.tolerations.0.value", "A100 80GB"),
    ("tasks.0.tolerations.0.toleration_seconds", 1.5),
    ("tasks.0.tolerations.0.toleration_seconds", True),
    ("tasks", []),
    ("tasks", "head"),
    ("tasks", [{"role": f"r{i}", "image": "busybox"} for i in range(21)]),
    ("tasks.1", "worker"),
    ("queue", "default"),
]


@pytest.mark.parametrize(("path", "value"), INVALID)
def test_it_refuses_a_bad_value_under_its_dotted_path(
    alice: User, cluster: Cluster, path: str, value: Any
) -> None:
    errors = errors_of(put(job_data(), path, value), alice)
    assert list(errors) == [path]
    assert all(message.endswith(".") and "pydantic" not in message for message in errors.values())


VALID = [
    ("tasks.0.resources.cpu", "500m", "500m"),
    ("tasks.0.resources.cpu", "1.5", "1.5"),
    ("tasks.0.resources.cpu", ".5", ".5"),
    ("tasks.0.resources.cpu", 4, "4"),
    ("tasks.0.resources.cpu", 0.5, "0.5"),
    ("tasks.0.resources.cpu", "2e3", "2e3"),
    ("tasks.0.resources.memory", "512Mi", "512Mi"),
    ("tasks.0.resources.memory", "1.5Gi", "1.5Gi"),
    ("tasks.0.resources.memory", "1G", "1G"),
    ("tasks.0.resources.memory", "128974848", "128974848"),
    ("tasks.0.resources.gpu", 0, 0),
    ("tasks.0.resources.gpu", 64, 64),
    ("tasks.0.replicas", 0, 0),
    ("tasks.0.replicas", 1000, 1000),
    ("tasks.0.replicas", "3", 3),
    ("tasks.0.kind", "Job", "Job"),
    ("tasks.0.env", {"_X": "", "LR": "0.001"}, {"_X": "", "LR": "0.001"}),
    ("tasks.0.node_selector", {"kubernetes.io/hostname": "node-1", "pool": ""}, None),
    ("tasks.0.image", "registry.example.com:5000/rl/rlinf@sha256:" + "a" * 64, None),
    ("name", "a" * 40, None),
    ("namespace", "team-a", "team-a"),
    ("tasks.0.volumes.0.claim", "rlinf.outputs-1", None),
    ("tasks.0.volumes.0.mount_path", "/outputs/run-1", None),
    ("tasks.0.volumes.0.sub_path", "runs/ppo", None),
    ("tasks.0.volumes.0.read_only", True, None),
    ("tasks.0.shm_size", "16Gi", None),
    ("tasks.0.shm_size", 1073741824, "1073741824"),
    ("tasks.0.shm_size", None, None),
    ("tasks.0.tolerations.0.key", "nvidia.com/gpu", None),
    ("tasks.0.tolerations.0.value", "a100", None),
]


@pytest.mark.parametrize(("path", "value", "stored"), VALID)
def test_it_accepts_kubernetes_values(
    alice: User, cluster: Cluster, path: str, value: Any, stored: Any
) -> None:
    data = put(job_data(), path, value)
    if path == "name":
        data = put(data, "tasks.1.role", "w")  # keep `<job>-<role>` within 52 characters
        data["tasks"][0]["role"] = "h"
    dumped = parse_job_spec(data, alice).model_dump(mode="json")
    node: Any = dumped
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    assert node == (value if stored is None else stored)


TOLERATION_RULES = [
    ({"operator": "Equal"}, "operator", "must be Exists when the key is empty"),
    ({"key": "pool", "operator": "Exists", "value": "a100"}, "value", "must be empty"),
    (
        {"key": "pool", "effect": "NoSchedule", "toleration_seconds": 60},
        "toleration_seconds",
        "NoExecute",
    ),
]


@pytest.mark.parametrize(("toleration", "field", "words"), TOLERATION_RULES)
def test_it_checks_a_toleration_as_the_api_server_does(
    alice: User, cluster: Cluster, toleration: dict[str, Any], field: str, words: str
) -> None:
    errors = errors_of(put(job_data(), "tasks.0.tolerations", [toleration]), alice)
    assert list(errors) == [f"tasks.0.tolerations.0.{field}"]
    assert words in errors[f"tasks.0.tolerations.0.{field}"]


def test_it_accepts_the_tolerations_kubernetes_accepts(alice: User, cluster: Cluster) -> None:
    tolerations = [
        {"operator": "Exists"},
        {"key": "pool", "operator": "Exists", "effect": "PreferNoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "toleration_seconds": 600},
        {"key": "pool", "value": "", "effect": ""},
    ]  # fmt: skip
    spec = parse_job_spec(put(job_data(), "tasks.0.tolerations", tolerations), alice)
    assert [t.model_dump() for t in spec.tasks[0].tolerations] == [
        {"key": "", "operator": "Exists", "value": "", "effect": "", "toleration_seconds": None},
        {"key": "pool", "operator": "Exists", "value": "", "effect": "PreferNoSchedule",
         "toleration_seconds": None},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "value": "",
         "effect": "NoExecute", "toleration_seconds": 600},
        {"key": "pool", "operator": "Equal", "value": "", "effect": "", "toleration_seconds": None},
    ]  # fmt: skip


def test_it_names_both_overlapping_mount_paths(alice: User, cluster: Cluster) -> None:
    volumes = [{"claim": "a", "mount_path": "/out"}, {"claim": "b", "mount_path": "/out/ckpt"}]
    errors = errors_of(put(job_data(), "tasks.0.volumes", volumes), alice)
    assert "'/out'" in errors["tasks.0.volumes"] and "'/out/ckpt'" in errors["tasks.0.volumes"]


def test_a_task_stored_before_the_storage_fields_still_reads(alice: User, cluster: Cluster) -> None:
    """Old `Job.spec["tasks"]` have no volumes, tolerations nor shm_size: the defaults apply."""
    spec = JobSpec.model_validate(job_data(tasks=[{"role": "head", "image": "rlinf/rlinf:0.3"}]))
    head = spec.tasks[0]
    assert (head.volumes, head.tolerations, head.shm_size) == ([], [], None)


def test_it_reports_every_error_at_once(alice: User, cluster: Cluster) -> None:
    data = put(job_data(name="Bad Name", cluster="nowhere"), "tasks.0.image", "")
    data = put(data, "tasks.1.resources.memory", "4 GB")
    data = put(data, "tasks.1.replicas", 5000)
    errors = errors_of(data, alice)
    assert set(errors) == {
        "name",
        "cluster",
        "tasks.0.image",
        "tasks.1.resources.memory",
        "tasks.1.replicas",
    }
    assert "nowhere" in errors["cluster"] and "gpu-a" in errors["cluster"]


def test_it_fills_in_defaults_the_engine_relies_on(alice: User, cluster: Cluster) -> None:
    worker = parse_job_spec(job_data(), alice).model_dump(mode="json")["tasks"][1]
    assert worker == {
        "role": "worker",
        "kind": "StatefulSet",
        "replicas": 4,
        "image": "rlinf/rlinf:0.3",
        "command": [],
        "args": [],
        "env": {},
        "resources": {"cpu": "1", "memory": "1Gi", "gpu": 0},
        "node_selector": {},
        "tolerations": [],
        "volumes": [],
        "shm_size": None,
    }


def test_it_refuses_a_role_used_twice(alice: User, cluster: Cluster) -> None:
    data = put(job_data(), "tasks.1.role", "head")
    assert errors_of(data, alice) == {"tasks.1.role": "The role 'head' is already used by task 0."}


def test_it_keeps_statefulset_names_within_52_characters(alice: User, cluster: Cluster) -> None:
    """A StatefulSet's pods carry `controller-revision-hash: <name>-<10 chars>` (<= 63)."""
    data = job_data(name="a" * 40, tasks=[{"role": "b" * 12, "image": "busybox"}])
    assert "52" in errors_of(data, alice)["tasks.0.role"]
    data["tasks"][0]["kind"] = "Job"  # a batch Job's name may use all 63
    assert parse_job_spec(data, alice).tasks[0].role == "b" * 12
    data = job_data(name="a" * 40, tasks=[{"role": "b" * 11, "image": "busybox"}])
    assert parse_job_spec(data, alice).name == "a" * 40


def test_it_refuses_input_that_is_not_a_mapping(alice: User, cluster: Cluster) -> None:
    assert set(errors_of(["name", "x"], alice)) == {"spec"}


def test_it_defaults_the_namespace_to_the_clusters(alice: User, cluster: Cluster) -> None:
    cluster.namespace = "training"
    cluster.save()
    assert parse_job_spec(job_data(), alice).namespace == "training"
    assert parse_job_spec(job_data(namespace="team-a"), alice).namespace == "team-a"


def test_it_refuses_an_unknown_cluster(alice: User, cluster: Cluster) -> None:
    assert set(errors_of(job_data(cluster="gpu-z"), alice)) == {"cluster"}


def test_it_uses_the_only_project_the_user_may_operate_in(
    alice: User, cluster: Cluster, other_project: Project
) -> None:
    Membership.objects.create(user=alice, project=other_project, role=Membership.Role.VIEWER)
    assert parse_job_spec(job_data(), alice).project == "vision"


def test_it_asks_for_the_project_when_the_user_has_several(
    alice: User, cluster: Cluster, other_project: Project
) -> None:
    Membership.objects.create(user=alice, project=other_project)
    message = errors_of(job_data(), alice)["project"]
    assert "speech" in message and "vision" in message
    assert parse_job_spec(job_data(project="speech"), alice).project == "speech"


@pytest.mark.parametrize("project_name", ["speech", "nonexistent"])
def test_it_refuses_a_project_the_user_may_not_operate_in(
    alice: User, charlie: User, cluster: Cluster, project_name: str
) -> None:
    """charlie is a member of speech, alice is not: alice cannot create there."""
    assert set(errors_of(job_data(project=project_name), alice)) == {"project"}


def test_it_refuses_a_viewer(bob: User, cluster: Cluster) -> None:
    Membership.objects.filter(user=bob).update(role=Membership.Role.VIEWER)
    assert "not a member of any project" in errors_of(job_data(), bob)["project"]


def _existing(cluster: Cluster, project: Project, name: str, namespace: str = "default") -> Job:
    return Job.objects.create(
        project=project, name=name, cluster=cluster, namespace=namespace, spec={"tasks": []}
    )


def test_it_refuses_a_name_taken_in_the_cluster_namespace(
    alice: User, cluster: Cluster, project: Project
) -> None:
    _existing(cluster, project, "ppo-math")
    assert "already exists in gpu-a/default" in errors_of(job_data(), alice)["name"]
    assert parse_job_spec(job_data(namespace="other"), alice).name == "ppo-math"


def test_it_refuses_a_name_still_held_by_a_job_being_deleted(
    alice: User, cluster: Cluster, project: Project
) -> None:
    job = _existing(cluster, project, "ppo-math")
    job.delete_requested_at = timezone.now()
    job.save()
    assert "still being deleted" in errors_of(job_data(), alice)["name"]


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", "0.500"), ("4", "4"), ("16Gi", str(16 * 2**30)), ("1.5", "1.5"), ("1e3", "1000")],
)
def test_it_reads_quantities_in_base_units(text: str, value: str) -> None:
    assert quantity_value(text) == Decimal(value)


# --- YAML ----------------------------------------------------------------------------------


def test_it_round_trips_through_yaml(alice: User, cluster: Cluster) -> None:
    spec = parse_job_spec(job_data(), alice)
    text = job_spec_to_yaml(spec)
    assert text.startswith("name: ppo-math\n")
    assert job_spec_from_yaml(text, alice) == spec


def test_it_reads_yaml_numbers_as_quantities(alice: User, cluster: Cluster) -> None:
    text = """
name: ppo-math
cluster: gpu-a
tasks:
- role: head
  image: rlinf/rlinf:0.3
  resources: {cpu: 4, memory: 16Gi, gpu: 1}
"""
    assert job_spec_from_yaml(text, alice).tasks[0].resources.cpu == "4"


def yaml_errors(text: str, user: User) -> dict[str, str]:
    with pytest.raises(SpecInvalid) as refused:
        job_spec_from_yaml(text, user)
    return refused.value.errors


def test_it_reports_a_yaml_syntax_error_with_its_line(alice: User, cluster: Cluster) -> None:
    text = "name: ppo\ncluster: gpu-a\ntasks:\n  - role: [head\n"
    errors = yaml_errors(text, alice)
    assert list(errors) == ["yaml"]
    assert errors["yaml"].startswith("Line 5")


def test_it_refuses_yaml_larger_than_64_kib(alice: User, cluster: Cluster) -> None:
    text = "name: ppo\n# " + "x" * 64 * 1024
    assert "64 KiB" in yaml_errors(text, alice)["yaml"]


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text", "", "42"])
def test_it_refuses_yaml_that_is_not_a_mapping(alice: User, cluster: Cluster, text: str) -> None:
    assert list(yaml_errors(text, alice)) == ["yaml"]


def test_it_reports_yaml_field_errors_under_their_paths(alice: User, cluster: Cluster) -> None:
    text = "name: ppo\ncluster: gpu-a\ntasks:\n- role: head\n  image: x\n  replicas: lots\n"
    assert list(yaml_errors(text, alice)) == ["tasks.0.replicas"]


# --- spec_of and overrides (clone) ---------------------------------------------------------


def test_spec_of_gives_back_the_original_spec(alice: User, cluster: Cluster) -> None:
    from jobs.operations import create_job

    spec = parse_job_spec(job_data(), alice)
    job = create_job(alice, spec)
    job.tasks.update(desired_replicas=0, template={})
    assert spec_of(job) == spec


def test_overrides_merge_tasks_by_role(alice: User, cluster: Cluster) -> None:
    spec = parse_job_spec(job_data(), alice)
    merged = merge_overrides(
        spec,
        {
            "tasks": [
                {"role": "worker", "replicas": 8, "resources": {"gpu": 2}},
                {"role": "rollout", "image": "rlinf/rollout:1"},
            ]
        },
    )
    head, worker, rollout = merged["tasks"]
    assert head == spec.tasks[0].model_dump(mode="json")
    assert worker["replicas"] == 8 and worker["resources"] == {
        "cpu": "1",
        "memory": "1Gi",
        "gpu": 2,
    }
    assert rollout == {"role": "rollout", "image": "rlinf/rollout:1"}


def test_overrides_replace_scalars_and_null_removes_a_key(alice: User, cluster: Cluster) -> None:
    spec = parse_job_spec(job_data(), alice)
    merged = merge_overrides(
        spec, {"cluster": "gpu-b", "tasks": [{"role": "head", "env": {"RAY_ADDRESS": None}}]}
    )
    assert merged["cluster"] == "gpu-b"
    assert merged["tasks"][0]["env"] == {}


def test_overrides_must_be_a_mapping(alice: User, cluster: Cluster) -> None:
    spec = parse_job_spec(job_data(), alice)
    with pytest.raises(SpecInvalid) as refused:
        merge_overrides(spec, ["tasks"])  # type: ignore[arg-type]
    assert list(refused.value.errors) == ["overrides"]


def test_a_jobspec_built_in_code_is_still_checked(alice: User, cluster: Cluster) -> None:
    spec = JobSpec.model_validate(job_data(project="vision", namespace="default"))
    assert parse_job_spec(spec.model_dump(), alice) == spec


# --- workflows -----------------------------------------------------------------------------


def workflow_data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "pipeline",
        "jobs": [
            job_data(name="prepare", tasks=[{"role": "main", "kind": "Job", "image": "prep:1"}]),
            job_data(name="train", depends_on=["prepare"]),
            job_data(name="evaluate", depends_on=["train"]),
        ],
    }
    data.update(changes)
    return data


def workflow_errors(data: Any, user: User) -> dict[str, str]:
    with pytest.raises(SpecInvalid) as refused:
        parse_workflow_spec(data, user)
    return refused.value.errors


def test_a_workflow_spec_resolves_its_children(alice: User, cluster: Cluster) -> None:
    spec = parse_workflow_spec(workflow_data(), alice)
    assert spec.project == "vision"
    assert [(job.name, job.project, job.namespace) for job in spec.jobs] == [
        ("prepare", "vision", "default"),
        ("train", "vision", "default"),
        ("evaluate", "vision", "default"),
    ]


def test_a_workflow_must_be_acyclic(alice: User, cluster: Cluster) -> None:
    data = workflow_data()
    data["jobs"][0]["depends_on"] = ["evaluate"]
    errors = workflow_errors(data, alice)
    assert list(errors) == ["jobs"]
    assert "cycle" in errors["jobs"]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"jobs.1.depends_on": ["missing"]}, "jobs.1.depends_on"),
        ({"jobs.1.depends_on": ["train"]}, "jobs.1.depends_on"),
        ({"jobs.2.name": "train"}, "jobs.2.name"),
        ({"jobs.0.project": "speech"}, "jobs.0.project"),
        ({"jobs.0.tasks.0.image": ""}, "jobs.0.tasks.0.image"),
        ({"jobs.1.depends_on": "prepare"}, "jobs.1.depends_on"),
        ({"jobs": []}, "jobs"),
        ({"name": "Pipe Line"}, "name"),
    ],
)
def test_a_workflow_reports_errors_under_their_paths(
    alice: User, cluster: Cluster, change: dict[str, Any], path: str
) -> None:
    data = workflow_data()
    for key, value in change.items():
        data = put(data, key, value)
    assert path in workflow_errors(data, alice)


def test_a_workflow_name_is_unique_in_its_project(
    alice: User, cluster: Cluster, project: Project
) -> None:
    Workflow.objects.create(project=project, name="pipeline")
    assert "already exists" in workflow_errors(workflow_data(), alice)["name"]


# --- robustness ----------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=70)
    | st.sampled_from(["", "gpu-a", "head", "500m", "16Gi", "StatefulSet", "Job", "vision"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = ["name", "cluster", "project", "namespace", "tasks", "tasks.0.role", "tasks.0.kind",
          "tasks.0.replicas", "tasks.0.image", "tasks.0.command", "tasks.0.env",
          "tasks.0.resources", "tasks.0.resources.cpu", "tasks.0.resources.memory",
          "tasks.0.resources.gpu", "tasks.0.node_selector", "tasks.1"]  # fmt: skip


@hypothesis_settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(changes=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4))
def test_any_input_gives_a_spec_or_field_errors(
    alice: User, cluster: Cluster, changes: dict[str, Any]
) -> None:
    """Whatever arrives (a form, YAML, an API body), the answer is a spec or SpecInvalid."""
    data = job_data()
    for path, value in changes.items():
        try:
            data = put(data, path, value)
        except (TypeError, IndexError, AttributeError, ValueError):
            continue  # the path no longer exists in what earlier changes made of the data
    try:
        parse_job_spec(data, alice)
    except SpecInvalid as invalid:
        assert invalid.errors
        assert all(isinstance(m, str) and m for m in invalid.errors.values())
