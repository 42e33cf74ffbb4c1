"""What a simulated container does, decided by its command line, and what it prints.

`sim run 30`, `sim crash 20 3`, `sim fail cuda-oom 20`, `sim oom 15`, `sim hang`,
`sim ray-head`, `sim ray-worker HOST`, `sim train STEPS ...` (simcluster/training.py); `run` and
`crash` take the text the process writes to /dev/termination-log as a last argument
(`sim crash 20 3 '{"trainyard": ...}'`). The RLinf template's `bash -c SCRIPT` pods are a Ray
worker or a driven `train` (simcluster/scripts.py). Any other command is a long-running process
(a trainer, a server) that never exits on its own. Log lines are derived from the instance's
start time and the clock, so nothing is stored per line.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from simcluster import scripts, training
from simcluster.objects import fnv32a
from simcluster.training import TrainOptions, TrainRun

Obj = dict[str, Any]
STEP_SECONDS = 5.0
RAY_CHECK_FIRST = 3.0
RAY_CHECK_EVERY = 5.0
MAX_LOG_LINES = 10_000


class Kind(StrEnum):
    RUN = "run"
    CRASH = "crash"
    FAIL = "fail"
    OOM = "oom"
    HANG = "hang"
    RAY_HEAD = "ray-head"
    RAY_WORKER = "ray-worker"
    TRAIN = "train"
    SERVE = "serve"
    USAGE = "usage"


@dataclass(frozen=True)
class Behaviour:
    kind: Kind
    seconds: float = math.inf
    exit_code: int = 0
    head_host: str = ""
    command: str = ""
    train: TrainOptions | None = None
    termination_message: str = ""  # written to terminationMessagePath when it exits on its own
    failure: str = ""  # `sim fail`: which of FAILURES it prints before exiting 1

    @property
    def exit_reason(self) -> str:
        if self.kind is Kind.OOM:
            return "OOMKilled"
        return "Completed" if self.exit_code == 0 else "Error"


def behaviour_of(container: Obj, env: Mapping[str, str] | None = None) -> Behaviour:
    """`env`: the container's environment as its process sees it (SIMCLUSTER_TRAIN, ...)."""
    argv = [str(a) for a in (container.get("command") or [])] + [
        str(a) for a in (container.get("args") or [])
    ]
    command = shlex.join(argv) if argv else f"<entrypoint of {container.get('image', '')}>"
    if argv[:2] == ["bash", "-c"] and len(argv) > 2:
        return _script_behaviour(argv[2], argv[4:], env or {}, command)
    if not argv or argv[0] != "sim":
        return Behaviour(Kind.SERVE, command=command)
    try:
        return _parse_sim(argv[1:], command)
    except (ValueError, IndexError):
        return Behaviour(Kind.USAGE, seconds=0.0, exit_code=2, command=command)


def _script_behaviour(
    script: str, args: list[str], env: Mapping[str, str], command: str
) -> Behaviour:
    """`bash -c script $0 args...`: a template head or worker, else a long-running process."""
    try:
        pod = scripts.ray_pod(script, args, env)
    except (ValueError, IndexError):
        knob = f"{scripts.SIM_ENV}={env.get(scripts.SIM_ENV, '')}"
        return Behaviour(Kind.USAGE, seconds=0.0, exit_code=2, command=knob)
    if pod is None:
        return Behaviour(Kind.SERVE, command=command)
    if pod.train is not None:
        return Behaviour(Kind.TRAIN, train=pod.train, command=command)
    return Behaviour(Kind.RAY_WORKER, head_host=pod.head_host, exit_code=1, command=command)


def _parse_sim(args: list[str], command: str) -> Behaviour:
    verb = args[0]
    if verb == "run":
        message = args[2] if len(args) > 2 else ""
        return Behaviour(Kind.RUN, float(args[1]), 0, command=command, termination_message=message)
    if verb == "crash":
        code = int(args[2]) if len(args) > 2 else 1
        message = args[3] if len(args) > 3 else ""
        return Behaviour(
            Kind.CRASH, float(args[1]), code or 1, command=command, termination_message=message
        )
    if verb == "fail" and args[1] in FAILURES:
        seconds = float(args[2]) if len(args) > 2 else 20.0
        return Behaviour(Kind.FAIL, seconds, 1, command=command, failure=args[1])
    if verb == "oom":
        return Behaviour(Kind.OOM, float(args[1]) if len(args) > 1 else 10.0, 137, command=command)
    if verb == "hang":
        return Behaviour(Kind.HANG, command=command)
    if verb == "ray-head":
        return Behaviour(Kind.RAY_HEAD, command=command)
    if verb == "ray-worker":
        return Behaviour(Kind.RAY_WORKER, head_host=args[1], exit_code=1, command=command)
    if verb == "train":
        return Behaviour(Kind.TRAIN, train=training.parse_train(args[1:]), command=command)
    raise ValueError(verb)


