"""The JobSpec schema: one set of rules for the API, the web form, YAML import and clone.

Validation has two layers. The pydantic models check the shape and the Kubernetes syntax of every
field (no database). `parse_job_spec` / `parse_workflow_spec` add what needs the database and the
user: the cluster exists, the project is one the user may operate in, the name is free in the
cluster namespace. Every error is collected at once into `SpecInvalid.errors`, keyed by the dotted
path of the field (`tasks.0.resources.memory`), and worded for a person, never a pydantic dump.

The field rules live in `jobs.validators`, the cross-field and database checks in
`jobs.spec_checks`; this module holds the models and the public API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import yaml
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils.translation import gettext, gettext_lazy, ngettext
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from console.models import Project
from console.yaml_input import SPEC_MAX_NODES, YamlRefused, load_yaml
from jobs import rlinf
from jobs.choices import TaskKind
from jobs.models import Job
from jobs.spec_checks import (
    check_child,
    check_gpu_capacity,
    check_roles,
    check_target,
    check_workflow_graph,
    check_workflow_name_free,
    resolve_project,
    workflow_children,
)
from jobs.status.workload import HEARTBEAT_SECONDS, MIN_THRESHOLD
from jobs.validators import JOB_NAME_MAX as JOB_NAME_MAX  # re-exported for callers
from jobs.validators import (
    MAX_VOLUMES,
    Count,
    Quantity,
    check_mount_paths,
    plain_data_errors,
    validate_claim,
    validate_cpu,
    validate_env,
    validate_image,
    validate_job_name,
    validate_memory,
    validate_mount_path,
    validate_namespace,
    validate_node_selector,
    validate_role,
    validate_shm_size,
    validate_sub_path,
    validate_toleration_key,
    validate_toleration_value,
    validate_workflow_name,
)
from jobs.validators import quantity_value as quantity_value  # re-exported for callers

User = AbstractBaseUser | AnonymousUser

MAX_TASKS = 20
MAX_WORKFLOW_JOBS = 50
MAX_REPLICAS = 1000
MAX_GPUS = 64
MAX_TOLERATIONS = 20
# The largest spec read, as YAML or as a JSON body: judged in milliseconds (ARCHITECTURE: bad
# input costs nothing).
SPEC_MAX_BYTES = 64 * 1024
# A Workflow holds up to MAX_WORKFLOW_JOBS Job specs.
WORKFLOW_MAX_BYTES = 4 * SPEC_MAX_BYTES
WORKFLOW_MAX_NODES = 5 * SPEC_MAX_NODES


class SpecInvalid(Exception):
    """A spec that cannot be accepted; `errors` maps dotted field paths to messages."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        count = len(self.errors)
        self.message = ngettext(
            "The spec has %(count)d error.", "The spec has %(count)d errors.", count
        ) % {"count": count}
        super().__init__(self.message)

    def __str__(self) -> str:
        return "; ".join(f"{path}: {message}" for path, message in self.errors.items())


# --- the models ---------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=True)


class ResourcesSpec(_Strict):
    """What one replica requests: CPU and memory as Kubernetes quantities, whole GPUs."""

    cpu: Annotated[Quantity, AfterValidator(validate_cpu)] = "1"
    memory: Annotated[Quantity, AfterValidator(validate_memory)] = "1Gi"
    gpu: Count = Field(default=0, ge=0, le=MAX_GPUS)


class VolumeSpec(_Strict):
    """A PersistentVolumeClaim of the Job's namespace mounted into every replica of a Task: the
    claim is the user's (the console neither creates nor deletes it), so outputs and checkpoints
    outlive the pods, runs and the Job itself."""

    claim: Annotated[StrictStr, AfterValidator(validate_claim)]
    mount_path: Annotated[StrictStr, AfterValidator(validate_mount_path)]
    read_only: StrictBool = False
    sub_path: Annotated[StrictStr | None, AfterValidator(validate_sub_path)] = None


