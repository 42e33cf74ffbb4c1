"""`sim train`: a simulated RLinf run prints RLinf's progress lines and posts its workload signals
(docs/api.md "Signals") through client/trainyard_signal.py to whatever TRAINYARD_SIGNAL_URL names,
here a small receiver standing in for the console. The clock is frozen (speed 0) and moved with
advance(), so every step, heartbeat and check happens at a known simulated time.

Spec: issue 10, item 8 (simcluster's training workloads report like real runs).
"""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simcluster.server import SimCluster
from tests.simcluster.conftest import Kube, connect, wait_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rlinf_train.log"
TOKEN = "1.1.secret"
JOB = "trainyard.io/job"


class Receiver(http.server.ThreadingHTTPServer):
    """Records every posted message with the Authorization header it came with."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.messages: list[tuple[str, dict[str, Any]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api/v1/jobs/1/signals"

    def of(self, pod: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [m for _, m in self.messages if m["pod"] == pod and kind in (None, m["kind"])]


class ReceiverHandler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization", "")
        self.server.messages.extend((auth, message) for message in body)
        answer = json.dumps({"accepted": len(body), "duplicates": 0}).encode()
        self.send_response(202)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=3, gpus_per_node=8, seed=3, speed=0) as cluster:
        yield cluster
        assert not cluster.tick_errors, cluster.tick_errors[0]


@pytest.fixture
def kube(sim: SimCluster, tmp_path: Path) -> Iterator[Kube]:
    kube = connect(sim, tmp_path)
    yield kube
    kube.api.close()


def signal_env(url: str) -> list[dict[str, Any]]:
    """What the console gives every container (console/kube/manifests.py)."""
    return [
        {"name": "TRAINYARD_SIGNAL_URL", "value": url},
        {"name": "TRAINYARD_SIGNAL_TOKEN", "value": TOKEN},
        {"name": "TRAINYARD_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "TRAINYARD_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
    ]


def template(command: list[str], url: str, restart: str = "Always") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "rlinf/rlinf:0.2", "command": command}
    container |= {"env": signal_env(url)}
    return {
        "metadata": {"labels": {JOB: "7"}},
        "spec": {"containers": [container], "restartPolicy": restart},
    }


def create_pod(kube: Kube, name: str, command: list[str], url: str, **more: Any) -> Any:
    pod = template(["sim", "train", *command], url, **more)
    pod["metadata"]["name"] = name
    return kube.core.create_namespaced_pod(
        kube.namespace, {"apiVersion": "v1", "kind": "Pod", **pod}
    )


def create_statefulset(kube: Kube, name: str, replicas: int, command: list[str], url: str) -> None:
    labels = {JOB: "7", "role": name}
    pod = template(command, url)
    pod["metadata"]["labels"] |= labels
    body = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": pod,
        },
    }
    kube.apps.create_namespaced_stateful_set(kube.namespace, body)


def settle(sim: SimCluster, seconds: float) -> None:
    """Simulated time passes, then everything it made the pods say has been sent."""
    sim.advance(seconds)
    assert sim.cluster.signals.flush(10.0)


def log(kube: Kube, pod: str, **query: Any) -> str:
    text: str = kube.core.read_namespaced_pod_log(pod, kube.namespace, **query)
    return text


def steps_printed(text: str) -> list[int]:
    return [
        int(line.split("Global Step:")[1].split("/")[0])
        for line in text.splitlines()
        if "Global Step:" in line
    ]


def test_it_posts_progress_heartbeats_checkpoints_and_completion_as_its_pod(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    command = ["4", "--checkpoint-every", "2", "--heartbeat-seconds", "10"]
    uid = create_pod(kube, "ppo-head-0", command, receiver.url).metadata.uid
    settle(sim, 30)  # started after 5 s (sandbox, pull, create); steps every 5 s
    messages = receiver.of("ppo-head-0")
    assert {auth for auth, _ in receiver.messages} == {f"Bearer {TOKEN}"}
    assert {m["uid"] for m in messages} == {uid}
    assert [m["seq"] for m in messages] == sorted({m["seq"] for m in messages})
    progress = receiver.of("ppo-head-0", "progress")
    assert [(m["step"], m["max_steps"], m["step_seconds"]) for m in progress] == [
        (1, 4, 5.0), (2, 4, 5.0), (3, 4, 5.0), (4, 4, 5.0),
    ]  # fmt: skip
    assert set(progress[0]["metrics"]) == {
        "env/return",
        "env/success_once",
        "train/actor/policy_loss",
    }
    checkpoints = [(m["step"], m["path"]) for m in receiver.of("ppo-head-0", "checkpoint")]
    assert checkpoints == [
        (2, "/workspace/results/sim-train/checkpoints/global_step_2"),
        (4, "/workspace/results/sim-train/checkpoints/global_step_4"),
    ]
    assert [m["phase"] for m in receiver.of("ppo-head-0", "phase")] == [
        "starting", "training", "checkpointing", "training", "checkpointing", "training",
        "finalizing",
    ]  # fmt: skip
    assert len(receiver.of("ppo-head-0", "heartbeat")) == 3  # at 0, 10 and 20 s of its life
    assert [(m["expected_nodes"], m["alive_nodes"]) for m in receiver.of("ppo-head-0", "ray")] == [
        (1, 1)
    ]
    (completion,) = receiver.of("ppo-head-0", "completion")
    assert (completion["outcome"], completion["exit_code"]) == ("succeeded", 0)
    assert messages[-1] == completion


def test_it_prints_rlinf_metric_tables_and_then_idles_without_exit(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    create_pod(kube, "ppo-head-0", ["3", "--checkpoint-every", "2"], receiver.url)
    settle(sim, 25)
    count = len(receiver.messages)
    settle(sim, 300)
    assert len(receiver.messages) == count  # it never trains again in this container
    text = log(kube, "ppo-head-0")
    assert steps_printed(text) == [1, 2, 3]
    assert "│ Global Step:    3/3 │ Progress: " + "█" * 40 + " │ 100.0%" in text
    assert "RLinf] Saving checkpoint at step 2." in text
    assert "│ Elapsed: 00:15 │ ETA: 00:00 │ Step Time: 5.000s" in text
    assert text.rstrip().endswith("[sim] training finished at step 3; idling (no --exit)")
    status = kube.core.read_namespaced_pod("ppo-head-0", kube.namespace).status
    assert status.phase == "Running" and status.container_statuses[0].restart_count == 0


def test_its_lines_are_the_sample_the_console_reads_rlinf_logs_from(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    """tests/fixtures/rlinf_train.log is what `sim train 20 --checkpoint-every 5` prints in its
    first 11 steps; only the clock in the logger's lines differs from run to run."""
    create_pod(kube, "rlinf-head-0", ["20", "--checkpoint-every", "5"], receiver.url)
    settle(sim, 61)  # started at 5 s, step 11 at 60 s
    clock = re.compile(r"^\[(\w+) \d\d:\d\d:\d\d RLinf\]", re.MULTILINE)
    printed = clock.sub(r"[\1 hh:mm:ss RLinf]", log(kube, "rlinf-head-0"))
    assert printed == clock.sub(r"[\1 hh:mm:ss RLinf]", FIXTURE.read_text())


