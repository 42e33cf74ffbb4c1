"""The create page's two tabs show one spec: what is typed on one is carried to the other.

Form -> YAML: the forms' values become the JobSpec's data (`jobs.forms.spec_data`); a field the
form could not parse (a command with an open quote) keeps its text, so nothing typed is lost.
YAML -> Form: the document's values become the fields' text. YAML the form has no place for (an
unknown field, env written as a list) is not dropped: the switch is refused with the reason.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from django.utils.translation import gettext
from pydantic import ValidationError

from jobs.forms import (
    JOB_FIELDS,
    POLICY_FIELDS,
    ROLE_PREFIX,
    JobForm,
    RoleForm,
    empty_role,
    spec_data,
)
from jobs.spec import MAX_TASKS, JobSpec

TASK_FIELDS = (
    "role",
    "kind",
    "replicas",
    "image",
    "command",
    "args",
    "env",
    "resources",
    "node_selector",
)  # fmt: skip  (the order TaskSpec writes them in)
# Spec fields the form has no field for yet: carried to the form only when they hold their
# default (as every dumped spec writes them), otherwise the switch is refused like an unknown one.
FORMLESS_DEFAULTS: dict[str, Any] = {"tolerations": [], "volumes": [], "shm_size": None}
# The same for the Job's own fields: a spec no template made says `template: null`.
JOB_FORMLESS_DEFAULTS: dict[str, Any] = {"template": None}
RESOURCE_FIELD = {"cpu": "cpu", "memory": "memory", "gpu": "gpus"}
# Role form field -> where its value sits in a task of the spec.
_TASK_PATH = {
    "role": ("role",),
    "kind": ("kind",),
    "replicas": ("replicas",),
    "image": ("image",),
    "command": ("command",),
    "args": ("args",),
    "env": ("env",),
    "node_selector": ("node_selector",),
    "cpu": ("resources", "cpu"),
    "memory": ("resources", "memory"),
    "gpus": ("resources", "gpu"),
}


# --- Form -> YAML --------------------------------------------------------------------------


def typed_spec(job: JobForm, roles: Iterable[RoleForm]) -> dict[str, Any]:
    """The forms' values as the JobSpec's data, with the raw text of any field that failed the
    form's own parsing (call after `is_valid`)."""
    roles = list(roles)
    data = spec_data(job, roles)
    for name in JOB_FIELDS:
        if name in job.errors:
            data[name] = job[name].value()
    for name in POLICY_FIELDS:
        if name in job.errors:
            data["policies"][name] = job[name].value()
    for task, role in zip(data["tasks"], roles, strict=True):
        for name in role.errors:
            *parents, last = _TASK_PATH.get(name, (name,))
            target = task
            for part in parents:
                target = target.setdefault(part, {})
            target[last] = role[name].value()
    return data


def _whole_numbers(data: dict[str, Any]) -> dict[str, Any]:
    """ "3" typed in Replicas is 3 in YAML (the form's fields are text)."""
    policies = data.get("policies") or {}
    holders = [(policies, "heartbeat_seconds"), (policies, "stall_after_seconds")]
    for task in data.get("tasks") or ():
        holders += [(task, "replicas"), (task.get("resources") or {}, "gpu")]
    for holder, key in holders:
        value = holder.get(key)
        if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value.strip()):
            holder[key] = int(value)
    return data


def _in_spec_order(task: Any) -> Any:
    """A task's keys in the order the canonical spec writes them."""
    if not isinstance(task, dict):
        return task
    order = {key: index for index, key in enumerate(TASK_FIELDS)}
    return dict(sorted(task.items(), key=lambda item: order.get(item[0], len(order))))


def spec_yaml(data: dict[str, Any]) -> str:
    """YAML for the YAML tab: the canonical spec when its shape is valid (defaults filled in,
    as clone shows it), otherwise the values as typed, nothing dropped."""
    data = _whole_numbers(data)
    try:
        plain = JobSpec.model_validate(data).model_dump(mode="json", exclude_none=True)
    except ValidationError:
        plain = {key: value for key, value in data.items() if value is not None}
        if isinstance(plain.get("tasks"), list):
            plain["tasks"] = [_in_spec_order(task) for task in plain["tasks"]]
    return yaml.safe_dump(plain, sort_keys=False, allow_unicode=True)


# --- YAML -> Form --------------------------------------------------------------------------


