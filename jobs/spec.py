"""The JobSpec schema: one set of rules for the API, the web form, YAML import and clone.

Validation has two layers. The pydantic models check the shape and the Kubernetes syntax of every
field (no database). `parse_job_spec` / `parse_workflow_spec` add what needs the database and the
user: the cluster exists, the project is one the user may operate in, the name is free in the
cluster namespace. Every error is collected at once into `SpecInvalid.errors`, keyed by the dotted
path of the field (`tasks.0.resources.memory`), and worded for a person, never a pydantic dump.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

import yaml
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils.translation import gettext, gettext_lazy, ngettext
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
)

from console.models import Cluster, Project
from jobs.access import projects_for
from jobs.choices import TaskKind
from jobs.models import Job, Workflow

User = AbstractBaseUser | AnonymousUser

JOB_NAME_MAX = 40
ROLE_MAX = 12
MAX_TASKS = 20
MAX_WORKFLOW_JOBS = 50
MAX_REPLICAS = 1000
MAX_GPUS = 64
YAML_MAX_BYTES = 64 * 1024
# A StatefulSet's pods carry `controller-revision-hash: <name>-<10-char hash>`, a label value
# limited to 63 characters, so the StatefulSet name itself must stay within 52 (kubernetes#64023).
STATEFULSET_NAME_MAX = 52

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUANTITY = re.compile(
    r"(?P<number>\d+(\.\d*)?|\.\d+)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d{1,3})?"
)
_SUFFIX_FACTOR = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY_MAX = Decimal(2) ** 63


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


# --- field rules (each raises ValueError with the message the user sees) -------------------


def _dns_label(value: str, what: str, max_length: int, pattern: re.Pattern[str]) -> str:
    """`what` is the field's name as the user reads it (already translated)."""
    if not value:
        raise ValueError(gettext("The %(what)s is required.") % {"what": what})
    if len(value) > max_length:
        raise ValueError(
            gettext("The %(what)s is %(length)d characters; at most %(max)d allowed.")
            % {"what": what, "length": len(value), "max": max_length}
        )
    if not pattern.fullmatch(value):
        if pattern is _DNS_1035_LABEL:
            text = gettext(
                "%(value)s is not a valid %(what)s: use lowercase letters, digits and '-', "
                "starting with a letter and ending with a letter or digit."
            )
        else:
            text = gettext(
                "%(value)s is not a valid %(what)s: use lowercase letters, digits and '-', "
                "starting with a letter or digit and ending with a letter or digit."
            )
        raise ValueError(text % {"value": repr(value), "what": what})
    return value


def _job_name(value: str) -> str:
    # A DNS-1123 label that also starts with a letter: the headless Service of a StatefulSet
    # Task is named `<job>-<role>`, and Service names must be DNS-1035 labels.
    return _dns_label(value, gettext("job name"), JOB_NAME_MAX, _DNS_1035_LABEL)


def _role(value: str) -> str:
    return _dns_label(value, gettext("role"), ROLE_MAX, _DNS_LABEL)


def _namespace(value: str | None) -> str | None:
    return None if value is None else _dns_label(value, gettext("namespace"), 63, _DNS_LABEL)


def _workflow_name(value: str) -> str:
    return _dns_label(value, gettext("workflow name"), 63, _DNS_LABEL)


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(gettext("Must be a whole number, not true/false."))
    return value


def _image(value: str) -> str:
    if not value.strip():
        raise ValueError(gettext("The image is required."))
    if any(char.isspace() for char in value):
        raise ValueError(
            gettext("%(value)s is not an image reference: it contains whitespace.")
            % {"value": repr(value)}
        )
    if len(value) > 512:
        raise ValueError(gettext("The image reference is longer than 512 characters."))
    return value


