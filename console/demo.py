"""The demo that `make run` shows: a few Jobs and a Workflow, one per situation the spec warns
about, written as ordinary job specs whose commands drive simcluster's simulated containers."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from console.models import Project
from jobs.operations import create_job, create_workflow
from jobs.spec import parse_job_spec, parse_rlinf_spec, parse_workflow_spec


def task(role: str, command: list[str], **fields: Any) -> dict[str, Any]:
    resources = {"cpu": "2", "memory": "8Gi", "gpu": fields.pop("gpu", 1)}
    image = fields.pop("image", "rlinf/rlinf:0.2-torch2.6")
    return {"role": role, "image": image, "command": command, "resources": resources} | fields


HEAD = "ppo-math-7b-head-0.ppo-math-7b-head"  # the head pod's stable DNS name (headless Service)
BAD_IMAGE = "registry.example/nonexistent:1"

# After step 30, four minutes without a step while the heartbeats go on (sim train --pause-at).
PAUSE = ["--pause-at", "30", "--pause-seconds", "240"]

# `sim train` (simcluster/README.md) prints RLinf's metric tables and posts the workload's
# signals to the console at TRAINYARD_PUBLIC_URL, which `make run` points at its web server.
DEMO_JOBS: list[dict[str, Any]] = [
    {  # Training that progresses for hours: Progressing, with checkpoints every 50 steps; its
        # curves on the Metrics tab: a return that rises, a loss that falls, and after step 30
        # (2.5 minutes in) four minutes without a step, heartbeats going on: Stalled from a
        # minute into the pause until training resumes (a shaded band).
        "name": "grpo-embodied",
        "tasks": [task("trainer", ["sim", "train", "2000", "--checkpoint-every", "50", *PAUSE])],
        "policies": {"stall_after_seconds": 60},
    },
    {  # A trainer that deadlocks after step 12 (a minute in), its pods still Running: Stalled a
        # minute later, Unresponsive after three silent heartbeat intervals (3 minutes).
        "name": "ppo-deadlock",
        "tasks": [task("trainer", ["sim", "train", "1000", "--hang-at", "12"])],
        "policies": {"stall_after_seconds": 60, "heartbeat_seconds": 60},
    },
    {  # A Ray head training on 3 nodes with 2 worker pods. Kill a worker to see it Degraded:
        # `POST /_sim/namespaces/<namespace>/pods/ppo-math-7b-worker-1/kill` on simcluster's port
        # (6443, the bearer token of var/simcluster.kubeconfig) drops it for a few seconds;
        # taking offline the node of a worker (not the head's: the job page shows each pod's
        # node) with `POST /_sim/nodes/<node>/offline` keeps it lost until `/online`.
        "name": "ppo-math-7b",
        "tasks": [
            task("head", ["sim", "train", "5000", "--nodes", "3", "--checkpoint-every", "100"]),
            task("worker", ["sim", "ray-worker", HEAD], replicas=2),
        ],
    },
    {  # Made by the "RLinf on Ray" template (docs/rlinf.md): a Ray head with the driver wrapper
        # in front and one worker, which simcluster runs from their scripts as rendered. A step
        # every 5 s for an hour, a checkpoint every 60 steps, then the completion stops it.
        "template": "rlinf",
        "name": "rlinf-maniskill",
        "rlinf": {
            "image": "rlinf/rlinf:0.2-torch2.6",
            "nodes": 2,
            "gpus_per_node": 1,
            "cpu": "2",
            "memory": "8Gi",
            "config_name": "maniskill_ppo_openvlaoft",
            "overrides": ["runner.max_steps=720", "runner.save_interval=60"],
            "env": {"SIMCLUSTER_TRAIN": "--step-seconds 5"},
        },
    },
    {  # A short run that finishes: its completion stops the Job (Stopped, GPUs freed).
        "name": "sft-short",
        "tasks": [task("trainer", ["sim", "train", "30", "--checkpoint-every", "10"])],
        "policies": {"stop_on_completion": True},
    },
    {  # A run that finishes but keeps its GPU (no stop_on_completion): finished, wasted on the
        # Usage page and the dashboard, until its idle policy stops it 5 minutes later.
        "name": "sft-done-held",
        "tasks": [task("trainer", ["sim", "train", "24", "--checkpoint-every", "12"])],
        "policies": {"stop_when_idle_minutes": 5},
    },
    {  # The business process dies and restarts: the StatefulSet Job still shows Running.
        "name": "grpo-crashloop",
        "tasks": [task("actor", ["sim", "crash", "40", "1"], replicas=2)],
    },
    {  # A batch Job (the Task API) reports its own success.
        "name": "eval-gsm8k",
        "tasks": [task("eval", ["sim", "run", "60"], kind="Job", gpu=0)],
    },
    {  # ... and its failure: OOMKilled with no retries left.
        "name": "sft-oom",
        "tasks": [task("trainer", ["sim", "oom", "30"], kind="Job")],
    },
    {  # Why a run failed (issue 34, docs/failures.md): a collective times out on one rank 20 s
        # in; the batch Job turns Failed, its log is kept and the page names an NCCL timeout.
        "name": "grpo-nccl-timeout",
        "tasks": [task("trainer", ["sim", "fail", "nccl-timeout", "20"], kind="Job")],
    },
    {  # ... and a worker that runs out of GPU memory 25 s in and restarts: the run before the
        # restart is kept and the page names a CUDA out of memory while the Job still runs.
        "name": "ppo-cuda-oom",
        "tasks": [task("worker", ["sim", "fail", "cuda-oom", "25"])],
    },
    {  # No node has 16 GPUs: Pending, and the troubleshooting panel says why.
        "name": "dpo-70b-unplaceable",
        "tasks": [task("trainer", ["python", "-m", "rlinf.train"], gpu=16)],
    },
    {  # The image cannot be pulled.
        "name": "rollout-bad-image",
        "tasks": [
            task(
                "rollout", ["python", "-m", "rlinf.rollout"], image="registry.example/nonexistent:1"
            )
        ],
    },
]

DEMO_WORKFLOWS: list[dict[str, Any]] = [
    {
        "name": "rlhf-pipeline",
        "jobs": [
            {
                "name": "wf-prepare-data",
                "tasks": [task("prep", ["sim", "run", "30"], kind="Job", gpu=0)],
            },
            {
                "name": "wf-train-reward",
                "depends_on": ["wf-prepare-data"],
                "tasks": [task("train", ["sim", "run", "60"], kind="Job")],
            },
            {
                "name": "wf-evaluate",
                "depends_on": ["wf-train-reward"],
                "tasks": [task("eval", ["sim", "run", "30"], kind="Job", gpu=0)],
            },
        ],
    },
    {  # StatefulSet Jobs never succeed (spec §Task status): this Workflow finishes because it
        # counts a child whose workload reported success as Succeeded, and each child's
        # completion stops it (its GPUs go to the next stage).
        "name": "rl-curriculum",
        "policies": {"advance_on_workload_success": True},
        "jobs": [
            {
                "name": "cur-stage-easy",
                "tasks": [task("trainer", ["sim", "train", "24", "--checkpoint-every", "8"])],
                "policies": {"stop_on_completion": True},
            },
            {
                "name": "cur-stage-hard",
                "depends_on": ["cur-stage-easy"],
                "tasks": [task("trainer", ["sim", "train", "36", "--checkpoint-every", "12"])],
                "policies": {"stop_on_completion": True},
            },
        ],
    },
]


def seed(user: User, project: Project, cluster: str) -> int:
    """Creates the demo Jobs and Workflow that do not exist yet; returns how many were created."""
    existing = set(project.jobs.values_list("name", flat=True))
    created = 0
    for job in DEMO_JOBS:
        if job["name"] not in existing:
            data = job | {"cluster": cluster, "project": project.name}
            parse = parse_rlinf_spec if "template" in job else parse_job_spec
            create_job(user, parse(data, user))
            created += 1
    for workflow in DEMO_WORKFLOWS:
        if not project.workflows.filter(name=workflow["name"]).exists():
            jobs = [job | {"cluster": cluster} for job in workflow["jobs"]]
            data = workflow | {"project": project.name, "jobs": jobs}
            create_workflow(user, parse_workflow_spec(data, user))
            created += 1
    return created
