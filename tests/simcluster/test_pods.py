"""Pods on simulated kubelets: crash loops, OOM kills, image pull failures, logs, Ray heads and
workers, and the scheduler's refusals.

Spec: KUBERNETES-FACTS.md, Pods (CrashLoopBackOff, OOMKilled, ImagePullBackOff, Unschedulable).
"""

from __future__ import annotations

import re

import orjson
import pytest
from kubernetes.client.exceptions import ApiException

from simcluster.server import SimCluster
from tests.simcluster.conftest import (
    Kube,
    condition,
    container,
    error_body,
    pod_manifest,
    raw_call,
    statefulset_manifest,
    wait_for,
)


def read(kube: Kube, name: str):
    return kube.core.read_namespaced_pod(name, kube.namespace)


def main_status(kube: Kube, name: str):
    statuses = read(kube, name).status.container_statuses
    return statuses[0] if statuses else None


def test_it_reports_a_crash_loop_with_growing_back_off(kube: Kube) -> None:
    kube.core.create_namespaced_pod(
        kube.namespace, pod_manifest("crashy", container(command=["sim", "crash", "1", "3"]))
    )
    messages: list[str] = []

    def backed_off_three_times() -> bool:
        waiting = (s := main_status(kube, "crashy")) and s.state.waiting
        if waiting and waiting.reason == "CrashLoopBackOff" and waiting.message not in messages:
            messages.append(waiting.message)
        return len(messages) >= 3

    wait_for(backed_off_three_times, timeout=20, interval=0.01)
    uid = read(kube, "crashy").metadata.uid
    assert [m.split()[1] for m in messages] == ["10s", "20s", "40s"]
    assert (
        messages[0]
        == f"back-off 10s restarting failed container=main pod=crashy_{kube.namespace}({uid})"
    )
    pod = read(kube, "crashy")
    assert pod.status.phase == "Running"
    ready = condition(pod.status.conditions, "Ready")
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "ContainersNotReady",
        "containers with unready status: [main]",
    )
    status = pod.status.container_statuses[0]
    assert status.restart_count >= 2 and not status.ready
    terminated = status.last_state.terminated
    assert (terminated.exit_code, terminated.reason) == (
        3,
        "Error",
    ) and terminated.finished_at > terminated.started_at
    events = kube.core.list_namespaced_event(
        kube.namespace, field_selector="involvedObject.name=crashy,reason=BackOff"
    ).items
    assert events[0].type == "Warning" and events[0].count >= 2
    assert (
        events[0].message
        == f"Back-off restarting failed container main in pod crashy_{kube.namespace}({uid})"
    )


def test_it_oom_kills_and_restarts(kube: Kube) -> None:
    kube.core.create_namespaced_pod(
        kube.namespace, pod_manifest("hungry", container(command=["sim", "oom", "10"]))
    )
    status = wait_for(
        lambda: (
            (s := main_status(kube, "hungry")) and s.last_state.terminated and s.state.running and s
        )
    )
    assert (status.last_state.terminated.exit_code, status.last_state.terminated.reason) == (
        137,
        "OOMKilled",
    )
    assert (
        status.restart_count >= 1
        and status.ready
        and read(kube, "hungry").status.phase == "Running"
    )


def test_it_follows_the_restart_policy_never(kube: Kube) -> None:
    kube.core.create_namespaced_pod(
        kube.namespace,
        pod_manifest("once", container(command=["sim", "run", "3"]), restart="Never"),
    )
    kube.core.create_namespaced_pod(
        kube.namespace,
        pod_manifest("fails", container(command=["sim", "crash", "2", "7"]), restart="Never"),
    )
    kube.core.create_namespaced_pod(
        kube.namespace,
        pod_manifest("retry", container(command=["sim", "crash", "1"]), restart="OnFailure"),
    )
    done = wait_for(lambda: (p := read(kube, "once")).status.phase == "Succeeded" and p)
    terminated = done.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")
    assert [(c.type, c.status, c.reason) for c in done.status.conditions[:4]] == [
        ("PodReadyToStartContainers", "False", None),
        ("Initialized", "True", None),
        ("Ready", "False", "PodCompleted"),
        ("ContainersReady", "False", "PodCompleted"),
    ]
    failed = wait_for(lambda: (p := read(kube, "fails")).status.phase == "Failed" and p)
    assert failed.status.container_statuses[0].state.terminated.exit_code == 7
    assert condition(failed.status.conditions, "Ready").reason == "PodFailed"
    retried = wait_for(lambda: (s := main_status(kube, "retry")) and s.restart_count >= 1 and s)
    assert read(kube, "retry").status.phase in ("Running", "Pending") and retried.restart_count >= 1