def quantity_value(text: str) -> Decimal:
    """The value of a Kubernetes quantity (`500m`, `16Gi`, `1.5`, `1e3`) in base units."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(
            gettext(
                "%(value)s is not a Kubernetes quantity: write a number with an optional suffix "
                "such as 500m, 2, 1.5, 512Mi or 16Gi (no sign, no space)."
            )
            % {"value": repr(text)}
        )
    suffix = match["suffix"] or ""
    exponent = suffix[:1] in ("e", "E")
    factor = Decimal(10) ** int(suffix[1:]) if exponent else _SUFFIX_FACTOR[suffix]
    try:
        return Decimal(match["number"]) * factor
    except InvalidOperation:
        raise ValueError(
            gettext("%(value)s is not a number Kubernetes accepts.") % {"value": repr(text)}
        ) from None


def _number_as_text(value: Any) -> Any:
    """YAML and JSON give `cpu: 4` as a number; a quantity is its decimal text."""
    if isinstance(value, bool):
        raise ValueError(gettext("Must be a quantity such as 4 or 500m, not true/false."))
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    return value


def _positive_quantity(value: str, what: str) -> str:
    amount = quantity_value(value)
    if amount <= 0:
        raise ValueError(
            gettext("The %(what)s request must be greater than zero.") % {"what": what}
        )
    if amount >= _QUANTITY_MAX:
        raise ValueError(
            gettext("%(value)s is larger than Kubernetes can represent.") % {"value": repr(value)}
        )
    return value


def _cpu(value: str) -> str:
    return _positive_quantity(value, gettext("CPU"))


def _memory(value: str) -> str:
    if value.endswith("m"):
        raise ValueError(
            gettext("%(value)s means milli-bytes; write Mi for mebibytes (e.g. 512Mi).")
            % {"value": repr(value)}
        )
    return _positive_quantity(value, gettext("memory"))


def _env(value: dict[str, str]) -> dict[str, str]:
    for name in value:
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(
                gettext(
                    "%(name)s is not a valid variable name: use letters, digits and '_', "
                    "not starting with a digit."
                )
                % {"name": repr(name)}
            )
        if name.upper().startswith("TRAINYARD_"):
            raise ValueError(
                gettext("%(name)s is reserved: TRAINYARD_* variables are set by the console.")
                % {"name": repr(name)}
            )
    return value


def _label_key_error(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and not (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return gettext("The prefix of %(key)s must be a DNS subdomain (e.g. example.com).") % {
            "key": repr(key)
        }
    if not (len(name) <= 63 and _LABEL_NAME.fullmatch(name)):
        return gettext(
            "%(key)s is not a valid label key: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit, optionally after a 'prefix/'."
        ) % {"key": repr(key)}
    return None


def _node_selector(value: dict[str, str]) -> dict[str, str]:
    for key, label in value.items():
        error = _label_key_error(key)
        if error:
            raise ValueError(error)
        if label and not (len(label) <= 63 and _LABEL_NAME.fullmatch(label)):
            raise ValueError(
                gettext(
                    "The value %(value)s of %(key)s is not a valid label value: at most 63 "
                    "letters, digits, '-', '_' or '.', starting and ending with a letter or digit."
                )
                % {"value": repr(label), "key": repr(key)}
            )
    return value


Count = Annotated[int, BeforeValidator(_not_bool)]
Quantity = Annotated[StrictStr, BeforeValidator(_number_as_text)]


# --- the models ---------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=True)


class ResourcesSpec(_Strict):
    """What one replica requests: CPU and memory as Kubernetes quantities, whole GPUs."""

    cpu: Annotated[Quantity, AfterValidator(_cpu)] = "1"
    memory: Annotated[Quantity, AfterValidator(_memory)] = "1Gi"
    gpu: Count = Field(default=0, ge=0, le=MAX_GPUS)


class TaskSpec(_Strict):
    """One role of a Job; stored verbatim as `Task.template` and in `Job.spec["tasks"]`."""

    role: Annotated[StrictStr, AfterValidator(_role)]
    kind: TaskKind = TaskKind.STATEFULSET
    replicas: Count = Field(default=1, ge=0, le=MAX_REPLICAS)
    image: Annotated[StrictStr, AfterValidator(_image)]
    command: list[StrictStr] = Field(default_factory=list)
    args: list[StrictStr] = Field(default_factory=list)
    env: Annotated[dict[StrictStr, StrictStr], AfterValidator(_env)] = Field(default_factory=dict)
    resources: ResourcesSpec = Field(default_factory=lambda: ResourcesSpec())
    node_selector: Annotated[dict[StrictStr, StrictStr], AfterValidator(_node_selector)] = Field(
        default_factory=dict
    )


class JobSpec(_Strict):
    """A Job as submitted. `project` and `namespace` are filled in by `parse_job_spec`."""

    name: Annotated[StrictStr, AfterValidator(_job_name)]
    cluster: StrictStr
    project: StrictStr | None = None
    namespace: Annotated[StrictStr | None, AfterValidator(_namespace)] = None
    tasks: list[TaskSpec] = Field(min_length=1, max_length=MAX_TASKS)


class WorkflowJobSpec(JobSpec):
    """A child Job of a Workflow: it starts once every Job named in `depends_on` Succeeded."""

    depends_on: list[StrictStr] = Field(default_factory=list)


class WorkflowSpec(_Strict):
    name: Annotated[StrictStr, AfterValidator(_workflow_name)]
    project: StrictStr | None = None
    jobs: list[WorkflowJobSpec] = Field(min_length=1, max_length=MAX_WORKFLOW_JOBS)


# --- pydantic errors in words --------------------------------------------------------------

# Lazy: translated when an error is worded, in the language of the request.
_MESSAGES = {
    "missing": gettext_lazy("This field is required."),
    "extra_forbidden": gettext_lazy("Unknown field."),
    "string_type": gettext_lazy("Must be a string."),
    "int_type": gettext_lazy("Must be a whole number."),
    "int_parsing": gettext_lazy("Must be a whole number."),
    "int_from_float": gettext_lazy("Must be a whole number."),
    "finite_number": gettext_lazy("Must be a finite number."),
    "list_type": gettext_lazy("Must be a list."),
    "dict_type": gettext_lazy("Must be a mapping of names to values."),
    "model_type": gettext_lazy("Must be a mapping of fields."),
    "model_attributes_type": gettext_lazy("Must be a mapping of fields."),
    "enum": gettext_lazy("Must be one of: {expected}."),
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


def _add(errors: dict[str, str], path: str, message: str) -> None:
    """Adds a database or cross-field error unless the field already has a syntax error."""
    errors.setdefault(path, message)


# --- cross-field and database checks (on the raw data, so all errors come at once) ---------


def _task_dicts(data: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        return []
    return [(index, task) for index, task in enumerate(tasks) if isinstance(task, Mapping)]


def _check_roles(data: Mapping[str, Any], errors: dict[str, str], prefix: str) -> None:
    """Roles are unique within a Job, and every workload name fits Kubernetes' limits."""
    first_use: dict[str, int] = {}
    for index, task in _task_dicts(data):
        role = task.get("role")
        if not isinstance(role, str):
            continue
        path = f"{prefix}tasks.{index}.role"
        if role in first_use:
            message = gettext("The role %(role)s is already used by task %(task)d.")
            _add(errors, path, message % {"role": repr(role), "task": first_use[role]})
            continue
        first_use[role] = index
        _check_workload_name(data.get("name"), role, task.get("kind"), errors, path)


