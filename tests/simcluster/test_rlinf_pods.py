"""The pods of the "RLinf on Ray" template as simcluster runs them: the scripts jobs.rlinf
renders are read as a shell reads them (simcluster/scripts.py), the head runs Ray, the driver
wrapper and a simulated RLinf run, and its done marker lives where its path lies: on the output
claim it outlives the pod, elsewhere it goes with the container.

Spec: issue "RLinf-ready jobs", item 5 (simcluster runs the template's pods end to end).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.rlinf import RlinfIn, expand, head_script, worker_script
from simcluster import scripts
from simcluster.behaviour import Kind, behaviour_of
from simcluster.server import SimCluster
from tests.simcluster.conftest import Kube, connect
from tests.simcluster.test_train import JOB, Receiver, log, settle, signal_env, steps_printed

CHOICES = {"image": "rlinf/rlinf:agentic-rlinf0.1", "nodes": 3, "gpus_per_node": 1,
           "config_name": "maniskill_ppo_openvlaoft"}  # fmt: skip
MARKER = "/output/ppo/.trainyard-completed"


def choices(**more: Any) -> RlinfIn:
    return RlinfIn.model_validate(CHOICES | more)


def head(env: dict[str, str] | None = None, **more: Any) -> dict[str, Any]:
    """The head container as the console renders the template's head Task."""
    task = expand(choices(**more))["tasks"][0]
    env = {"TRAINYARD_JOB": "ppo"} | (env or {})  # the console's, in every container
    return {"name": "main", "command": task["command"], "args": task["args"], "env": env}


def behaviour(container: dict[str, Any]) -> Any:
    return behaviour_of(container, container["env"])


# --- reading the scripts -----------------------------------------------------------------------


def test_the_head_is_ray_the_driver_and_a_run_of_its_max_steps() -> None:
    overrides = ["runner.max_steps=6", "runner.save_interval=2"]
    found = behaviour(head(overrides=overrides, placement={"actor": "0-2"}))
    assert found.kind is Kind.TRAIN and found.train is not None
    options = found.train
    assert (options.steps, options.checkpoint_every, options.nodes) == (6, 2, 3)
    assert (options.step_seconds, options.heartbeat_seconds) == (5.0, 30.0)  # the defaults
    assert options.driver == scripts.DriverOptions(expected_nodes=3, done_marker=MARKER)
    assert options.log_path == "/output/ppo/maniskill_ppo_openvlaoft"  # log_path/experiment


def test_without_overrides_the_run_takes_the_default_steps_and_saves_nothing() -> None:
    options = behaviour(head(resume_from="auto")).train
    assert (options.steps, options.checkpoint_every) == (scripts.DEFAULT_STEPS, 0)


def test_the_environment_sets_the_heartbeat_and_the_simulation_knob() -> None:
    env = {"TRAINYARD_HEARTBEAT_SECONDS": "5", scripts.SIM_ENV: "--step-seconds 2 --fail-at 7"}
    options = behaviour(head(env, overrides=["runner.max_steps=10"])).train
    assert (options.steps, options.step_seconds, options.fail_at) == (10, 2.0, 7)
    assert options.heartbeat_seconds == 5.0


@pytest.mark.parametrize("knob", ["--fail-at", "--step-seconds soon", "--exit", "--nodes 9"])
def test_a_knob_sim_train_would_refuse_exits_2_with_the_usage(knob: str) -> None:
    found = behaviour(head({scripts.SIM_ENV: knob}))
    assert (found.kind, found.exit_code) == (Kind.USAGE, 2)
    assert found.command == f"{scripts.SIM_ENV}={knob}"


def test_a_worker_joins_the_head_of_its_own_job_through_its_service() -> None:
    """The script names the Job as $TRAINYARD_JOB: a clone's workers join the clone's head."""
    for job in ("ppo", "ppo-2"):
        worker = {
            "command": ["bash", "-c"],
            "args": [worker_script()],
            "env": {"TRAINYARD_JOB": job},
        }
        found = behaviour(worker)
        assert (found.kind, found.head_host) == (Kind.RAY_WORKER, f"{job}-head-0.{job}-head")


