"""The objects the console creates for a Task (contract: names, labels, env, resources)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from console.kube.manifests import Target, batch_job, headless_service, statefulset, workload
from jobs.choices import TaskKind
from jobs.validators import shm_size_of

TEMPLATE = {
    "role": "worker",
    "kind": "StatefulSet",
    "replicas": 3,
    "image": "ghcr.io/rlinf/rlinf:0.3",
    "command": ["python", "-m", "rlinf.train"],
    "args": ["--config", "ppo.yaml"],
    "env": {"RAY_ADDRESS": "train-head:6379", "TRAINYARD_RUN": "spoofed"},
    "resources": {"cpu": "4", "memory": "16Gi", "gpu": 1},
    "node_selector": {"gpu.nvidia.com/class": "a100"},
}
LABELS = {
    "app.kubernetes.io/managed-by": "trainyard",
    "trainyard.io/job": "7",
    "trainyard.io/task": "11",
    "trainyard.io/role": "worker",
    "trainyard.io/run": "2",
}


def target(kind: TaskKind = TaskKind.STATEFULSET, **template: object) -> Target:
    """As the engine builds it (console.engine.rows.target_of)."""
    merged = {**TEMPLATE, **template}
    return Target(
        job_id=7, job_name="train", namespace="team-a", run=2, task_id=11, role="worker",
        kind=kind, replicas=3, template=merged, shm_size=shm_size_of(merged),
    )  # fmt: skip


def test_it_names_the_statefulset_after_job_and_role_and_labels_it_and_its_pods() -> None:
    sts = statefulset(target())
    assert sts["apiVersion"] == "apps/v1" and sts["kind"] == "StatefulSet"
    assert sts["metadata"] == {"name": "train-worker", "namespace": "team-a", "labels": LABELS}
    spec = sts["spec"]
    assert (spec["replicas"], spec["serviceName"], spec["podManagementPolicy"]) == (
        3, "train-worker", "OrderedReady",
    )  # fmt: skip
    assert spec["template"]["metadata"]["labels"] == LABELS
    assert spec["selector"]["matchLabels"] == {
        "trainyard.io/job": "7", "trainyard.io/task": "11", "trainyard.io/run": "2",
    }  # fmt: skip
    assert spec["template"]["spec"]["restartPolicy"] == "Always"


def test_it_gives_the_pods_the_console_env_which_the_template_cannot_shadow() -> None:
    container = statefulset(target())["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}
    assert env == {
        "TRAINYARD_JOB_ID": "7",
        "TRAINYARD_TASK_ID": "11",
        "TRAINYARD_ROLE": "worker",
        "TRAINYARD_RUN": "2",
        "TRAINYARD_JOB": "train",
        "TRAINYARD_TASK": "worker",
        "RAY_ADDRESS": "train-head:6379",
        "TRAINYARD_POD": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        "TRAINYARD_POD_UID": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}},
    }
    assert container["command"] == ["python", "-m", "rlinf.train"]
    assert container["args"] == ["--config", "ppo.yaml"]


def test_it_gives_every_container_of_every_kind_the_signal_url_and_token() -> None:
    """A template variable cannot replace the token either (a pod posts as its own Job)."""
    signalled = replace(
        target(env={"TRAINYARD_SIGNAL_TOKEN": "spoofed", "TRAINYARD_POD": "x"}),
        signal_url="https://console.example/api/v1/jobs/7/signals", signal_token="7.2.mac",
    )  # fmt: skip
    for kind in TaskKind:
        manifest = workload(replace(signalled, kind=kind))
        env = manifest["spec"]["template"]["spec"]["containers"][0]["env"]
        names = [item["name"] for item in env]
        assert len(names) == len(set(names))
        plain = {item["name"]: item.get("value") for item in env}
        assert plain["TRAINYARD_SIGNAL_URL"] == "https://console.example/api/v1/jobs/7/signals"
        assert plain["TRAINYARD_SIGNAL_TOKEN"] == "7.2.mac"
        assert plain["TRAINYARD_POD"] is None  # from the downward API, not the template


def test_it_requests_what_it_limits_including_gpus_and_selects_nodes() -> None:
    pod = statefulset(target())["spec"]["template"]["spec"]
    wanted = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
    assert pod["containers"][0]["resources"] == {"requests": wanted, "limits": wanted}
    assert pod["nodeSelector"] == {"gpu.nvidia.com/class": "a100"}


def test_it_asks_for_no_gpu_when_the_template_has_none() -> None:
    pod = statefulset(target(resources={"cpu": "1", "memory": "1Gi", "gpu": 0}))["spec"]
    assert "nvidia.com/gpu" not in pod["template"]["spec"]["containers"][0]["resources"]["limits"]


def test_it_gives_a_statefulset_task_a_headless_service_of_the_same_name() -> None:
    service = headless_service(target())
    assert service["metadata"]["name"] == "train-worker"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"]["trainyard.io/run"] == "2"


def test_it_makes_a_batch_job_that_never_restarts_and_does_not_retry_by_default() -> None:
    job = batch_job(target(TaskKind.JOB))
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert (
        job["spec"]["parallelism"],
        job["spec"]["completions"],
        job["spec"]["backoffLimit"],
    ) == (3, 3, 0)
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["spec"]["template"]["metadata"]["labels"] == LABELS
    assert batch_job(target(TaskKind.JOB, backoff_limit=2))["spec"]["backoffLimit"] == 2


def test_it_is_pure() -> None:
    assert workload(target()) == workload(target())
    assert workload(target(TaskKind.JOB))["kind"] == "Job"


def test_the_pods_meet_pod_security_restricted_as_the_user_setting_says() -> None:
    def contexts(pod_user: str) -> tuple[object, object]:
        spec = statefulset(replace(target(), pod_user=pod_user))["spec"]["template"]["spec"]
        return spec.get("securityContext"), spec["containers"][0].get("securityContext")

    hardened = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    non_root = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    ids = {"runAsUser": 2000, "runAsGroup": 2000, "fsGroup": 2000}
    assert contexts("2000") == ({**non_root, **ids}, hardened)
    assert contexts("image") == (non_root, hardened)  # the image's user, refused if root
    assert contexts("any") == (None, None)  # root allowed: baseline only


# --- storage and placement (issue 11, item 3) ------------------------------------------------


def pod_spec(**template: object) -> dict[str, Any]:
    spec: dict[str, Any] = statefulset(target(TaskKind.STATEFULSET, **template))["spec"][
        "template"
    ]["spec"]
    return spec


def test_it_mounts_each_claim_in_order_with_its_options_and_the_shared_memory_last() -> None:
    spec = pod_spec(
        volumes=[
            {"claim": "rlinf-outputs", "mount_path": "/outputs", "read_only": False},
            {"claim": "datasets", "mount_path": "/data", "read_only": True, "sub_path": "math"},
        ]
    )
    assert spec["volumes"] == [
        {"name": "claim-0", "persistentVolumeClaim": {"claimName": "rlinf-outputs"}},
        {"name": "claim-1", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
    ]
    [container] = spec["containers"]
    assert container["volumeMounts"] == [
        {"name": "claim-0", "mountPath": "/outputs"},
        {"name": "claim-1", "mountPath": "/data", "readOnly": True, "subPath": "math"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]


def test_it_sizes_the_shared_memory_at_half_the_memory_request_up_to_64gi() -> None:
    """docs/decisions.md: Ray's object store and NCCL need more than the runtime's 64Mi."""
    sizes = {
        memory: pod_spec(resources={"cpu": "1", "memory": memory})["volumes"][-1]["emptyDir"]
        for memory in ("16Gi", "3Gi", "1G", "200Gi", "1Ti")
    }
    assert sizes == {
        "16Gi": {"medium": "Memory", "sizeLimit": "8Gi"},
        "3Gi": {"medium": "Memory", "sizeLimit": "1536Mi"},
        "1G": {"medium": "Memory", "sizeLimit": "500000000"},
        "200Gi": {"medium": "Memory", "sizeLimit": "64Gi"},
        "1Ti": {"medium": "Memory", "sizeLimit": "64Gi"},
    }


def test_it_takes_the_shared_memory_size_from_the_spec_when_given() -> None:
    spec = pod_spec(shm_size="2Gi")
    assert spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}
    ]


def test_a_template_stored_before_the_storage_fields_renders_as_before_plus_shared_memory() -> None:
    """Old `Task.template`s have no volumes, tolerations nor shm_size: no claim, no tolerations,
    the default /dev/shm (reconcile never rewrites an existing StatefulSet, see plan)."""
    spec = pod_spec()
    assert "tolerations" not in spec
    assert spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}
    ]
    assert statefulset(target()) == statefulset(target())


def test_it_renders_tolerations_in_the_api_names_leaving_empty_fields_out() -> None:
    spec = pod_spec(
        tolerations=[
            {"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule",
             "toleration_seconds": None},
            {"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoExecute",
             "toleration_seconds": 600},
            {"key": "", "operator": "Exists", "value": "", "effect": "",
             "toleration_seconds": None},
        ]
    )  # fmt: skip
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoExecute",
         "tolerationSeconds": 600},
        {"operator": "Exists"},
    ]  # fmt: skip


def test_a_batch_job_gets_the_same_volumes_and_tolerations() -> None:
    template: dict[str, object] = {
        "volumes": [{"claim": "outputs", "mount_path": "/outputs"}],
        "tolerations": [{"key": "pool", "operator": "Exists", "effect": "NoSchedule"}],
    }
    sts = statefulset(target(TaskKind.STATEFULSET, **template))["spec"]["template"]["spec"]
    job = batch_job(target(TaskKind.JOB, **template))["spec"]["template"]["spec"]
    assert (job["volumes"], job["tolerations"]) == (sts["volumes"], sts["tolerations"])
    assert job["containers"][0]["volumeMounts"] == sts["containers"][0]["volumeMounts"]