def test_it_reports_image_pull_failures(kube: Kube) -> None:
    image = "registry.example.com/team/nonexistent:1.0"
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("pull", container(image=image)))
    reasons: set[str] = set()

    def backing_off():
        waiting = (s := main_status(kube, "pull")) and s.state.waiting
        if waiting:
            reasons.add(waiting.reason)
        return waiting if waiting and waiting.reason == "ImagePullBackOff" else None

    waiting = wait_for(backing_off)
    assert (
        "ErrImagePull" in reasons
        or kube.core.list_namespaced_event(
            kube.namespace, field_selector="involvedObject.name=pull,reason=Failed"
        ).items
    )
    assert waiting.message.startswith(
        f'Back-off pulling image "{image}": ErrImagePull: '
        "rpc error: code = NotFound desc = failed to pull and unpack image"
    )
    pod = read(kube, "pull")
    assert (
        pod.status.phase == "Pending"
        and pod.status.pod_ip
        and pod.status.container_statuses[0].image_id == ""
    )
    messages = {
        e.message
        for e in kube.core.list_namespaced_event(
            kube.namespace, field_selector="involvedObject.name=pull"
        ).items
    }
    assert (
        f'Pulling image "{image}"' in messages
        and "Error: ErrImagePull" in messages
        and "Error: ImagePullBackOff" in messages
    )
    with pytest.raises(ApiException) as caught:
        kube.core.read_namespaced_pod_log("pull", kube.namespace)
    assert (
        caught.value.status == 400 and "is waiting to start" in error_body(caught.value)["message"]
    )


def test_a_mended_image_is_pulled_at_once_outside_the_old_images_back_off(kube: Kube) -> None:
    """A pod's image is the one field of its containers an update may change; a container
    waiting on a pull tries the new image at once (the kubelet's back-off is per image)."""
    broken = container(image="registry.example.com/team/nonexistent:1.0")
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("mend", broken))
    wait_for(lambda: (s := main_status(kube, "mend")) and s.state.waiting
             and s.state.waiting.reason == "ImagePullBackOff")  # fmt: skip
    mended = [{**broken, "image": "registry.example.com/team/trainer:1.0"}]
    kube.core.patch_namespaced_pod("mend", kube.namespace, {"spec": {"containers": mended}})
    running = wait_for(lambda: (s := main_status(kube, "mend")) and s.state.running and s)
    assert running.image == "registry.example.com/team/trainer:1.0"


def test_it_serves_logs_with_tail_and_previous(kube: Kube) -> None:
    kube.core.create_namespaced_pod(
        kube.namespace,
        pod_manifest("job", container(command=["sim", "run", "12"]), restart="Never"),
    )
    kube.core.create_namespaced_pod(
        kube.namespace, pod_manifest("again", container(command=["sim", "crash", "30", "4"]))
    )
    wait_for(lambda: read(kube, "job").status.phase == "Succeeded")
    log = kube.core.read_namespaced_pod_log("job", kube.namespace)
    lines = log.splitlines()
    assert lines[0] == "[sim] sim run 12" and lines[-1] == "[sim] finished after 12s, exiting 0"
    assert [line.split()[1] for line in lines if line.startswith("step ")] == ["1", "2"]
    assert (
        kube.core.read_namespaced_pod_log("job", kube.namespace, tail_lines=1)
        == "[sim] finished after 12s, exiting 0\n"
    )
    stamped = kube.core.read_namespaced_pod_log(
        "job", kube.namespace, timestamps=True, tail_lines=1
    )
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \[sim\] finished", stamped)
    with pytest.raises(ApiException) as none_before:
        kube.core.read_namespaced_pod_log("job", kube.namespace, previous=True)
    assert "previous terminated container" in error_body(none_before.value)["message"]
    wait_for(lambda: (s := main_status(kube, "again")) and s.restart_count >= 1 and s.state.running)
    previous = kube.core.read_namespaced_pod_log("again", kube.namespace, previous=True)
    assert previous.splitlines()[-1] == "RuntimeError: simulated failure, exiting with code 4"
    assert "RuntimeError" not in kube.core.read_namespaced_pod_log(
        "again", kube.namespace, container="main"
    )