def test_ray_alive_nodes_drop_when_a_worker_pod_is_deleted_and_return_when_it_is_ready_again(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    create_statefulset(kube, "head", 1, ["sim", "train", "1000", "--nodes", "3"], receiver.url)
    create_statefulset(kube, "worker", 2, ["sim", "ray-worker", "head-0.head"], receiver.url)
    settle(sim, 30)

    def ray() -> list[int]:
        return [m["alive_nodes"] for m in receiver.of("head-0", "ray")]

    assert ray() == [3]
    phases = [m["phase"] for m in receiver.of("head-0", "phase")]
    assert phases[:3] == ["starting", "waiting_for_nodes", "training"]
    assert "Waiting for 3 nodes to be ready, currently 1 nodes available." in log(kube, "head-0")
    kube.core.delete_namespaced_pod("worker-1", kube.namespace)
    settle(sim, 1)
    assert ray() == [3, 2]
    assert all(m["expected_nodes"] == 3 for m in receiver.of("head-0", "ray"))
    settle(sim, 30)  # the StatefulSet re-creates it; it runs and is Ready again
    assert kube.core.read_namespaced_pod("worker-1", kube.namespace).status.phase == "Running"
    assert ray() == [3, 2, 3]
    assert receiver.of("worker-0") == []  # only the process on the head runs the trainer


def test_a_hang_stops_every_post_and_every_line(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    create_pod(
        kube, "ppo-head-0", ["100", "--hang-at", "2", "--heartbeat-seconds", "5"], receiver.url
    )
    settle(sim, 20)
    assert [m["step"] for m in receiver.of("ppo-head-0", "progress")] == [1, 2]
    count, text = len(receiver.messages), log(kube, "ppo-head-0")
    settle(sim, 600)
    assert len(receiver.messages) == count  # no step, no heartbeat
    assert log(kube, "ppo-head-0") == text
    assert steps_printed(text) == [1, 2]
    status = kube.core.read_namespaced_pod("ppo-head-0", kube.namespace).status
    assert status.phase == "Running" and status.container_statuses[0].ready


def test_a_pause_stops_the_steps_for_a_while_but_not_the_heartbeats(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    """`--pause-at 2 --pause-seconds 60` (the demo's stall that recovers, issue 35): steps 1
    and 2 at 5 s and 10 s, then nothing until 70 s but heartbeats, then step 3 at 75 s."""
    command = ["100", "--step-seconds", "5", "--pause-at", "2", "--pause-seconds", "60",
               "--heartbeat-seconds", "10"]  # fmt: skip
    create_pod(kube, "ppo-head-0", command, receiver.url)
    settle(sim, 60)
    assert [m["step"] for m in receiver.of("ppo-head-0", "progress")] == [1, 2]
    beats = len(receiver.of("ppo-head-0", "heartbeat"))
    settle(sim, 30)
    progress = receiver.of("ppo-head-0", "progress")
    assert [m["step"] for m in progress][:3] == [1, 2, 3]
    assert len(receiver.of("ppo-head-0", "heartbeat")) > beats
    assert steps_printed(log(kube, "ppo-head-0"))[:3] == [1, 2, 3]


def test_a_failure_posts_a_failed_completion_and_writes_the_termination_message(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    command = ["10", "--fail-at", "3", "--exit-code", "7"]
    create_pod(kube, "ppo-head-0", command, receiver.url, restart="Never")
    settle(sim, 30)
    assert [m["step"] for m in receiver.of("ppo-head-0", "progress")] == [1, 2]
    (completion,) = receiver.of("ppo-head-0", "completion")
    last_line = "RuntimeError: simulated training failure at global step 3, exiting with code 7"
    assert (completion["outcome"], completion["exit_code"]) == ("failed", 7)
    assert (completion["reason"], completion["message"]) == ("Error", last_line)
    status = kube.core.read_namespaced_pod("ppo-head-0", kube.namespace).status
    terminated = status.container_statuses[0].state.terminated
    assert (status.phase, terminated.exit_code, terminated.reason) == ("Failed", 7, "Error")
    assert json.loads(terminated.message) == {
        "trainyard": "completion", "outcome": "failed", "exit_code": 7, "reason": "Error",
        "message": last_line,
    }  # fmt: skip
    assert log(kube, "ppo-head-0").rstrip().endswith(last_line)


def test_exit_writes_the_succeeded_completion_and_a_statefulset_pod_trains_again(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    create_pod(kube, "ppo-head-0", ["2", "--exit"], receiver.url)  # restartPolicy Always
    settle(sim, 18)  # steps at 10 and 15 s; the restarted container starts at 16 s
    status = kube.core.read_namespaced_pod("ppo-head-0", kube.namespace).status.container_statuses[
        0
    ]
    assert status.restart_count == 1 and status.state.running is not None
    terminated = status.last_state.terminated
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")
    assert json.loads(terminated.message) == {
        "trainyard": "completion", "outcome": "succeeded", "exit_code": 0,
    }  # fmt: skip
    phases = [m["phase"] for m in receiver.of("ppo-head-0", "phase")]
    assert phases[-3:] == ["finalizing", "starting", "training"]  # from step 1 again
    assert (
        log(kube, "ppo-head-0", previous=True)
        .rstrip()
        .endswith("[sim] training finished at step 2, exiting 0")
    )


def test_no_signals_posts_nothing_but_prints_its_lines(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    create_pod(kube, "quiet-0", ["3", "--no-signals"], receiver.url)
    create_pod(kube, "loud-0", ["3"], receiver.url)
    settle(sim, 25)
    assert receiver.of("loud-0", "completion")
    assert receiver.of("quiet-0") == []
    assert steps_printed(log(kube, "quiet-0")) == [1, 2, 3]


@pytest.fixture
def silent_console() -> Iterator[str]:
    """A console that accepts connections and never answers (and one port that refuses)."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(64)
    yield f"http://127.0.0.1:{listening.getsockname()[1]}/api/v1/jobs/1/signals"
    listening.close()


def test_a_console_that_never_answers_slows_neither_simcluster_nor_other_jobs(
    sim: SimCluster, kube: Kube, receiver: Receiver, silent_console: str
) -> None:
    for index in range(5):
        create_pod(kube, f"stuck-{index}", ["50", "--step-seconds", "1"], silent_console)
    create_pod(kube, "fine-0", ["3"], receiver.url)
    sim.advance(60)
    wait_for(lambda: receiver.of("fine-0", "completion"))
    assert steps_printed(log(kube, "stuck-0")) == list(range(1, 51))
    assert len(kube.core.list_namespaced_pod(kube.namespace).items) == 6
    assert sim.cluster.signals.dropped == 0


def test_a_command_line_it_cannot_parse_exits_2_with_its_usage(
    sim: SimCluster, kube: Kube, receiver: Receiver
) -> None:
    create_pod(kube, "typo-0", ["100", "--hang-at"], receiver.url, restart="Never")
    settle(sim, 10)
    status = kube.core.read_namespaced_pod("typo-0", kube.namespace).status
    assert status.container_statuses[0].state.terminated.exit_code == 2
    assert "sim train STEPS [--step-seconds S]" in log(kube, "typo-0")
    assert receiver.of("typo-0") == []
