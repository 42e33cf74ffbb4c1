"""The "RLinf on Ray" template (jobs.rlinf): the rules its expansion follows, its checks, and
the API that creates a Job from it."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from console.kube.manifests import Target, headless_service, statefulset
from console.models import ApiToken, Cluster, Node
from jobs.models import Job
from jobs.rlinf import RlinfIn, expand, head_script, placement_error, worker_script
from jobs.spec import SpecInvalid, parse_job_spec, parse_rlinf_spec
from jobs.validators import shm_size_of

CHOICES = {"image": "rlinf/rlinf:agentic-rlinf0.1", "nodes": 3, "gpus_per_node": 8,
           "config_name": "maniskill_ppo_openvlaoft"}  # fmt: skip


def choices(**more: Any) -> RlinfIn:
    return RlinfIn.model_validate(CHOICES | more)


def run_head(script: str, job: str) -> list[str]:
    """The head script under bash with Ray and the driver replaced by printing: the arguments
    the driver would get (after --), expanded as in a container of Job `job`."""
    script = script.replace('mkdir -p "$out"; ', "").replace("ray start", "true")
    script = script.replace("exec python /opt/trainyard/trainyard_driver.py", "printf '%s\\n'")
    ran = subprocess.run(
        ["bash", "-c", script], env={"TRAINYARD_JOB": job, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return ran.stdout.splitlines()


def test_the_head_exports_its_rank_before_ray_starts_and_runs_the_driver_in_front() -> None:
    script = head_script(choices())
    rank, ray, driver = (script.index(s) for s in ("RLINF_NODE_RANK=0", "ray start", "python /opt"))
    assert rank < ray < driver
    assert "ray start --head --port=6379 --block &" in script
    assert "exec python /opt/trainyard/trainyard_driver.py --expected-nodes 3" in script
    assert "set -eo pipefail" in script
    assert "cluster.num_nodes=3" in script
    assert "/workspace/RLinf/examples/embodiment/train_embodied_agent.py" in script
    argv = run_head(script, "ppo")
    assert argv[argv.index("--done-marker") + 1] == "/output/ppo/.trainyard-completed"
    assert "runner.logger.log_path=/output/ppo" in argv  # stable, not timestamped


def test_a_clone_under_another_name_joins_its_own_head_and_writes_its_own_outputs() -> None:
    """The scripts name the Job only as the container reads it (TRAINYARD_JOB): the same spec
    cloned as ppo-2 never joins ppo's head nor writes into ppo's outputs."""
    argv = run_head(head_script(choices()), "ppo-2")
    assert "runner.logger.log_path=/output/ppo-2" in argv
    assert argv[argv.index("--done-marker") + 1] == "/output/ppo-2/.trainyard-completed"
    joined = subprocess.run(
        ["bash", "-c", worker_script().replace("ray start", "echo")],
        env={"TRAINYARD_JOB": "ppo-2", "HOSTNAME": "ppo-2-worker-0", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert joined.stdout.split() == ["--address=ppo-2-head-0.ppo-2-head:6379", "--block"]


def test_a_worker_takes_its_rank_from_its_ordinal_and_blocks_on_the_heads_address() -> None:
    script = worker_script()
    assert script.index("RLINF_NODE_RANK") < script.index("ray start")
    assert (
        'ray start --address="${TRAINYARD_JOB}-head-0.${TRAINYARD_JOB}-head:6379" --block &'
        in script
    )
    ranked = subprocess.run(
        ["bash", "-c", script.split("trap")[0] + 'echo "$RLINF_NODE_RANK"'],
        env={"HOSTNAME": "ppo-worker-1", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert ranked.stdout.strip() == "2"  # worker-0 is node 1, worker-1 node 2


# A stand-in for `ray start --block` as Ray 2.60 answers SIGTERM: it drains for up to 30 s
# (here: ignores SIGTERM) before leaving. `ray start` exits with the code the test gives it.
STAND_IN_RAY = """#!{python}
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: None)
with open(os.environ["STAND_IN_PID"], "w") as file:
    file.write(str(os.getpid()))
if os.environ.get("STAND_IN_EXIT"):
    sys.exit(int(os.environ["STAND_IN_EXIT"]))