class TolerationSpec(_Strict):
    """A Kubernetes toleration, checked as the API server checks one (ValidateTolerations); the
    field order matters: each rule reads the fields validated before it."""

    key: Annotated[StrictStr, AfterValidator(validate_toleration_key)] = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: Annotated[StrictStr, AfterValidator(validate_toleration_value)] = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: Count | None = None

    @field_validator("operator")
    @classmethod
    def _exists_without_key(cls, operator: str, info: ValidationInfo) -> str:
        if info.data.get("key") == "" and operator != "Exists":
            raise ValueError(
                gettext(
                    "The operator must be Exists when the key is empty (it matches every taint)."
                )
            )
        return operator

    @field_validator("value")
    @classmethod
    def _no_value_with_exists(cls, value: str, info: ValidationInfo) -> str:
        if value and info.data.get("operator") == "Exists":
            raise ValueError(gettext("The value must be empty when the operator is Exists."))
        return value

    @field_validator("toleration_seconds")
    @classmethod
    def _seconds_only_for_no_execute(cls, seconds: int | None, info: ValidationInfo) -> int | None:
        if seconds is not None and info.data.get("effect") != "NoExecute":
            raise ValueError(
                gettext("toleration_seconds applies only to the NoExecute effect; set that effect.")
            )
        return seconds


def _mount_paths_apart(volumes: list[VolumeSpec]) -> list[VolumeSpec]:
    check_mount_paths([volume.mount_path for volume in volumes])
    return volumes


class TaskSpec(_Strict):
    """One role of a Job; stored verbatim as `Task.template` and in `Job.spec["tasks"]`. Fields
    added later have defaults, so templates stored before them still read."""

    role: Annotated[StrictStr, AfterValidator(validate_role)]
    kind: TaskKind = TaskKind.STATEFULSET
    replicas: Count = Field(default=1, ge=0, le=MAX_REPLICAS)
    image: Annotated[StrictStr, AfterValidator(validate_image)]
    command: list[StrictStr] = Field(default_factory=list)
    args: list[StrictStr] = Field(default_factory=list)
    env: Annotated[dict[StrictStr, StrictStr], AfterValidator(validate_env)] = Field(
        default_factory=dict
    )
    resources: ResourcesSpec = Field(default_factory=lambda: ResourcesSpec())
    node_selector: Annotated[dict[StrictStr, StrictStr], AfterValidator(validate_node_selector)] = (
        Field(default_factory=dict)
    )
    tolerations: list[TolerationSpec] = Field(default_factory=list, max_length=MAX_TOLERATIONS)
    volumes: Annotated[list[VolumeSpec], AfterValidator(_mount_paths_apart)] = Field(
        default_factory=list, max_length=MAX_VOLUMES
    )
    # None: the default size of the shared memory at /dev/shm (jobs.validators.shm_size_of).
    shm_size: Annotated[Quantity | None, AfterValidator(validate_shm_size)] = None

    @field_validator("shm_size")
    @classmethod
    def _shm_within_memory(cls, shm_size: str | None, info: ValidationInfo) -> str | None:
        """Pages in a memory-backed volume count against the container's memory limit."""
        resources = info.data.get("resources")
        if shm_size is None or resources is None:
            return shm_size
        if quantity_value(shm_size) > quantity_value(resources.memory):
            raise ValueError(
                gettext(
                    "The shared memory (%(shm)s) counts against the memory request and cannot "
                    "exceed it (%(memory)s)."
                )
                % {"shm": shm_size, "memory": resources.memory}
            )
        return shm_size


MAX_THRESHOLD = 7 * 24 * 3600  # seconds: a week


MAX_IDLE_MINUTES = 10_080  # a week


