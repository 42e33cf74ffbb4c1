"""The create-job page's forms: the common case as fields, the same spec as YAML.

The forms only turn what was typed into the JobSpec's shape (lines into mappings, a command line
into a list). `jobs.spec.parse_job_spec` decides what is valid; its errors, keyed by dotted path,
are put back next to the field they belong to (`apply_spec_errors`), so one set of rules serves
the API, the form, YAML import and clone.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs.choices import JobPhase, TaskKind
from jobs.spec import JOB_NAME_MAX, MAX_TASKS, JobPolicies, JobSpec, TaskSpec
from jobs.status.workload import HEARTBEAT_SECONDS

ROLE_PREFIX = "roles"
# Where a spec path's field lives in a role form: tasks.N.<key>[.<rest>] -> field name.
ROLE_FIELD_OF = {
    "role": "role",
    "kind": "kind",
    "replicas": "replicas",
    "image": "image",
    "command": "command",
    "args": "args",
    "env": "env",
    "node_selector": "node_selector",
    "resources.cpu": "cpu",
    "resources.memory": "memory",
    "resources.gpu": "gpus",
    "resources": "cpu",
}
JOB_FIELDS = ("name", "project", "cluster", "namespace")
# The Job's policies (jobs.spec.JobPolicies): fields of the Job form, `policies.<name>` in a spec.
POLICY_FIELDS = ("stop_on_completion", "heartbeat_seconds", "stall_after_seconds",
                 "progress_from_logs", "stop_when_idle_minutes")  # fmt: skip
_SUFFIX = re.compile(r"^(?P<base>.*?)(?:-(?P<number>\d+))?$")


class JobForm(forms.Form):
    """The Job's own fields; the roles are a formset beside it.

    Fields are optional here: `parse_job_spec` says what is missing or wrong, in the same words
    for every client, and all errors come back at once.
    """

    name = forms.CharField(label=_("Name"), required=False, max_length=JOB_NAME_MAX)
    project = forms.ChoiceField(label=_("Project"), required=False)
    cluster = forms.ChoiceField(label=_("Cluster"), required=False)
    namespace = forms.CharField(
        label=_("Namespace"),
        required=False,
        max_length=63,
        help_text=_("Empty: the cluster's default namespace."),
    )
    stop_on_completion = forms.BooleanField(
        label=_("Stop on completion"),
        required=False,
        help_text=_(
            "When the workload reports its completion (succeeded or failed), the console stops "
            "the job and frees its GPUs. The job then shows Stopped, with the outcome beside it."
        ),
    )
    heartbeat_seconds = forms.CharField(
        label=_("Heartbeat interval (s)"),
        required=False,
        max_length=8,
        initial=str(HEARTBEAT_SECONDS),
        widget=forms.TextInput(attrs={"inputmode": "numeric", "placeholder": HEARTBEAT_SECONDS}),
        help_text=_(
            "How often the workload says it is alive; after three intervals without a message "
            "it shows Unresponsive. At least 5; empty: 30."
        ),
    )
    stall_after_seconds = forms.CharField(
        label=_("Stalled after (s)"),
        required=False,
        max_length=8,
        widget=forms.TextInput(attrs={"inputmode": "numeric"}),
        help_text=_(
            "Seconds without a step advance before the workload shows Stalled. At least 5; "
            "empty: derived from its recent step times (never under 120 s)."
        ),
    )
    stop_when_idle_minutes = forms.CharField(
        label=_("Stop when idle (min)"),
        required=False,
        max_length=8,
        widget=forms.TextInput(attrs={"inputmode": "numeric"}),
        help_text=_(
            "Stop the job once its workload was Stalled, Unresponsive or finished (its GPUs "
            "still held) this many minutes, 1 to 10080; never while it is Silent. 0: off even "
            "where the project sets a default; empty: the project's default."
        ),
    )
    progress_from_logs = forms.BooleanField(
        label=_("Progress from logs"),
        required=False,
        help_text=_(
            "Read RLinf's own progress lines (Global Step: k/N) from the head pod's log, for a "
            "training script that sends no signals."
        ),
    )

    def __init__(
        self, *args: Any, projects: Iterable[str], clusters: Iterable[str], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        project_field = self.fields["project"]
        cluster_field = self.fields["cluster"]
        assert isinstance(project_field, forms.ChoiceField)
        assert isinstance(cluster_field, forms.ChoiceField)
        project_field.choices = [(name, name) for name in projects]
        cluster_field.choices = [("", "—"), *((name, name) for name in clusters)]


class RoleForm(forms.Form):
    """One role (Task) of the Job: a StatefulSet or batch Job of `replicas` identical pods."""

    role = forms.CharField(
        label=_("Role"), required=False, max_length=63, help_text=_("e.g. head, worker")
    )
    kind = forms.ChoiceField(
        label=_("Kind"),
        choices=TaskKind.choices,
        initial=TaskKind.STATEFULSET,
        help_text=_("A StatefulSet never reports Succeeded or Failed; a batch Job does."),
    )
    image = forms.CharField(label=_("Image"), required=False, max_length=512)
    command = forms.CharField(
        label=_("Command"), required=False, help_text=_("As typed in a shell; empty: the image's.")
    )
    args = forms.CharField(label=_("Arguments"), required=False)
    replicas = forms.CharField(label=_("Replicas"), required=False, max_length=8, initial="1")
    cpu = forms.CharField(
        label=_("CPU"),
        required=False,
        max_length=32,
        help_text=_("e.g. 4, 500m; empty: 1"),
        widget=forms.TextInput(attrs={"placeholder": "1"}),
    )
    memory = forms.CharField(
        label=_("Memory"),
        required=False,
        max_length=32,
        help_text=_("e.g. 16Gi, 512Mi; empty: 1Gi"),
        widget=forms.TextInput(attrs={"placeholder": "1Gi"}),
    )
    gpus = forms.CharField(label=_("GPUs"), required=False, max_length=8, initial="0")
    node_selector = forms.CharField(
        label=_("Node selector"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("One key=value per line."),
    )
    env = forms.CharField(
        label=_("Environment"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("One KEY=value per line."),
    )

    def clean_command(self) -> list[str]:
        return _words(self.cleaned_data["command"])

    def clean_args(self) -> list[str]:
        return _words(self.cleaned_data["args"])

    def clean_node_selector(self) -> dict[str, str]:
        return parse_lines(self.cleaned_data["node_selector"], "key=value")

    def clean_env(self) -> dict[str, str]:
        return parse_lines(self.cleaned_data["env"], "KEY=value")


# absolute_max: a posted TOTAL_FORMS of 10**8 would otherwise build (and render) 1,020 forms.
RoleFormSet = forms.formset_factory(
    RoleForm,
    extra=0,
    min_num=1,
    validate_min=True,
    max_num=MAX_TASKS,
    validate_max=True,
    absolute_max=MAX_TASKS,
)


class YamlForm(forms.Form):
    yaml = forms.CharField(
        label=_("Job spec (YAML)"),
        widget=forms.Textarea(attrs={"rows": 22, "spellcheck": "false"}),
        max_length=64 * 1024,
    )


class DeleteForm(forms.Form):
    """Delete cannot be undone (spec §Job status), so the user types the job's name."""

    confirm = forms.CharField(label=_("Type the job name to confirm"), max_length=JOB_NAME_MAX)

    def __init__(self, *args: Any, job_name: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.job_name = job_name

    def clean_confirm(self) -> str:
        typed = self.cleaned_data["confirm"]
        if typed != self.job_name:
            raise forms.ValidationError(
                gettext("You typed %(typed)s; type the job name, %(name)s, exactly.")
                % {"typed": repr(typed), "name": self.job_name}
            )
        return typed


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise forms.ValidationError(
            gettext("Cannot split this into words (%(error)s): check the quotes.") % {"error": exc}
        ) from None


def parse_lines(text: str, shape: str) -> dict[str, str]:
    """`key=value` lines into a mapping; blank lines are skipped, a malformed one is an error."""
    result: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.strip().partition("=")
        if not sep or not key.strip():
            raise forms.ValidationError(
                gettext("Line %(number)s is not %(shape)s: %(line)s")
                % {"number": number, "shape": shape, "line": line.strip()}
            )
        result[key.strip()] = value.strip()
    return result


def format_lines(mapping: Mapping[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in mapping.items())


def spec_data(job: JobForm, roles: Iterable[RoleForm]) -> dict[str, Any]:
    """The forms' cleaned values as the JobSpec's data (what `parse_job_spec` takes).

    A field that failed the form's own parsing is left out; the form already carries its error.
    """
    data = job.cleaned_data
    spec: dict[str, Any] = {
        "name": data.get("name", ""),
        "cluster": data.get("cluster", ""),
        "project": data.get("project") or None,
        "namespace": data.get("namespace") or None,
        "tasks": [_task_data(role.cleaned_data) for role in roles],
        "policies": policies_data(data),
    }
    if "cluster" in job.errors:
        spec["cluster"] = None
    return spec


def policies_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """The policy fields as the spec's `policies`: empty numbers take the spec's defaults, and
    numbers stay as typed, so the spec says "Must be a whole number" for "ten"."""
    policies: dict[str, Any] = {
        "stop_on_completion": bool(data.get("stop_on_completion")),
        "progress_from_logs": bool(data.get("progress_from_logs")),
    }
    for name in ("heartbeat_seconds", "stall_after_seconds", "stop_when_idle_minutes"):
        typed = str(data.get(name) or "").strip()
        if typed:
            policies[name] = typed
    return policies


def _task_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """Empty replicas, GPUs, CPU and memory take the spec's defaults; numbers stay as typed,
    so the spec says "Must be a whole number" for "three"."""
    resources = {key: data[field].strip() for key, field in _RESOURCE_FIELDS if data.get(field)}
    task: dict[str, Any] = {
        key: data[key]
        for key in ("role", "kind", "image", "command", "args", "env", "node_selector")
        if key in data
    }
    if data.get("replicas", "").strip():
        task["replicas"] = data["replicas"].strip()
    task["resources"] = resources
    return task


_RESOURCE_FIELDS = (("cpu", "cpu"), ("memory", "memory"), ("gpu", "gpus"))


def apply_spec_errors(errors: Mapping[str, str], job: JobForm, roles: list[RoleForm]) -> None:
    """Puts each `SpecInvalid` error next to its field; an error of no field goes on top.

    A field that already has the form's own error keeps only that one.
    """
    for path, message in errors.items():
        head, _, rest = path.partition(".")
        index, _, field_path = rest.partition(".")
        if head in JOB_FIELDS:
            _add_once(job, head, message)
        elif head == "policies" and index in POLICY_FIELDS:
            _add_once(job, index, message)
        elif head == "tasks" and index.isdigit() and int(index) < len(roles) and field_path:
            _add_once(roles[int(index)], _role_field(field_path), message)
        else:
            job.add_error(None, f"{path}: {message}")


def _add_once(form: forms.Form, field: str, message: str) -> None:
    if field not in form.errors:
        form.add_error(field, message)


def _role_field(field_path: str) -> str:
    """`resources.memory` -> memory, `env.FOO` -> env, `command.2` -> command."""
    two = ".".join(field_path.split(".")[:2])
    return ROLE_FIELD_OF.get(two) or ROLE_FIELD_OF.get(field_path.split(".")[0]) or "role"


def job_initial(spec: JobSpec, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "project": spec.project or "",
        "cluster": spec.cluster,
        "namespace": spec.namespace or "",
        **policies_initial(spec.policies),
    }


def policies_initial(policies: JobPolicies) -> dict[str, Any]:
    """The spec's policies as the Job form shows them (the inverse of `policies_data`)."""
    stall = policies.stall_after_seconds
    return {
        "stop_on_completion": policies.stop_on_completion,
        "heartbeat_seconds": str(policies.heartbeat_seconds),
        "stall_after_seconds": "" if stall is None else str(stall),
        "progress_from_logs": policies.progress_from_logs,
        "stop_when_idle_minutes": (
            "" if policies.stop_when_idle_minutes is None else str(policies.stop_when_idle_minutes)
        ),
    }


def role_initial(task: TaskSpec) -> dict[str, Any]:
    """A TaskSpec as the role form shows it (the inverse of `_task_data`)."""
    return {
        "role": task.role,
        "kind": task.kind,
        "image": task.image,
        "command": shlex.join(task.command),
        "args": shlex.join(task.args),
        "replicas": task.replicas,
        "cpu": task.resources.cpu,
        "memory": task.resources.memory,
        "gpus": task.resources.gpu,
        "node_selector": format_lines(task.node_selector),
        "env": format_lines(task.env),
    }


def empty_role() -> dict[str, Any]:
    return {"kind": TaskKind.STATEFULSET, "replicas": "1", "gpus": "0"}


def typed_values(form: forms.Form) -> dict[str, Any]:
    """What the user typed into a bound form, to show it again in a fresh (error-free) form."""
    return {name: form[name].value() for name in form.fields}


def suggest_clone_name(name: str, taken: Iterable[str]) -> str:
    """`train` -> `train-2`, `train-2` -> `train-3`, skipping names already taken."""
    match = _SUFFIX.match(name)
    assert match is not None
    base = match["base"] or name
    number = int(match["number"] or 1) + 1
    used = set(taken)
    while True:
        suffix = f"-{number}"
        candidate = base[: JOB_NAME_MAX - len(suffix)].rstrip("-") + suffix
        if candidate not in used:
            return candidate
        number += 1


class JobFilterForm(forms.Form):
    """The Jobs list's filters and sort order (a GET form: the URL is the state). Each order has
    an index (jobs.models.Job.Meta) and its reverse is the exact reverse, read backwards."""

    SORTS = {
        "-created": ("-created_at", "-pk"),
        "created": ("created_at", "pk"),
        "name": ("name", "pk"),
        "-name": ("-name", "-pk"),
        "phase": ("phase", "-created_at", "-pk"),
        "-phase": ("-phase", "created_at", "pk"),
    }

    q = forms.CharField(label=_("Name contains"), required=False, max_length=40)
    phase = forms.ChoiceField(label=_("Phase"), required=False)
    cluster = forms.ChoiceField(label=_("Cluster"), required=False)
    project = forms.ChoiceField(label=_("Project"), required=False)
    sort = forms.ChoiceField(label=_("Sort"), required=False)

    def __init__(
        self, *args: Any, projects: Iterable[str], clusters: Iterable[str], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        everything = [("", gettext("All"))]
        self._choices("phase", [*everything, *JobPhase.choices])
        self._choices("cluster", [*everything, *((name, name) for name in clusters)])
        self._choices("project", [*everything, *((name, name) for name in projects)])
        self._choices("sort", [(key, key) for key in self.SORTS])

    def _choices(self, name: str, choices: list[tuple[str, Any]]) -> None:
        field = self.fields[name]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices

    def filters(self) -> dict[str, str]:
        """The valid, non-empty filters. An invalid value drops out of `cleaned_data`: it is
        ignored rather than turned into an error page."""
        self.is_valid()
        return {k: v for k, v in self.cleaned_data.items() if v and k != "sort"}

    def sort_key(self) -> str:
        self.is_valid()
        return self.cleaned_data.get("sort") or "-created"

    def ordering(self) -> tuple[str, ...]:
        return self.SORTS[self.sort_key()]