def test_the_head_writes_under_its_own_jobs_log_path() -> None:
    options = behaviour(head({"TRAINYARD_JOB": "ppo-2"})).train
    assert options.driver.done_marker == "/output/ppo-2/.trainyard-completed"
    assert options.log_path == "/output/ppo-2/maniskill_ppo_openvlaoft"


@pytest.mark.parametrize(
    "script",
    [
        "echo hello; sleep infinity",
        "ray start --head --block",  # no driver in front
        head_script(choices()).replace("--block &", "--block;"),  # Ray in front
        head_script(choices()).replace("--expected-nodes 3 ", ""),  # the driver refuses
        "exec ray start --address='ppo-head-0.ppo-head:6379",  # no closing quotation
    ],
)
def test_any_other_script_is_a_long_running_process(script: str) -> None:
    assert behaviour({"command": ["bash", "-c", script], "env": {}}).kind is Kind.SERVE


def test_extra_arguments_reach_the_entry_through_dollar_at() -> None:
    container = head(overrides=["runner.max_steps=6"])
    container["args"] += ["bash", "runner.max_steps=8"]  # `bash -c SCRIPT $0 $1`
    assert behaviour(container).train.steps == 8


# --- running them --------------------------------------------------------------------------------


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=3, gpus_per_node=8, seed=4, speed=0) as cluster:
        yield cluster
        assert not cluster.tick_errors, cluster.tick_errors[0]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def kube(sim: SimCluster, tmp_path: Path) -> Iterator[Kube]:
    kube = connect(sim, tmp_path)
    storage = {"requests": {"storage": "1Gi"}}
    kube.core.create_namespaced_persistent_volume_claim(
        kube.namespace,
        {
            "metadata": {"name": "outputs"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": storage},
        },
    )
    yield kube
    kube.api.close()


def create_head(kube: Kube, url: str, run: str = "1", claim: bool = True, knob: str = "") -> str:
    """The head pod, one Ray node, three steps of 1 s; returns its UID."""
    env = {"TRAINYARD_JOB": "ppo", scripts.SIM_ENV: f"--step-seconds 1 {knob}"}
    container = head(env, nodes=1, overrides=["runner.max_steps=3"])
    container["image"] = CHOICES["image"]
    container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    container["env"] += [{"name": "TRAINYARD_RUN", "value": run}, *signal_env(url)]
    spec: dict[str, Any] = {"containers": [container]}
    if claim:
        container["volumeMounts"] = [{"name": "out", "mountPath": "/output"}]
        spec["volumes"] = [{"name": "out", "persistentVolumeClaim": {"claimName": "outputs"}}]
    body = {"metadata": {"name": "ppo-head-0", "labels": {JOB: "7"}}, "spec": spec}
    return str(kube.core.create_namespaced_pod(kube.namespace, body).metadata.uid)


def recreate_head(sim: SimCluster, kube: Kube, url: str, run: str = "1", **more: Any) -> str:
    kube.core.delete_namespaced_pod("ppo-head-0", kube.namespace)
    settle(sim, 3)  # SIGTERM: the idle wrapper exits 0 at once
    return create_head(kube, url, run, **more)


def of_uid(receiver: Receiver, uid: str, kind: str) -> list[dict[str, Any]]:
    return [m for m in receiver.of("ppo-head-0", kind) if m["uid"] == uid]


def test_it_waits_trains_completes_and_idles_as_the_wrapper_does(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    create_head(kube, receiver.url)
    settle(sim, 70)
    phases = [m["phase"] for m in receiver.of("ppo-head-0", "phase")]
    assert phases == ["starting", "waiting_for_nodes", "initializing", "training"]
    assert [m["step"] for m in receiver.of("ppo-head-0", "progress")] == [1, 2, 3]
    (completion,) = receiver.of("ppo-head-0", "completion")
    assert (completion["outcome"], completion["exit_code"]) == ("succeeded", 0)
    assert len(receiver.of("ppo-head-0", "heartbeat")) == 3  # idle, it still beats (every 30 s)
    text = log(kube, "ppo-head-0")
    assert text.startswith("Usage stats collection is disabled.\nLocal node IP: ")
    assert "trainyard driver: Ray has 1 of 1 nodes alive" in text
    assert steps_printed(text) == [1, 2, 3]
    assert text.rstrip().endswith(
        "trainyard driver: completion: succeeded, exit code 0\n"
        "trainyard driver: idle: SIGTERM ends this container"
    )
    status = kube.core.read_namespaced_pod("ppo-head-0", kube.namespace).status
    assert status.phase == "Running" and status.container_statuses[0].restart_count == 0


def test_the_marker_on_the_claim_outlives_the_pod_and_the_same_run_is_not_trained_again(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    create_head(kube, receiver.url)
    settle(sim, 15)
    again = recreate_head(sim, kube, receiver.url)
    settle(sim, 15)
    (completion,) = of_uid(receiver, again, "completion")
    assert (completion["outcome"], completion["exit_code"]) == ("succeeded", 0)
    assert of_uid(receiver, again, "progress") == of_uid(receiver, again, "phase") == []
    text = log(kube, "ppo-head-0")
    assert f"trainyard driver: {MARKER}: this run is complete already, not training again" in text
    assert steps_printed(text) == []


def test_a_resumed_job_is_a_new_run_and_trains_again(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    create_head(kube, receiver.url, run="1")
    settle(sim, 15)
    resumed = recreate_head(sim, kube, receiver.url, run="2")
    settle(sim, 15)
    assert [m["step"] for m in of_uid(receiver, resumed, "progress")] == [1, 2, 3]
    text = log(kube, "ppo-head-0")
    assert f"trainyard driver: {MARKER} is from run 1, this is run 2: training again" in text


def test_without_a_claim_the_marker_goes_with_the_container(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    """A restarted container starts from its image's filesystem: the run trains again (the
    trap the output claim removes)."""
    uid = create_head(kube, receiver.url, claim=False)
    settle(sim, 15)
    assert sim.kill_pod(kube.namespace, "ppo-head-0") == ["main"]
    settle(sim, 15)
    assert [m["step"] for m in of_uid(receiver, uid, "progress")] == [1, 2, 3, 1, 2, 3]
    assert len(of_uid(receiver, uid, "completion")) == 2


def test_a_failed_entry_is_reported_written_as_termination_message_and_the_wrapper_idles(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    uid = create_head(kube, receiver.url, knob="--fail-at 2 --exit-code 7")
    settle(sim, 15)
    (failed,) = of_uid(receiver, uid, "completion")
    assert (failed["outcome"], failed["exit_code"], failed["reason"]) == ("failed", 7, "Error")
    assert failed["message"].endswith("at global step 2, exiting with code 7")
    status = kube.core.read_namespaced_pod("ppo-head-0", kube.namespace).status.container_statuses
    assert status[0].state.running is not None  # idle, as after a success
    sim.kill_pod(kube.namespace, "ppo-head-0")  # the kubelet reads the file however it ended
    settle(sim, 3)
    status = kube.core.read_namespaced_pod("ppo-head-0", kube.namespace).status.container_statuses
    assert json.loads(status[0].last_state.terminated.message) == {
        "trainyard": "completion", "outcome": "failed", "exit_code": 7, "reason": "Error",
        "message": failed["message"],
    }  # fmt: skip
    # The restarted container finds the failure on the claim and does not train again.
    assert [m["step"] for m in of_uid(receiver, uid, "progress")] == [1]