class JobPolicies(_Strict):
    """What the console does with the workload's word (jobs.status.workload, jobs.workload.report);
    stored in `Job.spec["policies"]`, so clone and resume keep them."""

    stop_on_completion: StrictBool = False
    heartbeat_seconds: int = Field(default=HEARTBEAT_SECONDS, ge=MIN_THRESHOLD, le=MAX_THRESHOLD)
    stall_after_seconds: int | None = Field(default=None, ge=MIN_THRESHOLD, le=MAX_THRESHOLD)
    progress_from_logs: StrictBool = False
    # The idle policy (usage.policy): stop the Job once its workload was idle this long; None
    # takes the project's default, 0 sets it off for this Job whatever the default.
    stop_when_idle_minutes: int | None = Field(default=None, ge=0, le=MAX_IDLE_MINUTES)


class JobSpec(_Strict):
    """A Job as submitted. `project` and `namespace` are filled in by `parse_job_spec`."""

    name: Annotated[StrictStr, AfterValidator(validate_job_name)]
    cluster: StrictStr
    project: StrictStr | None = None
    namespace: Annotated[StrictStr | None, AfterValidator(validate_namespace)] = None
    tasks: list[TaskSpec] = Field(min_length=1, max_length=MAX_TASKS)
    policies: JobPolicies = Field(default_factory=lambda: JobPolicies())
    # The template that made the spec (jobs.rlinf), kept so the job page can say so.
    template: Literal["rlinf"] | None = None


class WorkflowJobSpec(JobSpec):
    """A child Job of a Workflow: it starts once every Job named in `depends_on` Succeeded."""

    depends_on: list[StrictStr] = Field(default_factory=list)


class WorkflowPolicies(_Strict):
    """`advance_on_workload_success`: a child whose workload reported success counts as
    Succeeded for its dependants and the Workflow's phase (jobs.status.lifecycle.counted_phase)."""

    advance_on_workload_success: StrictBool = False


class WorkflowSpec(_Strict):
    name: Annotated[StrictStr, AfterValidator(validate_workflow_name)]
    project: StrictStr | None = None
    jobs: list[WorkflowJobSpec] = Field(min_length=1, max_length=MAX_WORKFLOW_JOBS)
    policies: WorkflowPolicies = Field(default_factory=lambda: WorkflowPolicies())


# --- pydantic errors in words --------------------------------------------------------------

# Lazy: translated when an error is worded, in the language of the request.
_MESSAGES = {
    "missing": gettext_lazy("This field is required."),
    "extra_forbidden": gettext_lazy("Unknown field."),
    "string_type": gettext_lazy("Must be a string."),
    "int_type": gettext_lazy("Must be a whole number."),
    "bool_type": gettext_lazy("Must be true or false."),
    "int_parsing": gettext_lazy("Must be a whole number."),
    "int_from_float": gettext_lazy("Must be a whole number."),
    "finite_number": gettext_lazy("Must be a finite number."),
    "list_type": gettext_lazy("Must be a list."),
    "dict_type": gettext_lazy("Must be a mapping of names to values."),
    "model_type": gettext_lazy("Must be a mapping of fields."),
    "model_attributes_type": gettext_lazy("Must be a mapping of fields."),
    "enum": gettext_lazy("Must be one of: {expected}."),
    "literal_error": gettext_lazy("Must be one of: {expected}."),
    "greater_than_equal": gettext_lazy("Must be at least {ge}."),
    "less_than_equal": gettext_lazy("Must be at most {le}."),
    "too_short": gettext_lazy("Needs at least {min_length} item(s)."),
    "too_long": gettext_lazy("Allows at most {max_length} items."),
}


def errors_from_validation(exc: ValidationError, prefix: str = "") -> dict[str, str]:
    """Pydantic errors as {dotted path: sentence}; the first error of a path wins."""
    errors: dict[str, str] = {}
    for error in exc.errors(include_url=False):
        parts = [str(part) for part in error["loc"] if part != "[key]"]
        path = prefix + ".".join(parts)
        if error["loc"][-1:] == ("[key]",):
            message = gettext("Names must be strings.")
        elif error["type"] == "value_error":
            message = str(error.get("ctx", {}).get("error", error["msg"]))
        elif error["type"] in _MESSAGES:
            message = _MESSAGES[error["type"]].format(**error.get("ctx", {}))
        else:
            message = error["msg"]
        errors.setdefault(path or "spec", message)
    return errors


