"""The "RLinf on Ray" template: a few choices expanded into an ordinary Job spec, visible and
editable, which is what is stored, cloned and resumed.

The traps it removes (RLinf's own multi-node guide and launch scripts):
- Ray freezes a node's environment at `ray start`, so `RLINF_NODE_RANK` is exported before it,
  on every node: 0 on the head, the StatefulSet ordinal + 1 on the workers;
- `ray start` returns at once unless `--block`, and a container whose process returned exits:
  each node keeps its `ray start --block` as the container's life;
- `ray start --block` answers SIGTERM by draining its node for up to 30 s: a worker's shell
  answers it instead, at once (worker_script);
- the driver must run inside the head (`ray.init(address="auto")` elsewhere starts a private
  Ray and waits for its nodes for ever): the head runs Ray in the background and the driver
  wrapper (`client/trainyard_driver.py`) in front, which waits for the expected nodes, keeps the
  entry's real exit code (no `tee` swallowing it), reports progress and completion, and then
  idles, so the StatefulSet never reruns finished training;
- `runner.logger.log_path` defaults to a timestamped directory: the template sets a stable one
  on the output volume, so a re-created pod finds its outputs and checkpoints again.

Pure: the choices in, a JobSpec-shaped dict out (`jobs.spec.parse_job_spec` checks it as any
other spec). The workers reach the head through the headless Service every StatefulSet Task
gets (console.kube.manifests): `<job>-head-0.<job>-head`. The scripts name the Job only as
the container reads it (`$TRAINYARD_JOB`, set by the console), never literally: a clone under
another name joins its own head and writes its own outputs.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Any, Literal

from django.utils.translation import gettext, gettext_noop
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr, model_validator

from jobs.validators import (
    Count,
    Quantity,
    validate_cpu,
    validate_env,
    validate_image,
    validate_memory,
)

TEMPLATE = "rlinf"
OUTPUT = "/output"  # where the output claim is mounted
RAY_PORT = 6379
REPO = "/workspace/RLinf"  # where RLinf's images keep the checkout
DRIVER = "/opt/trainyard/trainyard_driver.py"
MAX_NODES = 64
MAX_GPUS = 64
MAX_OVERRIDES = 64
# A worker's answer to SIGTERM (worker_script): Ray's node gone at once, the container ended.
WORKER_ON_TERM = 'kill -KILL "$node" 2>/dev/null; exit 0'
# The template's policies unless the request chooses otherwise: a finished run frees its GPUs.
POLICIES = {"stop_on_completion": True}
# The entry scripts of RLinf's examples, and their configuration directories.
ENTRIES = {
    "embodied": ("examples/embodiment/train_embodied_agent.py", "examples/embodiment/config"),
    "reasoning": ("examples/reasoning/main_grpo.py", "examples/reasoning/config/math"),
}
# A Hydra override: key=value, the key optionally prefixed with +, ++ or ~ (Hydra's grammar).
_OVERRIDE = re.compile(r"^(\+\+|\+|~)?[A-Za-z_][\w.\-/@]*=.*$", re.S)
_PATH = re.compile(r"^/[\w.\-/]*$")
_CONFIG = re.compile(r"^[\w.\-/]+$")


def _override(value: str) -> str:
    if not _OVERRIDE.match(value) or "\n" in value:
        message = gettext("%(value)r is not a Hydra override (key=value).")
        raise ValueError(message % {"value": value})
    return value


def _absolute(value: str) -> str:
    if not _PATH.match(value) or "/../" in f"{value}/":
        raise ValueError(
            gettext("Must be an absolute path of letters, digits, '.', '-', '_' and '/'.")
        )
    return value


def _entry(value: str) -> str:
    if value in ENTRIES:
        return value
    _absolute(value)
    if not value.endswith(".py"):
        raise ValueError(
            gettext("Must be embodied, reasoning, or the absolute path of a .py script.")
        )
    return value


def _config_name(value: str) -> str:
    if not _CONFIG.match(value):
        raise ValueError(
            gettext("Must be a Hydra config name (letters, digits, '.', '-', '_', '/').")
        )
    return value


class RlinfIn(BaseModel):
    """What a user chooses; everything else follows from it (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid")

    image: Annotated[StrictStr, AfterValidator(validate_image)]
    nodes: Count = Field(default=1, ge=1, le=MAX_NODES)
    gpus_per_node: Count = Field(default=8, ge=0, le=MAX_GPUS)
    cpu: Annotated[Quantity, AfterValidator(validate_cpu)] = "16"
    memory: Annotated[Quantity, AfterValidator(validate_memory)] = "128Gi"
    entry: Annotated[StrictStr, AfterValidator(_entry)] = "embodied"
    config_name: Annotated[StrictStr, AfterValidator(_config_name)]
    overrides: list[Annotated[StrictStr, AfterValidator(_override)]] = Field(
        default_factory=list, max_length=MAX_OVERRIDES
    )
    repo_path: Annotated[StrictStr, AfterValidator(_absolute)] = REPO
    # The claim mounted at /output on every node: outputs and checkpoints outlive the pods.
    output_claim: StrictStr | None = None
    log_path: Annotated[StrictStr, AfterValidator(_absolute)] | None = None
    resume_from: Annotated[StrictStr, AfterValidator(_absolute)] | Literal["auto"] | None = None
    placement: dict[StrictStr, StrictStr] = Field(default_factory=dict, max_length=16)
    env: Annotated[dict[StrictStr, StrictStr], AfterValidator(validate_env)] = Field(
        default_factory=dict
    )

    @model_validator(mode="after")
    def _placement(self) -> RlinfIn:
        for component, rule in self.placement.items():
            error = placement_error(component, rule, self.nodes, self.gpus_per_node)
            if error:
                raise PlacementInvalid(component, error)
        return self


class PlacementInvalid(ValueError):
    """A placement RLinf would refuse, with the component it is about."""

    def __init__(self, component: str, reason: str) -> None:
        super().__init__(f"{component}: {reason}.")
        self.component = component


def head_dns(job: str) -> str:
    return f"{job}-head-0.{job}-head"


def _entry_command(choices: RlinfIn) -> str:
    """The entry's command line for bash; only the log path is expanded there (as $out)."""
    script, config_dir = ENTRIES.get(choices.entry, (choices.entry, ""))
    command = ["python", f"{choices.repo_path}/{script}" if choices.entry in ENTRIES else script]
    if config_dir:
        command += ["--config-path", f"{choices.repo_path}/{config_dir}"]
    command += ["--config-name", choices.config_name]
    # Quoted for Hydra, which would read an unquoted `a,b` as a sweep.
    command += [
        f'cluster.component_placement.{name}="{rule}"' for name, rule in choices.placement.items()
    ]
    command.append(f"cluster.num_nodes={choices.nodes}")
    rest = []
    if choices.resume_from is not None and choices.resume_from != "auto":
        rest.append(f"runner.resume_dir={choices.resume_from}")
    rest += choices.overrides
    parts = [shlex.join(command), '"runner.logger.log_path=$out"', shlex.join(rest)]
    return " ".join(part for part in parts if part)


def head_script(choices: RlinfIn) -> str:
    """The head container: Ray in the background, the driver wrapper in front (its exit
    code is the entry's; afterwards it idles). The log path is the chosen one, else
    /output/<the Job's name as the container reads it: TRAINYARD_JOB>, so a clone under
    another name writes beside the original, never into it."""
    out = shlex.quote(choices.log_path) if choices.log_path else f'"{OUTPUT}/${{TRAINYARD_JOB}}"'
    resume = ""
    if choices.resume_from == "auto":  # the newest global_step_N under the log path, if any
        resume = (
            'latest=$(ls -d "$out"/*/checkpoints/global_step_* 2>/dev/null '
            "| sort -t_ -k3 -n | tail -n 1); "
            'if [ -n "$latest" ]; then set -- "runner.resume_dir=$latest"; fi; '
        )
    return (
        "set -eo pipefail; "
        "export RLINF_NODE_RANK=0; "
        f"out={out}; "
        'mkdir -p "$out"; '
        f"ray start --head --port={RAY_PORT} --block & "
        f"{resume}"
        f"exec python {DRIVER} --expected-nodes {choices.nodes} "
        f'--done-marker "$out/.trainyard-completed" -- {_entry_command(choices)} "$@"'
    )


def worker_script() -> str:
    """A worker container: its rank from the StatefulSet ordinal (the pod's hostname ends with
    it), exported before Ray starts; Ray blocks for the container's life, and its end (Ray died)
    ends the container with Ray's exit code. The head's name is the Job's as the container reads
    it, so a clone's workers join the clone's head.

    The shell stays in front to answer SIGTERM at once (issue 31): Ray's own SIGTERM handler
    asks the head to drain the node and waits for it to go idle, for up to 30 s
    (RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S) — a training node never goes idle, and on a stop the
    head is already gone, so every stop held the worker and its GPUs for the whole grace period.
    SIGKILL to `ray start` takes its node down with it (Ray's processes die with their parent:
    Linux's parent-death signal) and the container's end takes anything left."""
    return (
        "set -eo pipefail; "
        "export RLINF_NODE_RANK=$(( ${HOSTNAME##*-} + 1 )); "
        f"trap {shlex.quote(WORKER_ON_TERM)} TERM; "
        f'ray start --address="{head_dns("${TRAINYARD_JOB}")}:{RAY_PORT}" --block & '
        'node=$!; wait "$node"'
    )


def expand(choices: RlinfIn) -> dict[str, Any]:
    """The Tasks of the Job spec the template makes (the caller adds name, cluster, project,
    namespace and policies, and checks the whole with `jobs.spec.parse_job_spec`)."""
    resources = {"cpu": choices.cpu, "memory": choices.memory, "gpu": choices.gpus_per_node}
    env = dict(choices.env) | {
        "RAY_DEDUP_LOGS": "0",
        "EXPECTED_RAY_NODES": str(choices.nodes),
    }
    node: dict[str, Any] = {
        "image": choices.image, "env": env, "resources": resources, "command": ["bash", "-c"],
    }  # fmt: skip
    if choices.output_claim:
        node["volumes"] = [{"claim": choices.output_claim, "mount_path": OUTPUT}]
    tasks = [{"role": "head", "replicas": 1, "args": [head_script(choices)], **node}]
    if choices.nodes > 1:
        worker = {"role": "worker", "replicas": choices.nodes - 1, "args": [worker_script()]}
        tasks.append(worker | node)
    return {"tasks": tasks}


# --- a template's spec edited by hand ------------------------------------------------------------

_EXPECTED = re.compile(r"--expected-nodes (\d+)")


def ray_nodes_errors(tasks: list[Any]) -> dict[str, str]:
    """A spec the template made and a person then edited (a clone's YAML): its head must stay one
    pod, and its Ray nodes (the head and the workers) as many as the head's driver waits for
    (`--expected-nodes`) and EXPECTED_RAY_NODES say, or the run waits for ever or starts short.
    Errors by the Task's replicas; {} when consistent. `tasks` are TaskSpec-like objects."""
    roles = {task.role: (index, task) for index, task in enumerate(tasks)}
    if "head" not in roles:
        return {"tasks": gettext("A spec of the RLinf template needs its head Task.")}
    index, head = roles["head"]
    if head.replicas != 1:
        return {f"tasks.{index}.replicas": gettext("The Ray head is one pod: replicas must be 1.")}
    nodes = 1 + (roles["worker"][1].replicas if "worker" in roles else 0)
    said = set(_EXPECTED.findall(" ".join(head.args or [])))
    said.add(str((head.env or {}).get("EXPECTED_RAY_NODES", nodes)))
    if said == {str(nodes)}:
        return {}
    where = f"tasks.{roles['worker'][0]}.replicas" if "worker" in roles else f"tasks.{index}"
    message = gettext(
        "The head waits for %(expected)s Ray nodes (--expected-nodes and EXPECTED_RAY_NODES), "
        "but the head and its workers make %(nodes)s: change them together, or fill the "
        "template's form again."
    )
    return {where: message % {"expected": " / ".join(sorted(said)), "nodes": nodes}}


# --- placement ---------------------------------------------------------------------------------

# What a placement beyond the resources or not sharing them evenly is told, on GPUs or on nodes.
_GPU_WORDS = (
    gettext_noop("GPU rank %(rank)s is beyond the %(total)s GPUs of %(nodes)s node(s)"),
    gettext_noop("%(processes)s processes cannot share %(resources)s GPUs evenly"),
)
_NODE_WORDS = (
    gettext_noop("node rank %(rank)s is beyond the %(total)s nodes of %(nodes)s node(s)"),
    gettext_noop("%(processes)s processes cannot share %(resources)s nodes evenly"),
)
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_COMPONENT = re.compile(r"^[A-Za-z_]\w*$")


def _span(text: str) -> range:
    match = _RANGE.match(text.strip())
    if not match:
        raise ValueError(gettext("%(text)r is not a rank or a range a-b") % {"text": text.strip()})
    first, last = int(match[1]), int(match[2] if match[2] is not None else match[1])
    if last < first:
        raise ValueError(gettext("the range %(text)s runs backwards") % {"text": text.strip()})
    return range(first, last + 1)


def placement_error(component: str, rule: str, nodes: int, gpus_per_node: int) -> str:
    """Why RLinf would refuse `component: rule` on this many nodes and GPUs ("" when it would
    accept it). RLinf's short form (its placement guide): `resource_ranks[:process_ranks]`
    segments separated by commas; resources are GPU ranks (node ranks without GPUs) or `all`;
    a segment without process ranks takes the next ones, one per resource; the process ranks
    of a component run from 0 without gaps or repeats; in a segment, one count is a multiple
    of the other."""
    if not _COMPONENT.match(component) or component == "all":
        message = gettext("%(name)r is not a component name (one per entry: actor, rollout, ...)")
        return message % {"name": component}
    total = nodes * gpus_per_node if gpus_per_node else nodes
    beyond, uneven = _GPU_WORDS if gpus_per_node else _NODE_WORDS
    processes: list[int] = []
    try:
        for segment in rule.split(","):
            resource, _, process = segment.partition(":")
            used = range(total) if resource.strip() == "all" else _span(resource)
            if used and used[-1] >= total:
                return gettext(beyond) % {"rank": used[-1], "total": total, "nodes": nodes}
            ranks = _span(process) if process else range(len(processes), len(processes) + len(used))
            if max(len(ranks), len(used)) % min(len(ranks), len(used)):
                return gettext(uneven) % {"processes": len(ranks), "resources": len(used)}
            processes.extend(ranks)
    except ValueError as error:
        return str(error)
    if sorted(processes) != list(range(len(processes))):
        return gettext("process ranks must run from 0 without gaps or repeats")
    return ""