def _check_workload_name(
    name: Any, role: str, kind: Any, errors: dict[str, str], path: str
) -> None:
    workload = f"{name}-{role}"
    if not isinstance(name, str) or kind not in (None, TaskKind.STATEFULSET):
        return
    if len(workload) > STATEFULSET_NAME_MAX:
        _add(
            errors,
            path,
            gettext(
                "The StatefulSet name %(workload)s is %(length)d characters; Kubernetes "
                "allows %(max)d (its pods' revision label adds 11). "
                "Shorten the job name or the role."
            )
            % {"workload": repr(workload), "length": len(workload), "max": STATEFULSET_NAME_MAX},
        )


def _writable_projects(user: User) -> list[Project]:
    return list(projects_for(user, write=True))


def _resolve_project(value: Any, user: User, errors: dict[str, str], path: str) -> Project | None:
    """The named project if the user may operate in it; else their only one; else an error."""
    writable = _writable_projects(user)
    if isinstance(value, str):
        project = next((p for p in writable if p.name == value), None)
        if project is None:
            message = gettext("You cannot create jobs in a project named %(name)s.")
            _add(errors, path, message % {"name": repr(value)})
        return project
    if value is not None:
        return None
    if len(writable) == 1:
        return writable[0]
    if not writable:
        _add(errors, path, gettext("You are not a member of any project that may create jobs."))
    else:
        names = ", ".join(p.name for p in writable)
        message = gettext("Choose the project: you are a member of %(names)s.")
        _add(errors, path, message % {"names": names})
    return None


