"""Parsers of what a cluster reports, on JSON shaped as shared/KUBERNETES-FACTS.md describes it,
and the Worker reasons / Task problems derived from them (spec §Pod and Worker status)."""

from __future__ import annotations

from datetime import UTC, datetime

from console.engine.stored import freeze, thaw
from console.kube.observations import (
    Owner,
    PodObs,
    image_tag,
    parse_addon,
    parse_batch_job,
    parse_node,
    parse_pod,
    parse_statefulset,
)
from jobs.choices import PodPhase
from jobs.messages import Message, encode, render_text
from jobs.status.problems import NODE_LOST, NODE_NOT_READY, first_problem, pod_problem, pod_reason
from tests.engine import k8s_json as k8s

NO_NODES: dict = {}


def said(problem: Message | None) -> str:
    """A Task's problem as an English reader sees it ("" for none)."""
    return "" if problem is None else render_text(encode(problem), diagnostics=True)


def worded(reason: tuple[str, str]) -> tuple[str, str]:
    """A Worker's (reason, message) as an English reader sees them."""
    return reason[0], render_text(reason[1], diagnostics=True)


def test_it_reads_a_running_ready_pod_and_its_labels() -> None:
    pod = parse_pod(k8s.pod(gpus=2))
    assert pod.owner == Owner(job_id=7, task_id=11, run=1)
    assert (pod.node_name, pod.pod_ip, pod.phase, pod.ready) == (
        "node-1",
        "10.0.1.5",
        "Running",
        True,
    )
    assert pod.created_at == datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
    assert pod.gpus == 2 and pod.deleted_at is None
    assert worded(pod_reason(pod, NO_NODES)) == ("", "")


def test_it_reads_container_creating_as_pending_without_an_ip_and_no_problem() -> None:
    pod = parse_pod(k8s.container_creating_pod())
    assert (pod.phase, pod.pod_ip, pod.waiting_reason) == ("Pending", "", "ContainerCreating")
    assert said(pod_problem(pod, NO_NODES)) == ""


def test_it_reads_crash_loop_back_off_as_running_with_restarts_and_last_exit() -> None:
    """KUBERNETES-FACTS: CrashLoopBackOff keeps phase Running; the last exit is in lastState."""
    pod = parse_pod(k8s.crash_loop_pod(restarts=4, exit_code=3))
    assert (pod.phase, pod.ready, pod.restart_count) == ("Running", False, 4)
    assert (pod.exit_code, pod.termination_reason, pod.terminated_now) == (3, "Error", False)
    assert worded(pod_reason(pod, NO_NODES))[0] == "CrashLoopBackOff"
    assert said(pod_problem(pod, NO_NODES)) == (
        "train-worker-0: CrashLoopBackOff, 4 restarts, last exit code 3 (Error)"
    )


def test_it_reads_oom_killed_then_restarted() -> None:
    pod = parse_pod(k8s.oom_restarted_pod())
    assert (pod.phase, pod.ready, pod.exit_code, pod.termination_reason) == (
        "Running", True, 137, "OOMKilled",
    )  # fmt: skip
    assert (
        said(pod_problem(pod, NO_NODES)) == "train-worker-0: OOMKilled (exit code 137), 1 restart"
    )


def test_it_reads_image_pull_back_off_with_the_pull_error() -> None:
    pod = parse_pod(k8s.image_pull_pod())
    assert pod.phase == "Pending" and pod.pod_ip
    assert worded(pod_reason(pod, NO_NODES))[0] == "ImagePullBackOff"
    assert said(pod_problem(pod, NO_NODES)).startswith(
        'train-worker-0: ImagePullBackOff: Back-off pulling image "'
    )


def test_it_reads_unschedulable_from_the_pod_scheduled_condition_not_its_wording() -> None:
    pod = parse_pod(k8s.unschedulable_pod())
    assert (pod.phase, pod.node_name, pod.unschedulable) == ("Pending", "", True)
    assert pod.scheduling_message.startswith("0/5 nodes are available")
    reason, message = worded(pod_reason(pod, NO_NODES))
    assert reason == "Unschedulable" and message == pod.scheduling_message
    assert said(pod_problem(pod, NO_NODES)).startswith("train-worker-1: Unschedulable: 0/5 nodes")


def test_it_reads_an_evicted_pod() -> None:
    pod = parse_pod(k8s.evicted_pod())
    assert (pod.phase, pod.status_reason) == ("Failed", "Evicted")
    assert worded(pod_reason(pod, NO_NODES)) == ("Evicted", pod.status_message)
    assert said(pod_problem(pod, NO_NODES)).startswith("train-worker-0: Evicted: The node was low")