def test_it_lets_a_ray_worker_join_a_running_head_only(kube: Kube) -> None:
    head = statefulset_manifest("ray-head", 1, ["sim", "ray-head"])
    kube.apps.create_namespaced_stateful_set(kube.namespace, head)
    wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("ray-head", kube.namespace).status.ready_replicas
            == 1
        )
    )
    kube.core.create_namespaced_pod(
        kube.namespace,
        pod_manifest("worker", container(command=["sim", "ray-worker", "ray-head-0.ray-head"])),
    )
    kube.core.create_namespaced_pod(
        kube.namespace,
        pod_manifest(
            "lonely", container(command=["sim", "ray-worker", "nobody-head.svc"]), restart="Never"
        ),
    )
    failed = wait_for(lambda: (p := read(kube, "lonely")).status.phase == "Failed" and p)
    assert failed.status.container_statuses[0].state.terminated.exit_code == 1
    assert "cannot reach the Ray head at nobody-head.svc:6379" in kube.core.read_namespaced_pod_log(
        "lonely", kube.namespace
    )
    joined = wait_for(
        lambda: (
            "Connected to Ray cluster"
            in kube.core.read_namespaced_pod_log("worker", kube.namespace)
        )
    )
    assert joined and read(kube, "worker").status.container_statuses[0].restart_count == 0
    assert "Ray runtime started." in kube.core.read_namespaced_pod_log("ray-head-0", kube.namespace)


def _scheduling(kube: Kube, name: str):
    return wait_for(
        lambda: (
            (c := condition(read(kube, name).status.conditions, "PodScheduled"))
            and c.status == "False"
            and c
        )
    )


def test_it_leaves_a_pod_that_fits_nowhere_pending(kube: Kube) -> None:
    greedy = container(resources={"limits": {"nvidia.com/gpu": "9"}})
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("greedy", greedy))
    kube.core.create_namespaced_pod(
        kube.namespace, pod_manifest("picky", nodeSelector={"gpu": "b300"})
    )
    scheduled = _scheduling(kube, "greedy")
    expected = (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )
    assert (scheduled.reason, scheduled.message) == ("Unschedulable", expected)
    pod = read(kube, "greedy")
    assert pod.status.phase == "Pending" and [c.type for c in pod.status.conditions] == [
        "PodScheduled"
    ]
    event = wait_for(
        lambda: (
            kube.core.list_namespaced_event(
                kube.namespace, field_selector="involvedObject.name=greedy,reason=FailedScheduling"
            ).items
        )
    )[0]
    assert (event.type, event.message, event.source.component) == (
        "Warning",
        expected,
        "default-scheduler",
    )
    picky = _scheduling(kube, "picky")
    assert (
        picky.message
        == "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_it_schedules_around_cordoned_nodes(own_kube: Kube, own_sim: SimCluster) -> None:
    kube = own_kube
    assert raw_call(kube, "POST", "/_sim/nodes/sim-node-0/cordon")[0] == 200
    own_sim.cordon("sim-node-1")
    node = kube.core.read_node("sim-node-0")
    assert node.spec.unschedulable and [(t.key, t.effect) for t in node.spec.taints] == [
        ("node.kubernetes.io/unschedulable", "NoSchedule")
    ]
    kube.core.create_namespaced_pod(
        "default", pod_manifest("pinned", nodeSelector={"kubernetes.io/hostname": "sim-node-0"})
    )
    eight = container(resources={"limits": {"nvidia.com/gpu": "8"}})
    kube.core.create_namespaced_pod("default", pod_manifest("first", eight))
    assert wait_for(lambda: read(kube, "first").spec.node_name) == "sim-node-2"
    kube.core.create_namespaced_pod("default", pod_manifest("second", eight))
    assert _scheduling(kube, "second").message == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) were unschedulable. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
    assert _scheduling(kube, "pinned").message.startswith(
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 node(s) were unschedulable."
    )
    own_sim.uncordon("sim-node-0")
    raw_node = orjson.loads(kube.core.read_node("sim-node-0", _preload_content=False).data)
    assert "unschedulable" not in raw_node["spec"] and "taints" not in raw_node["spec"]
    assert wait_for(lambda: read(kube, "pinned").spec.node_name) == "sim-node-0"
    assert wait_for(lambda: read(kube, "second").spec.node_name) == "sim-node-0"


def test_it_reports_what_the_process_wrote_to_its_termination_log(kube: Kube) -> None:
    """The kubelet copies terminationMessagePath into `state.terminated.message` (at most 4096
    bytes), and keeps it in `lastState.terminated` after the restart."""
    written = '{"trainyard": "completion", "outcome": "failed"}' + " " * 5000
    kube.core.create_namespaced_pod(
        kube.namespace,
        pod_manifest("told", container(command=["sim", "crash", "1", "3", written])),
    )

    wait_for(lambda: (s := main_status(kube, "told")) and s.last_state.terminated, timeout=20)

    terminated = main_status(kube, "told").last_state.terminated
    assert terminated.message == written[:4096]
    kube.core.create_namespaced_pod(
        kube.namespace,
        pod_manifest("quiet", container(command=["sim", "run", "1"]), restart="Never"),
    )
    wait_for(lambda: (s := main_status(kube, "quiet")) and s.state.terminated, timeout=20)
    assert main_status(kube, "quiet").state.terminated.message is None