@dataclass
class Instance:
    """One container run: what the runtime calls a container, with its own ID and logs."""

    container_id: str
    started_at: float
    pod_ip: str = ""
    finished_at: float | None = None
    exit_code: int | None = None
    reason: str = ""
    cause: str = ""
    notes: list[tuple[float, str]] = field(default_factory=list)
    run: TrainRun | None = None  # `sim train` only
    termination_message: str = ""  # what the process wrote to /dev/termination-log


def banner(behaviour: Behaviour, instance: Instance) -> list[str]:
    kind, ip = behaviour.kind, instance.pod_ip
    if kind is Kind.RUN:
        return [
            f"[sim] {behaviour.command}",
            f"[sim] working for {behaviour.seconds:g}s, then exiting 0",
        ]
    if kind is Kind.CRASH:
        return [
            f"[sim] {behaviour.command}",
            f"[sim] working for {behaviour.seconds:g}s, "
            f"then failing with exit code {behaviour.exit_code}",
        ]
    if kind is Kind.FAIL:
        return [f"[sim] {behaviour.command}", "[INFO] initialising NCCL process group"]
    if kind is Kind.OOM:
        return [f"[sim] {behaviour.command}", "[sim] allocating memory without bound"]
    if kind is Kind.HANG:
        return [f"[sim] {behaviour.command}", "[sim] waiting forever"]
    if kind is Kind.RAY_HEAD or (behaviour.train is not None and behaviour.train.driver):
        return [  # `ray start --head`'s (a template head's runs in the background)
            "Usage stats collection is disabled.",
            f"Local node IP: {ip}",
            "--------------------",
            "Ray runtime started.",
            "--------------------",
            f"To add another node to this Ray cluster, run\n  ray start --address='{ip}:6379'",
        ]
    if kind is Kind.RAY_WORKER:
        return [
            f"Local node IP: {ip}",
            f"Connecting to existing Ray cluster at address: {behaviour.head_host}:6379...",
        ]
    if kind is Kind.USAGE:
        return [
            f"sim: cannot understand {behaviour.command!r}",
            "usage: sim run SECONDS | sim crash SECONDS [CODE] | sim fail KIND SECONDS | "
            "sim oom SECONDS | sim hang | sim ray-head | sim ray-worker HOST",
            f"       {training.USAGE}",
        ]
    if kind is Kind.TRAIN:
        return [f"+ {behaviour.command}"]
    return [
        f"+ {behaviour.command}",
        "loading configuration",
        "initialising model and optimizer",
        "starting training loop",
    ]


def step_line(behaviour: Behaviour, number: int) -> str:
    """A plausible, deterministic progress line for step `number`."""
    noise = (fnv32a(f"{behaviour.command}:{number}".encode()) % 1000) / 20000
    loss = 2.5 * math.exp(-number / 400) + 0.3 + noise
    if behaviour.kind is Kind.OOM:
        return f"step {number} allocated {number * 1.5:.1f} GiB"
    return f"step {number} loss={loss:.4f} lr=3.0e-04 throughput={1200 + number % 50} samples/s"


def final_lines(behaviour: Behaviour, instance: Instance) -> list[str]:
    cause = instance.cause
    if cause == "sigterm" and behaviour.train is not None and behaviour.train.driver:
        return []  # the wrapper exits without a word
    if cause == "sigterm":
        return ["received SIGTERM, shutting down"]
    if cause in ("killed", "oom"):
        return []
    if cause == "head":
        host = behaviour.head_host
        return [
            f"Failed to connect to GCS at address {host}:6379 within 3 seconds.",
            f"RuntimeError: cannot reach the Ray head at {host}:6379: connection refused",
        ]
    if behaviour.kind is Kind.RUN:
        return [f"[sim] finished after {behaviour.seconds:g}s, exiting 0"]
    if behaviour.kind is Kind.FAIL:
        return FAILURES[behaviour.failure]
    if behaviour.kind is Kind.CRASH:
        return [
            "Traceback (most recent call last):",
            '  File "/app/train.py", line 142, in <module>',
            "    main()",
            '  File "/app/train.py", line 97, in main',
            "    raise RuntimeError(reason)",
            f"RuntimeError: simulated failure, exiting with code {behaviour.exit_code}",
        ]
    return []