def _resolve_cluster(value: Any, errors: dict[str, str], path: str) -> Cluster | None:
    if not isinstance(value, str):
        return None
    cluster = Cluster.objects.filter(name=value).first()
    if cluster is None:
        known = ", ".join(Cluster.objects.values_list("name", flat=True)[:20]) or gettext(
            "none yet"
        )
        message = gettext("No cluster is named %(name)s (registered: %(known)s).")
        _add(errors, path, message % {"name": repr(value), "known": known})
    return cluster


def _check_name_free(
    name: Any, cluster: Cluster, namespace: str, errors: dict[str, str], path: str
) -> None:
    if not isinstance(name, str) or path in errors:
        return
    existing = Job.objects.filter(cluster=cluster, namespace=namespace, name=name).first()
    if existing is None:
        return
    if existing.delete_requested_at is not None:
        message = gettext("A job named %(name)s in %(where)s is still being deleted.")
    else:
        message = gettext("A job named %(name)s already exists in %(where)s.")
    _add(errors, path, message % {"name": repr(name), "where": f"{cluster.name}/{namespace}"})


def _check_target(
    data: Mapping[str, Any], errors: dict[str, str], prefix: str
) -> tuple[Cluster | None, str | None]:
    """The cluster and namespace the Job's workloads go to, and whether its name is free there."""
    cluster = _resolve_cluster(data.get("cluster"), errors, prefix + "cluster")
    if cluster is None:
        return None, None
    namespace = data.get("namespace")
    if namespace is None:
        namespace = cluster.namespace
    if not isinstance(namespace, str) or prefix + "namespace" in errors:
        return cluster, None
    _check_name_free(data.get("name"), cluster, namespace, errors, prefix + "name")
    return cluster, namespace


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
    errors: dict[str, str] = {}
    spec = _structure(JobSpec, data, errors)
    _check_roles(data, errors, "")
    project = _resolve_project(data.get("project"), user, errors, "project")
    _cluster, namespace = _check_target(data, errors, "")
    if errors or spec is None:
        raise SpecInvalid(errors)
    return _resolved(spec, project, namespace)