time.sleep(30)
"""


def start_worker(tmp_path: Path, **env: str) -> tuple[subprocess.Popen[bytes], Path]:
    """The template's worker script under bash, its `ray` the stand-in; the stand-in's pid file."""
    bin_dir, pid_file = tmp_path / "bin", tmp_path / "ray.pid"
    bin_dir.mkdir()
    (bin_dir / "ray").write_text(STAND_IN_RAY.format(python=sys.executable))
    (bin_dir / "ray").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOSTNAME": "ppo-worker-0", "TRAINYARD_JOB": "ppo",
           "STAND_IN_PID": str(pid_file), **env}  # fmt: skip
    worker = subprocess.Popen(["bash", "-c", worker_script()], env=env, start_new_session=True)
    return worker, pid_file


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed child its parent has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_it_leaves_a_worker_within_seconds_of_sigterm_though_ray_drains_for_30(
    tmp_path: Path,
) -> None:
    """Issue 31, item 3: every stop held the worker pods for the whole grace period, Ray's
    `ray start --block` draining its node on SIGTERM while the head was already gone. The
    worker's shell answers SIGTERM itself: Ray killed, the container ended, exit 0."""
    worker, pid_file = start_worker(tmp_path)
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text():
            assert worker.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        ray = int(pid_file.read_text())
        sent = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=10) == 0
        assert time.monotonic() - sent < 2.0  # at once: the issue's bound is 10 s
        deadline = time.monotonic() + 5
        while running(ray):  # SIGKILLed: gone as soon as the kernel has it
            assert time.monotonic() < deadline, "the stand-in Ray outlived its worker"
            time.sleep(0.02)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def test_it_ends_a_worker_with_rays_exit_code_when_ray_dies(tmp_path: Path) -> None:
    """Ray dying on its own still ends the container (Kubernetes restarts it, it joins again)."""
    worker, _ = start_worker(tmp_path, STAND_IN_EXIT="3")
    try:
        assert worker.wait(timeout=10) == 3
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)


def test_the_scripts_are_valid_shell() -> None:
    for script in (head_script(choices(resume_from="auto")), worker_script()):
        subprocess.run(["bash", "-n", "-c", script], check=True)