def _structure[Model: BaseModel](
    model: type[Model], data: Any, errors: dict[str, str], prefix: str = ""
) -> Model | None:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors.update(errors_from_validation(exc, prefix))
        return None


def _resolved[Model: BaseModel](
    spec: Model, project: Project | None, namespace: str | None
) -> Model:
    assert project is not None and namespace is not None
    return spec.model_copy(update={"project": project.name, "namespace": namespace})


# --- public API ----------------------------------------------------------------------------


def parse_job_spec(data: Any, user: User) -> JobSpec:
    """A valid JobSpec with `project` and `namespace` filled in, or SpecInvalid with every error."""
    if not isinstance(data, Mapping):
        raise SpecInvalid(
            {"spec": gettext("The job spec must be a mapping of fields (name, cluster, tasks).")}
        )
    check_plain_data(data)
    errors: dict[str, str] = {}
    spec = _structure(JobSpec, data, errors)
    check_roles(data, errors, "")
    if spec is not None and spec.template == rlinf.TEMPLATE:
        errors.update(rlinf.ray_nodes_errors(spec.tasks))
    project = resolve_project(data.get("project"), user, errors, "project")
    _cluster, namespace = check_target(data, project, errors, "", user)
    if errors or spec is None:
        raise SpecInvalid(errors)
    return _resolved(spec, project, namespace)


def parse_rlinf_spec(data: Any, user: User) -> JobSpec:
    """A Job spec made by the "RLinf on Ray" template (jobs.rlinf) from `{"template": "rlinf",
    "name", "cluster", "project"?, "namespace"?, "policies"?, "rlinf": {...}}`: the choices are
    checked (errors under `rlinf.`), the GPUs per node against the cluster's synced Nodes, and
    the expanded spec as any other."""
    if not isinstance(data, Mapping) or not isinstance(data.get("rlinf"), Mapping):
        raise SpecInvalid({"rlinf": gettext("The RLinf template needs its choices under rlinf.")})
    check_plain_data(data)
    errors: dict[str, str] = {}
    try:
        choices = rlinf.RlinfIn.model_validate(data["rlinf"])
    except ValidationError as exc:
        errors.update(errors_from_validation(exc, "rlinf."))
        placement = [
            e
            for e in exc.errors()
            if isinstance(e.get("ctx", {}).get("error"), rlinf.PlacementInvalid)
        ]
        for error in placement:
            invalid = error["ctx"]["error"]
            errors.pop("rlinf.", None)
            errors[f"rlinf.placement.{invalid.component}"] = str(invalid)
        raise SpecInvalid(errors) from None
    check_gpu_capacity(
        data.get("cluster"), choices.nodes, choices.gpus_per_node, errors, "rlinf.gpus_per_node"
    )
    expanded = rlinf.expand(choices)
    given = ("name", "cluster", "project", "namespace", "policies")
    expanded |= {key: data[key] for key in given if key in data}
    policies = data.get("policies", {})
    if isinstance(policies, Mapping):
        expanded["policies"] = rlinf.POLICIES | dict(policies)
    try:
        spec = parse_job_spec(expanded | {"template": rlinf.TEMPLATE}, user)
    except SpecInvalid as invalid:
        errors.update(invalid.errors)
        spec = None
    if errors or spec is None:
        raise SpecInvalid(errors)
    return spec


def load_spec_yaml(text: str) -> Any:
    """The values of a spec written as YAML, not yet checked; SpecInvalid({"yaml": ...}) when
    the text cannot be read."""
    try:
        return load_yaml(text, gettext("YAML"), SPEC_MAX_BYTES)
    except YamlRefused as refused:
        raise SpecInvalid({"yaml": str(refused)}) from None


