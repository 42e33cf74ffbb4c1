"""The create page's "RLinf on Ray" form: the template's choices (jobs.rlinf.RlinfIn) as fields.

Like the ordinary form it only reshapes what was typed (lines into lists and mappings); the
request it builds is the API's (`{"template": "rlinf", ..., "rlinf": {...}}`), judged by
`jobs.spec.parse_rlinf_spec`, whose errors are put back next to their fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs import rlinf
from jobs.forms import JOB_FIELDS, POLICY_FIELDS, JobForm, parse_lines, policies_data

# The choices as the form's fields, in the request's order (the form's names are RlinfIn's).
CHOICE_FIELDS = (
    "image", "nodes", "gpus_per_node", "cpu", "memory", "entry", "config_name", "overrides",
    "output_claim", "log_path", "resume_from", "placement", "env",
)  # fmt: skip
# Where an error about the expanded spec's Tasks lands: tasks.N.<path> -> field.
TASK_FIELD_OF = {
    "image": "image",
    "resources.cpu": "cpu",
    "resources.memory": "memory",
    "resources.gpu": "gpus_per_node",
    "resources": "cpu",
    "env": "env",
    "volumes": "output_claim",
    "replicas": "nodes",
}


def _default(name: str) -> Any:
    """RlinfIn's default, shown as the field's initial value: one place for each default."""
    return rlinf.RlinfIn.model_fields[name].default


def _text(label: Any, help_text: Any = "", **attrs: Any) -> forms.CharField:
    widget = forms.TextInput(attrs=attrs) if attrs else forms.TextInput()
    return forms.CharField(label=label, required=False, help_text=help_text, widget=widget)


def _lines(label: Any, help_text: Any, rows: int = 3) -> forms.CharField:
    attrs = {"rows": rows, "spellcheck": "false"}
    return forms.CharField(
        label=label, required=False, help_text=help_text, widget=forms.Textarea(attrs=attrs)
    )


class RlinfForm(JobForm):
    """The Job's fields and policies (JobForm) and the template's choices; every field is
    optional here, as on the ordinary form: the template's rules say what is missing."""

    image = _text(_("Image"), _("The RLinf image (Ray and RLinf installed), one for all nodes."))
    nodes = _text(_("Nodes"), _("Ray nodes: one head and nodes − 1 workers."), inputmode="numeric")
    gpus_per_node = _text(_("GPUs per node"), _("nvidia.com/gpu of each pod."), inputmode="numeric")
    cpu = _text(_("CPU per node"), _("e.g. 16, 500m"))
    memory = _text(_("Memory per node"), _("e.g. 128Gi; /dev/shm is sized from it."))
    entry = _text(
        _("Entry"),
        _("embodied, reasoning (RLinf's example entry scripts) or the absolute path of a .py "
          "script."),
    )  # fmt: skip
    config_name = _text(_("Config name"), _("The Hydra config name, e.g. maniskill_ppo_mlp."))
    overrides = _lines(_("Overrides"), _("One Hydra key=value per line, passed last."), rows=4)
    output_claim = _text(
        _("Output claim"),
        _("A PersistentVolumeClaim of the namespace, mounted at /output on every node: outputs "
          "and checkpoints outlive the pods."),
    )  # fmt: skip
    log_path = _text(
        _("Log path"),
        _("runner.logger.log_path; empty: /output/<job name>, stable across pods and runs."),
        placeholder="/output/<job name>",
    )
    resume_from = _text(
        _("Resume from"),
        _("A checkpoint directory, or auto: the newest global_step_N under the log path, if any."),
    )
    placement = _lines(
        _("Placement"),
        _("One component: ranks per line, e.g. actor: 0-7 (cluster.component_placement)."),
    )
    env = _lines(_("Environment"), _("One KEY=value per line, on every node."))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("nodes", "gpus_per_node", "cpu", "memory", "entry"):
            self.fields[name].initial = _default(name)
        # The template's policies unless the user chooses otherwise (a finished run frees GPUs).
        for name, value in rlinf.POLICIES.items():
            self.fields[name].initial = value

    def clean_overrides(self) -> list[str]:
        lines = self.cleaned_data["overrides"].splitlines()
        return [line.strip() for line in lines if line.strip()]

    def clean_placement(self) -> dict[str, str]:
        return _placement_lines(self.cleaned_data["placement"])

    def clean_env(self) -> dict[str, str]:
        return parse_lines(self.cleaned_data["env"], "KEY=value")


def _placement_lines(text: str) -> dict[str, str]:
    """`component: ranks` lines (the ranks may hold colons of their own: `0-3:0-7`)."""
    result: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        component, sep, rule = line.strip().partition(":")
        if not sep or not component.strip() or not rule.strip():
            raise forms.ValidationError(
                gettext("Line %(number)s is not %(shape)s: %(line)s")
                % {"number": number, "shape": "component: ranks", "line": line.strip()}
            )
        result[component.strip()] = rule.strip()
    return result


def rlinf_request(form: RlinfForm) -> dict[str, Any]:
    """The form's values as the API's template request (what `parse_rlinf_spec` takes). Empty
    choices are left out, so the template's defaults apply; a field that failed the form's own
    parsing is left out too (the form already carries its error)."""
    data = form.cleaned_data
    choices = {name: data[name] for name in CHOICE_FIELDS if name in data and data[name] != ""}
    for name in ("overrides", "placement", "env"):
        if not choices.get(name):
            choices.pop(name, None)
    return {
        "template": rlinf.TEMPLATE,
        "name": data.get("name", ""),
        "cluster": None if "cluster" in form.errors else data.get("cluster", ""),
        "project": data.get("project") or None,
        "namespace": data.get("namespace") or None,
        "policies": policies_data(data),
        "rlinf": choices,
    }


def apply_rlinf_errors(errors: Mapping[str, str], form: RlinfForm) -> None:
    """Each error of `parse_rlinf_spec` next to its field (`rlinf.placement.actor` by
    Placement, `tasks.0.image` by Image); one of no field goes on top."""
    for path, message in errors.items():
        field = _field_of(path)
        if field is None:
            form.add_error(None, f"{path}: {message}")
        elif field not in form.errors:
            form.add_error(field, message)


def _field_of(path: str) -> str | None:
    head, _, rest = path.partition(".")
    first, _, tail = rest.partition(".")
    if head in JOB_FIELDS:
        return head
    if head == "policies" and first in POLICY_FIELDS:
        return first
    if head == "rlinf" and first in CHOICE_FIELDS:
        return first
    if head == "tasks" and first.isdigit():
        two = ".".join(tail.split(".")[:2])
        return TASK_FIELD_OF.get(two) or TASK_FIELD_OF.get(tail.split(".")[0])
    return None