def test_the_tasks_are_a_head_and_nodes_minus_one_workers_with_gpu_limits() -> None:
    tasks = expand(choices())["tasks"]
    assert [(t["role"], t["replicas"]) for t in tasks] == [("head", 1), ("worker", 2)]
    assert expand(choices(nodes=1))["tasks"][0]["role"] == "head"
    assert len(expand(choices(nodes=1))["tasks"]) == 1
    head = tasks[0]
    # The engine sizes /dev/shm as it does for every Task (console/engine/rows.target_of).
    target = Target(1, "ppo", "default", 1, 7, "head", "StatefulSet", 1, head,
                    shm_size=shm_size_of(head))  # fmt: skip
    container = statefulset(target)["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert container["command"] == ["bash", "-c"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["EXPECTED_RAY_NODES"] == "3"
    assert headless_service(target)["spec"]["clusterIP"] == "None"  # the head's stable DNS name
    pod = statefulset(target)["spec"]["template"]["spec"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    shm = next(v["emptyDir"] for v in pod["volumes"] if v["name"] == "dshm")
    assert shm == {"medium": "Memory", "sizeLimit": "64Gi"}  # half the 128Gi, Ray's object store


def test_the_output_claim_is_mounted_where_the_log_path_lives() -> None:
    (head,) = expand(choices(nodes=1, output_claim="ppo-out"))["tasks"]
    assert head["volumes"] == [{"claim": "ppo-out", "mount_path": "/output"}]
    target = Target(1, "ppo", "default", 1, 7, "head", "StatefulSet", 1, head)
    pod = statefulset(target)["spec"]["template"]["spec"]
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims == ["ppo-out"]
    assert '"runner.logger.log_path=$out"' in head["args"][0]
    assert 'out="/output/${TRAINYARD_JOB}"' in head["args"][0]


def test_overrides_placement_and_resume_reach_the_entry() -> None:
    script = head_script(
        choices(overrides=["runner.max_steps=200", "+algorithm.x=1"], resume_from="/output/ppo/c",
                placement={"actor": "0-15", "rollout": "16-23"}),
    )  # fmt: skip
    argv = run_head(script, "ppo")
    assert argv[-2:] == ["runner.max_steps=200", "+algorithm.x=1"]  # the user's last
    assert "runner.resume_dir=/output/ppo/c" in argv
    assert 'cluster.component_placement.actor="0-15"' in argv  # quoted for Hydra


@pytest.mark.parametrize(
    ("component", "rule", "nodes", "gpus", "error"),
    [
        ("actor", "0-7", 1, 8, ""),
        ("actor", "0-1:0-3,3-5,7-10:7-14", 2, 8, ""),
        ("env", "all", 2, 8, ""),
        ("actor", "0-16", 2, 8, "GPU rank 16 is beyond the 16 GPUs of 2 node(s)"),
        ("actor", "0-2:0-1", 1, 8, "2 processes cannot share 3 GPUs evenly"),
        ("actor", "0-3:1-4", 1, 8, "process ranks must run from 0 without gaps or repeats"),
        ("actor", "3-1", 1, 8, "the range 3-1 runs backwards"),
        ("actor", "x", 1, 8, "'x' is not a rank or a range a-b"),
        ("actor,rollout", "0-7", 1, 8, "one per entry"),
        ("agent", "0-1", 2, 0, ""),
        ("agent", "0-2", 2, 0, "node rank 2 is beyond the 2 nodes of 2 node(s)"),
    ],
)
def test_placements_are_judged_as_rlinf_would(
    component: str, rule: str, nodes: int, gpus: int, error: str
) -> None:
    found = placement_error(component, rule, nodes, gpus)
    assert (error in found and bool(found)) if error else found == ""


# --- creating a Job from it --------------------------------------------------------------------


def request(cluster: Cluster, **rlinf: Any) -> dict[str, Any]:
    return {"template": "rlinf", "name": "ppo", "cluster": cluster.name, "rlinf": CHOICES | rlinf}


def nodes(cluster: Cluster, *gpus: int) -> None:
    now = timezone.now()
    for index, count in enumerate(gpus):
        Node.objects.create(
            cluster=cluster, name=f"gpu-{index}", phase=Node.Phase.ONLINE, gpu_capacity=count,
            observed_at=now,
        )  # fmt: skip


def test_it_refuses_what_rlinf_or_the_cluster_cannot_run(alice: User, cluster: Cluster) -> None:
    nodes(cluster, 8, 8, 4)
    with pytest.raises(SpecInvalid) as refused:
        parse_rlinf_spec(request(cluster, gpus_per_node=16, placement={"actor": "0-99"}), alice)
    assert refused.value.errors == {
        "rlinf.placement.actor": "actor: GPU rank 99 is beyond the 48 GPUs of 3 node(s)."
    }
    with pytest.raises(SpecInvalid) as refused:
        parse_rlinf_spec(request(cluster, gpus_per_node=16), alice)
    assert refused.value.errors == {
        "rlinf.gpus_per_node": f"The largest schedulable node of {cluster.name}, gpu-0, has 8 GPUs."
    }
    with pytest.raises(SpecInvalid) as refused:
        parse_rlinf_spec(request(cluster, nodes=3, gpus_per_node=8), alice)
    assert "Only 2 schedulable nodes" in refused.value.errors["rlinf.gpus_per_node"]
    with pytest.raises(SpecInvalid) as refused:
        parse_rlinf_spec(request(cluster, nodes=0, overrides=["no equals"], entry="run.sh"), alice)
    assert set(refused.value.errors) == {"rlinf.nodes", "rlinf.overrides.0", "rlinf.entry"}


def test_the_api_creates_the_expanded_job_which_is_what_is_stored_and_cloned(
    alice: User, cluster: Cluster
) -> None:
    nodes(cluster, 8, 8)
    token = ApiToken.issue(alice, "t")[1]
    client = Client(headers={"Authorization": f"Bearer {token}"})
    body = request(cluster, nodes=2)
    answer = client.post("/api/v1/jobs", json.dumps(body), "application/json")
    assert answer.status_code == 201, answer.json()
    created = answer.json()
    assert created["policies"]["stop_on_completion"] is True
    assert [t["role"] for t in created["tasks"]] == ["head", "worker"]
    job = Job.objects.get(pk=created["id"])
    assert job.spec["template"] == "rlinf"
    assert "ray start --head" in job.spec["tasks"][0]["args"][0]
    clone = client.post(
        f"/api/v1/jobs/{job.pk}/clone", json.dumps({"name": "ppo-2"}), "application/json"
    )
    assert clone.status_code == 201
    cloned = Job.objects.get(pk=clone.json()["id"])
    assert cloned.spec["template"] == "rlinf" and cloned.spec["tasks"] == job.spec["tasks"]
    refused = client.post(
        "/api/v1/jobs",
        json.dumps(request(cluster, nodes="two") | {"name": "x"}),
        "application/json",
    )
    assert refused.status_code == 422 and "rlinf.nodes" in refused.json()["errors"]


def test_a_template_spec_edited_by_hand_keeps_its_ray_nodes_consistent(
    alice: User, cluster: Cluster
) -> None:
    """A clone's YAML may change the workers' replicas, but the head's driver waits for the
    nodes the template wrote (--expected-nodes, EXPECTED_RAY_NODES): both must change together,
    or the run waits for ever or starts short. The head stays one pod."""
    expanded = parse_rlinf_spec(request(cluster, nodes=3), alice).model_dump(mode="json")
    assert parse_job_spec(expanded, alice).tasks[1].replicas == 2  # as the template made it
    more = copy.deepcopy(expanded)
    more["tasks"][1]["replicas"] = 4
    with pytest.raises(SpecInvalid) as refused:
        parse_job_spec(more, alice)
    assert "waits for 3 Ray nodes" in refused.value.errors["tasks.1.replicas"]
    assert "make 5" in refused.value.errors["tasks.1.replicas"]
    for task in more["tasks"]:  # changed together: accepted
        task["env"]["EXPECTED_RAY_NODES"] = "5"
    more["tasks"][0]["args"][0] = more["tasks"][0]["args"][0].replace(
        "--expected-nodes 3", "--expected-nodes 5"
    )
    assert parse_job_spec(more, alice).tasks[1].replicas == 4
    two_heads = copy.deepcopy(expanded)
    two_heads["tasks"][0]["replicas"] = 2
    with pytest.raises(SpecInvalid) as refused:
        parse_job_spec(two_heads, alice)
    assert refused.value.errors == {
        "tasks.0.replicas": "The Ray head is one pod: replicas must be 1."
    }