def test_it_reads_succeeded_and_failed_pods_with_their_exit_codes() -> None:
    done = parse_pod(k8s.finished_pod("eval-abcde", succeeded=True))
    failed = parse_pod(k8s.finished_pod("eval-fghij", succeeded=False))
    assert (done.phase, done.exit_code, done.termination_reason) == ("Succeeded", 0, "Completed")
    assert said(pod_problem(done, NO_NODES)) == ""
    assert (failed.phase, failed.exit_code, failed.terminated_now) == ("Failed", 3, True)
    assert worded(pod_reason(failed, NO_NODES)) == ("Error", "Exit code 3 (Error)")
    assert said(pod_problem(failed, NO_NODES)) == "eval-fghij: Failed, exit code 3 (Error)"


def test_it_reads_a_pod_on_a_lost_node_as_still_running_and_blames_the_node() -> None:
    """KUBERNETES-FACTS: the phase stays Running and the containers stay `ready: true`; only the
    pod's Ready condition flips. The node being Offline is what the console reports."""
    pod = parse_pod(k8s.node_lost_pod())
    nodes = {"node-1": parse_node(k8s.node(ready="Unknown"))}
    assert (pod.phase, pod.ready) == ("Running", False)
    assert worded(pod_reason(pod, nodes))[0] == NODE_NOT_READY
    assert said(pod_problem(pod, nodes)) == "train-worker-0: node node-1 not ready"


def test_it_reads_the_taint_manager_eviction_as_terminating() -> None:
    pod = parse_pod(k8s.node_lost_pod(evicting=True))
    assert pod.deleted_at == datetime(2025, 3, 1, 10, 5, tzinfo=UTC)
    assert worded(pod_reason(pod, NO_NODES)) == ("Terminating", "The pod is being deleted.")


def test_it_accepts_phase_unknown_without_failing() -> None:
    """Phase Unknown is still in the API enum: parsed as no phase, reason NodeLost/Unknown."""
    pod = parse_pod(k8s.unknown_pod())
    assert pod.phase is None
    assert worded(pod_reason(pod, NO_NODES))[0] == NODE_LOST
    assert (
        said(pod_problem(pod, NO_NODES)) == "train-worker-0: node node-1 lost (pod phase Unknown)"
    )


def test_it_names_the_first_problem_in_pod_name_order() -> None:
    pods = [
        parse_pod(k8s.unschedulable_pod("w-2")),
        parse_pod(k8s.pod("w-0")),
        parse_pod(k8s.crash_loop_pod("w-1")),
    ]
    assert said(first_problem(pods, NO_NODES)).startswith("w-1: CrashLoopBackOff")


def test_it_reads_a_statefulset_whose_zero_counters_are_omitted() -> None:
    sts = parse_statefulset(k8s.statefulset(replicas=3, ready=0))
    assert (sts.replicas, sts.ready_replicas, sts.updated_replicas) == (3, 0, 0)
    assert parse_statefulset(k8s.statefulset(omit_replicas=True)).replicas == 1
    assert sts.owner == Owner(7, 11, 1) and sts.kind == "StatefulSet"


def test_it_reads_batch_job_success_and_failure_from_their_final_conditions() -> None:
    running = parse_batch_job(k8s.batch_job(active=1))
    complete = parse_batch_job(k8s.batch_job(outcome="complete"))
    failed = parse_batch_job(k8s.batch_job(outcome="failed"))
    assert (running.active, running.complete, running.failed_condition) == (1, False, False)
    assert (complete.complete, complete.condition_reason, complete.succeeded) == (
        True, "CompletionsReached", 1,
    )  # fmt: skip
    assert (failed.failed_condition, failed.condition_reason, failed.active) == (
        True, "BackoffLimitExceeded", 0,
    )  # fmt: skip


def test_it_reads_node_ready_as_online_and_anything_else_as_offline() -> None:
    """Spec §Node status: Online/Offline only; Unknown (kubelet gone) is Offline."""
    online = parse_node(k8s.node())
    lost = parse_node(k8s.node(ready="Unknown"))
    broken = parse_node(k8s.node(ready="False"))
    assert (online.online, online.gpus, online.cpu, online.memory, online.message) == (
        True, 8, "64", "512Gi", "",
    )  # fmt: skip
    assert online.heartbeat_at == datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
    assert not lost.online and lost.message.startswith("NodeStatusUnknown")
    assert not broken.online and broken.message.startswith("KubeletNotReady")