def _load_yaml(text: str) -> Any:
    if len(text.encode()) > YAML_MAX_BYTES:
        message = gettext("The YAML is larger than %(size)d KiB.")
        raise SpecInvalid({"yaml": message % {"size": YAML_MAX_BYTES // 1024}})
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context
        if mark is None:
            raise SpecInvalid({"yaml": f"{problem}."}) from None
        message = gettext("Line %(line)d, column %(column)d: %(problem)s.")
        where = {"line": mark.line + 1, "column": mark.column + 1, "problem": problem}
        raise SpecInvalid({"yaml": message % where}) from None
    except yaml.YAMLError as exc:
        raise SpecInvalid(
            {"yaml": gettext("Not valid YAML: %(error)s.") % {"error": exc}}
        ) from None


def job_spec_from_yaml(text: str, user: User) -> JobSpec:
    """Imports a JobSpec written as YAML (as `job_spec_to_yaml` writes it)."""
    data = _load_yaml(text)
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
        if role in positions:
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
    return dict(_merge(data, overrides))


def parse_workflow_spec(data: Any, user: User) -> WorkflowSpec:
    """A valid WorkflowSpec (children resolved like `parse_job_spec`), or SpecInvalid."""
    if not isinstance(data, Mapping):
        message = gettext("The workflow spec must be a mapping (name, project, jobs).")
        raise SpecInvalid({"spec": message})
    errors: dict[str, str] = {}
    spec = _structure(WorkflowSpec, data, errors)
    project = _resolve_project(data.get("project"), user, errors, "project")
    children = [(i, c) for i, c in enumerate(_list(data.get("jobs"))) if isinstance(c, Mapping)]
    namespaces = {i: _check_child(child, project, errors, f"jobs.{i}.") for i, child in children}
    _check_workflow_graph(children, errors)
    _check_workflow_name_free(data.get("name"), project, errors)
    if errors or spec is None:
        raise SpecInvalid(errors)
    assert project is not None
    jobs = [_resolved(job, project, namespaces[i]) for i, job in enumerate(spec.jobs)]
    return spec.model_copy(update={"project": project.name, "jobs": jobs})


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _check_child(
    child: Mapping[str, Any], project: Project | None, errors: dict[str, str], prefix: str
) -> str | None:
    """A child Job belongs to its Workflow's project; otherwise it is checked like any Job."""
    named = child.get("project")
    if named is not None and project is not None and named != project.name:
        message = gettext("Must be the workflow's project, %(project)s.")
        _add(errors, prefix + "project", message % {"project": repr(project.name)})
    _check_roles(child, errors, prefix)
    return _check_target(child, errors, prefix)[1]


def _check_workflow_graph(
    children: Iterable[tuple[int, Mapping[str, Any]]], errors: dict[str, str]
) -> None:
    """Child names are unique, `depends_on` names siblings, and the edges form a DAG."""
    names: dict[str, int] = {}
    edges: list[tuple[str, str]] = []
    for index, child in children:
        name = child.get("name")
        if not isinstance(name, str):
            continue
        if name in names:
            message = gettext("Job %(index)d is named %(name)s already.")
            _add(errors, f"jobs.{index}.name", message % {"index": names[name], "name": repr(name)})
            continue
        names[name] = index
        upstreams = [up for up in _list(child.get("depends_on")) if isinstance(up, str)]
        edges += [(upstream, name) for upstream in upstreams]
    for upstream, downstream in edges:
        path = f"jobs.{names[downstream]}.depends_on"
        if upstream == downstream:
            _add(errors, path, gettext("A job cannot depend on itself."))
        elif upstream not in names:
            message = gettext("%(name)s is not a job of this workflow.")
            _add(errors, path, message % {"name": repr(upstream)})
    _check_acyclic(names, edges, errors)


def _check_acyclic(
    names: Mapping[str, int], edges: list[tuple[str, str]], errors: dict[str, str]
) -> None:
    from jobs.lifecycle import CycleError, topological_order

    known = [(up, down) for up, down in edges if up in names and up != down]
    try:
        topological_order(names, known)
    except CycleError as exc:
        _add(errors, "jobs", gettext("A workflow must be acyclic: %(error)s.") % {"error": exc})


def _check_workflow_name_free(name: Any, project: Project | None, errors: dict[str, str]) -> None:
    if not isinstance(name, str) or project is None or "name" in errors:
        return
    if Workflow.objects.filter(project=project, name=name).exists():
        message = gettext("A workflow named %(name)s already exists in %(project)s.")
        _add(errors, "name", message % {"name": repr(name), "project": project.name})