def check_plain_data(data: Any, prefix: str = "", max_nodes: int = SPEC_MAX_NODES) -> None:
    """SpecInvalid unless every text is storable and the nesting and size are bounded; the
    first check of every spec and body, before any other rule reads it."""
    errors = plain_data_errors(data, max_nodes)
    whole = prefix.rstrip(".") or "spec"
    if errors:
        raise SpecInvalid(
            {whole if path == "spec" else prefix + path: text for path, text in errors.items()}
        )


def job_spec_from_yaml(text: str, user: User) -> JobSpec:
    """Imports a JobSpec written as YAML (as `job_spec_to_yaml` writes it)."""
    data = load_spec_yaml(text)
    if not isinstance(data, dict):
        message = gettext("The YAML must be a mapping with name, cluster and tasks.")
        raise SpecInvalid({"yaml": message})
    return parse_job_spec(data, user)


def job_spec_to_yaml(spec: JobSpec) -> str:
    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def spec_of(job: Job) -> JobSpec:
    """The Job's original spec (what it was created from), for clone and for prefilling forms."""
    return JobSpec.model_validate(
        {
            "name": job.name,
            "cluster": job.cluster.name,
            "project": job.project.name,
            "namespace": job.namespace,
            "tasks": job.spec["tasks"],
            "policies": job.spec.get("policies", {}),
            "template": job.spec.get("template"),
        }
    )


def _merge(base: Any, patch: Any) -> Any:
    """JSON Merge Patch (RFC 7386) where a list of tasks merges item by item on `role`."""
    if isinstance(base, dict) and isinstance(patch, Mapping):
        merged = dict(base)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            elif key == "tasks" and isinstance(value, list) and isinstance(base.get(key), list):
                merged[key] = _merge_tasks(base[key], value)
            else:
                merged[key] = _merge(base.get(key), value)
        return merged
    return patch


def _merge_tasks(base: list[Any], patch: list[Any]) -> list[Any]:
    """Patch items are matched to base tasks by role; an unmatched role is a new task."""
    merged = list(base)
    positions = {t.get("role"): i for i, t in enumerate(merged) if isinstance(t, dict)}
    for item in patch:
        role = item.get("role") if isinstance(item, Mapping) else None
        if isinstance(role, str) and role in positions:
            merged[positions[role]] = _merge(merged[positions[role]], item)
        else:
            merged.append(item)
    return merged


def merge_overrides(spec: JobSpec, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """`spec` as a dict with `overrides` deep-merged in (e.g. {"tasks": [{"role": "worker",
    "replicas": 4}]} or {"cluster": "other"}); the result still needs `parse_job_spec`."""
    data = spec.model_dump(mode="json")
    if overrides is None:
        return data
    if not isinstance(overrides, Mapping):
        raise SpecInvalid({"overrides": gettext("Overrides must be a mapping of spec fields.")})
    check_plain_data(overrides, "overrides.")
    return dict(_merge(data, overrides))


def parse_workflow_spec(data: Any, user: User) -> WorkflowSpec:
    """A valid WorkflowSpec (children resolved like `parse_job_spec`), or SpecInvalid."""
    if not isinstance(data, Mapping):
        message = gettext("The workflow spec must be a mapping (name, project, jobs).")
        raise SpecInvalid({"spec": message})
    check_plain_data(data, max_nodes=WORKFLOW_MAX_NODES)
    errors: dict[str, str] = {}
    spec = _structure(WorkflowSpec, data, errors)
    project = resolve_project(data.get("project"), user, errors, "project")
    children = workflow_children(data)
    namespaces = {
        i: check_child(child, project, errors, f"jobs.{i}.", user) for i, child in children
    }
    check_workflow_graph(children, errors)
    check_workflow_name_free(data.get("name"), project, errors)
    if errors or spec is None:
        raise SpecInvalid(errors)
    assert project is not None
    jobs = [_resolved(job, project, namespaces[i]) for i, job in enumerate(spec.jobs)]
    return spec.model_copy(update={"project": project.name, "jobs": jobs})