# What `sim fail KIND` prints as it dies: the shapes PyTorch, NCCL and Ray print (docs/failures.md),
# the cause first, then the consequences a console must not mistake for it.
FAILURES: dict[str, list[str]] = {
    "cuda-oom": [
        "Traceback (most recent call last):",
        '  File "/opt/RLinf/rlinf/workers/actor/fsdp_actor_worker.py", line 388, in run_training',
        "    loss.backward()",
        '  File "/opt/RLinf/rlinf/hybrid_engines/fsdp/utils.py", line 97, in backward',
        "    torch.autograd.backward(tensors)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 79.25 GiB of which 1.02 GiB is free.",
        "The actor is dead because it was killed by `ray.kill`.",
        "Worker exit type: SYSTEM_ERROR",
    ],
    "nccl-timeout": [
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=18244, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600045 "
        "milliseconds before timing out.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "Traceback (most recent call last):",
        '  File "/opt/RLinf/rlinf/scheduler/trainer.py", line 218, in step',
        "    dist.all_reduce(grad)",
        "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
    ],
    # The pods of one run fail in turn: a cause on one, consequences on the others (each pod
    # its own role, `sim fail KIND` with the later time on the consequence's side).
    # RLinf's env worker raises; the runner then tears the Ray actors down with ray.kill.
    "rollout-error": [
        "Traceback (most recent call last):",
        '  File "/opt/RLinf/rlinf/workers/env/env_worker.py", line 214, in interact',
        "    obs, reward, done, info = self.env.step(actions)",
        '  File "/opt/RLinf/rlinf/envs/maniskill/maniskill_env.py", line 131, in step',
        '    raise ValueError(f"action has shape {actions.shape}, expected (64, 7)")',
        "ValueError: action has shape (64, 8), expected (64, 7)",
    ],
    "ray-teardown": [
        "[ERROR] runner: a worker group failed; tearing down the Ray actors",
        "(EnvWorker pid=2417, ip=10.0.3.12) The actor is dead because it was killed by `ray.kill`.",
        "(RolloutWorker pid=2533, ip=10.0.3.12) The actor is dead because it was killed by "
        "`ray.kill`.",
        "Worker exit type: INTENDED_USER_EXIT Worker exit detail: killed by ray.kill",
    ],
    # One rank's NCCL watchdog times out (`nccl-timeout`); the launcher stops the other ranks.
    "nccl-peer-stopped": [
        "torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGTERM death "
        "signal, shutting down workers",
        "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a "
        "connection error code 2.",
    ],
    # A worker's CUDA OOM (`cuda-oom`) as the head's driver sees it: its actor is dead.
    "actor-dead": [
        "(FSDPActor pid=3012, ip=10.0.3.11) The actor is dead because its worker process has "
        "died. Worker exit type: SYSTEM_ERROR",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
    ],
}


def prints_steps(behaviour: Behaviour) -> bool:
    return behaviour.kind in (Kind.RUN, Kind.CRASH, Kind.FAIL, Kind.OOM, Kind.SERVE)


def log_lines(
    behaviour: Behaviour, instance: Instance, now: float, tail: int | None = None
) -> list[tuple[float, str]]:
    """Every line the instance printed up to `now`, oldest first, at most MAX_LOG_LINES."""
    end = instance.finished_at if instance.finished_at is not None else now
    start = instance.started_at
    head = [(start, line) for text in banner(behaviour, instance) for line in text.split("\n")]
    steps: list[tuple[float, str]] = []
    limit = min(tail if tail is not None else MAX_LOG_LINES, MAX_LOG_LINES)
    run, options = instance.run, behaviour.train
    if options is not None and run is not None and run.training_from is not None:
        steps = training.step_lines(options, behaviour.command, run.training_from, end, limit)
    elif prints_steps(behaviour):
        count = int(max(0.0, end - start) // STEP_SECONDS)
        keep = min(count, limit)
        steps = [
            (start + n * STEP_SECONDS, step_line(behaviour, n))
            for n in range(count - keep + 1, count + 1)
        ]
    tail_lines = (
        [(end, line) for line in final_lines(behaviour, instance)]
        if instance.finished_at is not None
        else []
    )
    lines = sorted(
        head + steps + [n for n in instance.notes if n[0] <= end] + tail_lines,
        key=lambda item: item[0],
    )
    return lines[-MAX_LOG_LINES:]