def test_it_reads_a_cordoned_node_as_online_and_unschedulable() -> None:
    node = parse_node(k8s.node(cordoned=True))
    assert (node.online, node.unschedulable) == (True, True)
    assert parse_node(k8s.node()).unschedulable is False


def test_it_reads_add_on_rollouts_and_the_progress_deadline() -> None:
    ok = parse_addon(k8s.deployment(), "Deployment")
    stuck = parse_addon(k8s.deployment(stuck=True, updated=1, ready=1), "Deployment")
    plugin = parse_addon(k8s.daemonset(desired=3, updated=2, ready=3), "DaemonSet")
    assert (ok.addon, ok.image_tag, ok.desired, ok.available) == (
        "kuberay-operator",
        "v1.2.2",
        1,
        1,
    )
    assert not ok.progress_deadline_exceeded
    assert stuck.progress_deadline_exceeded and "timed out" in stuck.message
    assert (plugin.kind, plugin.desired, plugin.updated, plugin.ready) == ("DaemonSet", 3, 2, 3)


def test_it_reads_image_tags() -> None:
    assert image_tag("nvcr.io/nvidia/k8s-device-plugin:v0.17.0") == "v0.17.0"
    assert image_tag("registry:5000/ray") == "latest"
    assert image_tag("ray:2.9@sha256:abc") == "2.9"
    assert image_tag("ray@sha256:abc") == "sha256:abc"


def test_it_keeps_parsing_when_optional_sections_are_missing() -> None:
    pod = parse_pod({"metadata": {"name": "bare"}, "status": {"phase": "Pending"}})
    assert (pod.name, pod.phase, pod.restart_count, pod.owner) == (
        "bare",
        PodPhase.PENDING,
        0,
        Owner(None, None, None),
    )


# --- completions in termination messages (issue 10, item 3a) -------------------------------

COMPLETION = '{"trainyard": "completion", "outcome": "failed", "exit_code": 3, "reason": "NaNLoss"}'


def test_it_reads_a_completion_from_the_current_termination_message() -> None:
    item = k8s.finished_pod("train-worker-0", succeeded=False)
    item["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = COMPLETION

    completion = parse_pod(item).completion

    assert completion is not None
    assert (completion.outcome, completion.exit_code, completion.reason) == ("failed", 3, "NaNLoss")
    assert (completion.message, completion.instance) == ("", 0)
    assert completion.finished_at == datetime.fromisoformat(k8s.T1)


def test_it_reads_it_from_the_last_state_as_the_run_before_the_restart_count() -> None:
    """The run `state.terminated` shows becomes `lastState.terminated` once restarted, and the
    restart count grows by one: both readings name the same run."""
    item = k8s.crash_loop_pod(restarts=4)
    item["status"]["containerStatuses"][0]["lastState"]["terminated"]["message"] = COMPLETION

    completion = parse_pod(item).completion

    assert completion is not None and completion.instance == 3


def test_it_ignores_a_termination_message_that_is_not_a_completion() -> None:
    messages = [
        "CUDA error: an illegal memory access was encountered",
        '{"trainyard": "completion", "outcome": "maybe"}',
        '{"trainyard": "progress", "outcome": "failed"}',
        '{"trainyard": "completion", "outcome": "failed"',  # cut at 4096 bytes
        '["trainyard", "completion"]',
        "",
    ]
    for message in messages:
        item = k8s.finished_pod("train-worker-0", succeeded=False)
        item["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = message
        assert parse_pod(item).completion is None, message
    item = k8s.finished_pod("train-worker-0", succeeded=False)
    item["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = 42
    assert parse_pod(item).completion is None


def test_it_keeps_no_exit_code_that_is_not_an_integer() -> None:
    for exit_code in ("true", "-1.0", '"3"'):
        item = k8s.finished_pod("train-worker-0", succeeded=True)
        message = f'{{"trainyard": "completion", "outcome": "succeeded", "exit_code": {exit_code}}}'
        item["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = message

        completion = parse_pod(item).completion

        assert completion is not None and completion.exit_code is None, exit_code


def test_it_stores_a_pod_with_its_completion_and_reads_it_back_whole() -> None:
    item = k8s.crash_loop_pod(restarts=2)
    item["status"]["containerStatuses"][0]["lastState"]["terminated"]["message"] = COMPLETION
    pod = parse_pod(item)

    assert thaw(PodObs, freeze(pod)) == pod
    assert thaw(PodObs, freeze(parse_pod(k8s.pod()))) == parse_pod(k8s.pod())