def _unknown(mapping: Mapping[Any, Any], known: Iterable[str], prefix: str) -> str | None:
    extra = [str(key) for key in mapping if key not in known]
    if not extra:
        return None
    message = gettext("The form has no field for %(names)s: remove it, or stay on the YAML tab.")
    return message % {"names": ", ".join(prefix + name for name in extra)}


def _wrong_shape(path: str) -> str:
    message = gettext("The form cannot show %(path)s as written: correct it on the YAML tab.")
    return message % {"path": path}


def _task_problem(task: Any, path: str) -> str | None:
    if not isinstance(task, Mapping):
        return _wrong_shape(path)
    defaulted = [k for k, v in FORMLESS_DEFAULTS.items() if k in task and task[k] == v]
    problem = _unknown(task, (*TASK_FIELDS, *defaulted), f"{path}.")
    if problem:
        return problem
    for key, shape in (("resources", Mapping), ("env", Mapping), ("node_selector", Mapping)):
        if task.get(key) is not None and not isinstance(task[key], shape):
            return _wrong_shape(f"{path}.{key}")
    for key in ("command", "args"):
        if task.get(key) is not None and not isinstance(task[key], list | str):
            return _wrong_shape(f"{path}.{key}")
    return _unknown(task.get("resources") or {}, RESOURCE_FIELD, f"{path}.resources.")


def form_problem(data: Any) -> str | None:
    """Why the form cannot hold this YAML's values without losing some, or None."""
    if not isinstance(data, Mapping):
        return gettext("The YAML must be a mapping with name, cluster and tasks.")
    defaulted = [k for k, v in JOB_FORMLESS_DEFAULTS.items() if k in data and data[k] == v]
    problem = _unknown(data, (*JOB_FIELDS, "tasks", "policies", *defaulted), "")
    if problem:
        return problem
    policies = data.get("policies")
    if policies is not None and not isinstance(policies, Mapping):
        return _wrong_shape("policies")
    problem = _unknown(policies or {}, POLICY_FIELDS, "policies.")
    if problem:
        return problem
    tasks = data.get("tasks")
    if tasks is not None and not isinstance(tasks, list):
        return _wrong_shape("tasks")
    if tasks is not None and len(tasks) > MAX_TASKS:
        message = gettext("The form shows at most %(max)d roles: stay on the YAML tab.")
        return message % {"max": MAX_TASKS}
    for index, task in enumerate(tasks or ()):
        problem = _task_problem(task, f"tasks.{index}")
        if problem:
            return problem
    return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _words(value: Any) -> str:
    """A command or args list as typed in a shell; a string stays as written."""
    if isinstance(value, list):
        return shlex.join(_text(word) for word in value)
    return _text(value)


def _lines(value: Any) -> str:
    return "\n".join(f"{_text(key)}={_text(item)}" for key, item in (value or {}).items())


def role_values(task: Mapping[str, Any]) -> dict[str, str]:
    """A task of the YAML as the role form's fields (the inverse of `jobs.forms.spec_data`)."""
    resources = task.get("resources") or {}
    values = {key: _text(task.get(key)) for key in ("role", "kind", "image", "replicas")}
    values.update(
        command=_words(task.get("command")),
        args=_words(task.get("args")),
        env=_lines(task.get("env")),
        node_selector=_lines(task.get("node_selector")),
        **{field: _text(resources.get(key)) for key, field in RESOURCE_FIELD.items()},
    )
    values["kind"] = values["kind"] or str(empty_role()["kind"])
    return values


def form_post(data: Mapping[str, Any]) -> dict[str, str]:
    """The YAML's values as the create form would post them (one role form per task)."""
    tasks = [task for task in data.get("tasks") or () if isinstance(task, Mapping)] or [{}]
    post = {"mode": "form", **{name: _text(data.get(name)) for name in JOB_FIELDS}}
    policies = data.get("policies") or {}
    post.update({name: _text(policies.get(name)) for name in POLICY_FIELDS})
    post[f"{ROLE_PREFIX}-TOTAL_FORMS"] = str(len(tasks))
    post[f"{ROLE_PREFIX}-INITIAL_FORMS"] = "0"
    for index, task in enumerate(tasks):
        values = role_values(task) if task else empty_role()
        post.update({f"{ROLE_PREFIX}-{index}-{key}": _text(v) for key, v in values.items()})
    return post
