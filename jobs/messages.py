"""Messages the console writes itself: stored as a code plus parameters, worded in the reader's
language when shown. Text that Kubernetes wrote travels inside them untouched and marked.

Storage (docs/decisions.md): every `message` column stays a TextField. A coded message is stored
as compact JSON, `{"c": code, "p": {name: param}}`; anything else (rows written before codes
existed, text of unknown origin) is plain text and is shown exactly as stored. A parameter is a
plain value (a name, a number, a Kubernetes reason word: shown as it is), Kubernetes' own text
(`{"k": text}`: shown verbatim, marked, never translated), a nested coded message, or a list of
those (joined). Encoding is deterministic, so an unchanged code and parameters give the same
string and the sync compares stored strings to decide whether anything is written.

Some codes carry diagnostics (restart counts, exit codes, termination reasons), which spec §Pod
and Worker status reserves for authorised operators. They are stored like any other; a reader
who may not see them (jobs.diagnostics decides who) gets each such message as its meaning
(`WITHHELD`, `withhold`): every rendering below takes `diagnostics`, False unless the caller
says the reader may see them.

Pure: no ORM. The wording is read at render time (`gettext` of the active language).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
from django.utils.functional import Promise
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language, gettext, ngettext_lazy, pgettext
from django.utils.translation import gettext_lazy as _


@dataclass(frozen=True)
class Kube:
    """Text written by Kubernetes (a container's waiting message, a scheduler's message, a node
    condition, an API server's answer): shown as written, in English, and marked as such."""

    text: str


@dataclass(frozen=True)
class Message:
    """A message the console writes: `code` names its wording in CODES."""

    code: str
    params: Mapping[str, Param] = field(default_factory=dict)


@dataclass(frozen=True)
class Stored:
    """A message already in stored form, nested as it is (a Job nests its Tasks' messages
    without decoding them: the sync aggregates thousands per cycle)."""

    text: str


Param = str | int | Kube | Message | Stored | Sequence["Param"]

# Plural wordings pick their form from the parameter named "count". A wording with no word of
# its own (only parameters: names, Kubernetes condition types) is not translated.
CODES: dict[str, Promise | str] = {
    # Kubernetes' own text and nothing else (a Worker's waiting message, a node condition).
    "kubernetes": "%(detail)s",
    # Task messages (spec §Task status), composed from the workload's observation.
    "task.not_created_stopped": _("not created: the job is stopped"),
    "task.waiting_for_workload": _("waiting for the %(kind)s to be created"),
    "task.replicas_ready": _("%(ready)s/%(desired)s replicas ready"),
    "task.scaled_to_zero": _("scaled to 0"),
    "task.scaled_to_zero_terminating": ngettext_lazy(
        "scaled to 0, %(count)s pod terminating", "scaled to 0, %(count)s pods terminating", "count"
    ),
    "task.batch_progress": _("%(active)s active, %(succeeded)s succeeded, %(failed)s failed"),
    "task.batch_progress_of": _(
        "%(active)s active, %(succeeded)s/%(completions)s succeeded, %(failed)s failed"
    ),
    "task.batch_finished": "%(condition)s",
    "task.batch_finished_reason": "%(condition)s (%(reason)s)",
    "task.with_problem": _("%(progress)s; %(problem)s"),
    # The first problem of a Task's pods (jobs.status.problems.pod_problem).
    "pod.node_lost": _("%(pod)s: node %(node)s lost (pod phase Unknown)"),
    "pod.node_not_ready": _("%(pod)s: node %(node)s not ready"),
    "pod.reason": _("%(pod)s: %(reason)s"),
    "pod.reason_detail": _("%(pod)s: %(reason)s: %(detail)s"),
    "pod.crash_loop": ngettext_lazy(
        "%(pod)s: CrashLoopBackOff, %(count)s restart, last %(exit)s",
        "%(pod)s: CrashLoopBackOff, %(count)s restarts, last %(exit)s",
        "count",
    ),
    "pod.failed": _("%(pod)s: Failed, %(exit)s"),
    "pod.oom_killed": ngettext_lazy(
        "%(pod)s: OOMKilled (exit code %(code)s), %(count)s restart",
        "%(pod)s: OOMKilled (exit code %(code)s), %(count)s restarts",
        "count",
    ),
    "exit.code": _("exit code %(code)s"),
    "exit.code_reason": _("exit code %(code)s (%(reason)s)"),
    # A Worker row's message (jobs.status.problems.pod_reason).
    "worker.node_lost": _(
        "The API reports the pod's phase as Unknown: its node stopped reporting."
    ),
    "worker.node_not_ready": _("Node %(node)s is not ready: %(detail)s"),
    "worker.exit.code": _("Exit code %(code)s"),
    "worker.exit.code_reason": _("Exit code %(code)s (%(reason)s)"),
    "worker.terminating": _("The pod is being deleted."),
    "node.no_ready_condition": _("The node reports no Ready condition."),
    # Add-ons (spec §Node and Addon status, jobs.status.observed.addon_view).
    "addon.no_workload": _("No workload carries this add-on's label."),
    "addon.deadline_exceeded": _("The rollout of %(version)s exceeded its progress deadline."),
    "addon.installing": _("%(ready)s/%(desired)s ready, installing %(version)s"),
    "addon.upgrading": _("%(updated)s/%(desired)s updated to %(version)s, running %(current)s"),
    "addon.not_rolled_out": _("Running %(current)s; %(version)s is not rolled out."),
    # A Job aggregates the phases and messages of its Tasks (spec §Task status).
    "job.task": _("%(role)s: %(phase)s"),
    "job.task_message": _("%(role)s: %(phase)s — %(message)s"),
    "job.tasks": "%(tasks)s",
    "job.waiting_upstream": _("Waiting for upstream jobs: %(jobs)s."),
    "workflow.progress": _("%(succeeded)s/%(total)s jobs succeeded"),
    # The workload state (jobs.status.workload): why it is what it is.
    "workload.silent": _("The workload has sent no signal in this run."),
    "workload.lost": _(
        "The pods are gone (the job is %(phase)s) and the workload never reported completion."
    ),
    "workload.pods_starting": _("The workload speaks while its pods are still starting."),
    "workload.quiet": _(
        "No message for %(seconds)s s (limit %(limit)s s: three heartbeat intervals)."
    ),
    "workload.gathering": _("Waiting for its Ray nodes: %(alive)s of %(expected)s alive."),
    "workload.degraded": _("%(alive)s of %(expected)s Ray nodes alive."),
    "workload.stalled": _("Step %(step)s has not advanced for %(seconds)s s (limit %(limit)s s)."),
    "workload.progressing": _("At step %(step)s."),
    "workload.phase": _("The workload reports the phase %(phase)s."),
    "workload.no_steps": _("The workload speaks but reports no training step yet."),
    "workload.completed": _("The workload reported %(outcome)s. %(detail)s"),
    "workload.completed_code": _(
        "The workload reported %(outcome)s with exit code %(exit_code)s. %(detail)s"
    ),
    # Operations the console itself records for a Job's policies (jobs.workload.report).
    "operation.stopped_on_completion": _(
        "The workload reported %(outcome)s: stopped by the job's stop_on_completion policy; "
        "every workload of the job is scaled to 0."
    ),
    "operation.stopped_when_idle": _(
        "The workload was %(state)s for %(minutes)s min (since %(since)s): stopped by the job's "
        "stop_when_idle_minutes policy; every workload of the job is scaled to 0."
    ),
    # Why a cluster could not be read (console.kube.gateway.ClusterUnreachable.code).
    "cluster.truncated": _("the API server closed the connection mid-response (truncated answer)"),
    "cluster.refused": _("cannot connect to the API server (connection refused or unreachable)"),
    "cluster.timeout": _("the API server did not answer in time (timeout)"),
    "cluster.transport": _("cannot talk to the API server (%(error)s)"),
    "cluster.tls": _("TLS error (%(status)s)"),
    "cluster.certificate": _(
        "the API server's certificate is not trusted (%(problem)s): check the CA given for it"
    ),
    "cluster.tls_handshake": _("the TLS handshake with the API server failed (%(problem)s)"),
    "cluster.address": _("the API server's address %(address)s is %(problem)s: refused"),
    "cluster.malformed_json": _(
        "the API server answered HTTP %(status)s with malformed or truncated JSON"
    ),
    "cluster.unexpected_shape": _("the API server answered objects of an unexpected shape"),
    "cluster.throttled": _(
        "the API server is throttling requests (429 Too Many Requests); "
        "retry after %(retry_after)s s"
    ),
    "cluster.expiring": _("listing %(resource)s kept expiring (410 Gone)"),
    "cluster.status": "HTTP %(status)s %(reason)s",
    "cluster.status_detail": "HTTP %(status)s %(reason)s: %(detail)s",
    "cluster.kubeconfig_rejected": _("the stored kubeconfig cannot be used: %(detail)s"),
    # Operation records (who asked for what, with what result).
    "operation.created": _("Created."),
    "operation.created_in": _("Created in %(workflow)s."),
    "operation.cloned": _("Cloned from %(name)s (#%(id)s)."),
    "operation.stopped": _("Every workload of the job is scaled to 0."),
    "operation.stopped_failed": _(
        "The job stays Failed; stop only releases the resources it still holds."
    ),
    "operation.resumed": _("Run %(run)s: the Tasks are re-created from the original template."),
    "operation.delete_requested": _(
        "Deletion requested: the workloads, then the job, are removed."
    ),
    "operation.apply_error": "%(detail)s",
    "operation.cluster_unreachable": _("Cluster %(cluster)s: %(detail)s"),
    # Refusals (spec §Job status), recorded as refused Operations.
    "refused.succeeded_resume": _(
        "A Succeeded Job is terminal: it cannot be resumed. Clone it to run it again."
    ),
    "refused.succeeded_stop": _(
        "A Succeeded Job is terminal: it cannot be stopped. Clone it to run it again."
    ),
    "refused.failed_resume": _(
        "A Failed Job is terminal: save its logs and outputs, fix the spec, then clone it."
    ),
    "refused.failed_stop": _("This Failed Job is already stopped: its resources are released."),
    "refused.resume_not_stopped": _("Only a Stopped Job can be resumed; this one is %(phase)s."),
    "refused.already": _("This Job is already %(phase)s."),
    "refused.being_deleted": _("This job is being deleted."),
    "refused.kept_changing": _("The job kept changing during the request; try again."),
    "refused.confirm_name": _("Type the job's name, %(name)s, to confirm the deletion."),
    "refused.already_deleting": _("This job is already being deleted."),
    "refused.cluster_retired": _(
        "Cluster %(cluster)s is retired: no Job runs on it again. Clone this one to another "
        "cluster."
    ),
    # What a reader without diagnostics reads instead of a message that carries them (WITHHELD).
    "pod.crash_loop_meaning": _(
        "%(pod)s: CrashLoopBackOff: the container keeps restarting after an error; read its "
        "logs or ask an operator"
    ),
    "pod.failed_meaning": _(
        "%(pod)s: Failed: a container ended with an error; read its logs or ask an operator"
    ),
    "pod.restarted_meaning": _(
        "%(pod)s: the container restarted after an error; read its logs or ask an operator"
    ),
    "exit.meaning": _("ended with an error"),
    "worker.exit_meaning": _(
        "The container ended; its exit code and termination reason are for operators. Read "
        "its logs or ask an operator."
    ),
    "worker.completed_meaning": _("The container ended successfully."),
}

# The codes whose parameters are diagnostics, and the code of their meaning, which keeps only
# the pod's name (a Worker's exit code 0 reads "ended successfully", which is its meaning).
WITHHELD: dict[str, str] = {
    "pod.crash_loop": "pod.crash_loop_meaning",
    "pod.failed": "pod.failed_meaning",
    "pod.oom_killed": "pod.restarted_meaning",
    "exit.code": "exit.meaning",
    "exit.code_reason": "exit.meaning",
    "worker.exit.code": "worker.exit_meaning",
    "worker.exit.code_reason": "worker.exit_meaning",
}
KEPT_PARAMS = ("pod",)


def kubernetes(text: str) -> Message | str:
    """A message that is only Kubernetes' text ("" stays "": nothing to say)."""
    return Message("kubernetes", {"detail": Kube(text)}) if text else ""


def waiting_for_upstream(jobs: Sequence[str]) -> Message:
    """What a Workflow child whose upstream Jobs have not Succeeded waits for."""
    return Message("job.waiting_upstream", {"jobs": ", ".join(jobs)})


# --- storage -------------------------------------------------------------------------------


def _to_json(param: Param) -> Any:
    """The sync encodes every Task's message each cycle: the common cases are tested first."""
    kind = type(param)
    if kind is str or kind is int:
        return param
    if isinstance(param, Message):
        return {"c": param.code, "p": {k: _to_json(v) for k, v in param.params.items()}}
    if isinstance(param, Stored):
        return orjson.loads(param.text) if param.text.startswith('{"c":') else param.text
    if isinstance(param, Kube):
        return {"k": param.text}
    if isinstance(param, str | int):
        return param
    return [_to_json(item) for item in param]


def encode(message: Message | str) -> str:
    """The stored form; plain text (and "") is stored as it is."""
    if isinstance(message, str):
        return message
    return orjson.dumps(_to_json(message), option=orjson.OPT_SORT_KEYS).decode()


def _from_json(value: Any) -> Param:
    if isinstance(value, dict) and "c" in value:
        params = value.get("p") or {}
        return Message(str(value["c"]), {str(k): _from_json(v) for k, v in params.items()})
    if isinstance(value, dict):
        return Kube(str(value.get("k", "")))
    if isinstance(value, list):
        return [_from_json(item) for item in value]
    return value if isinstance(value, int) and not isinstance(value, bool) else str(value)


def decode(stored: str) -> Message | str:
    """A coded message, or the stored text itself when it is not one (older rows)."""
    if not stored.startswith('{"c":'):
        return stored
    try:
        value = orjson.loads(stored)
    except orjson.JSONDecodeError:
        return stored
    decoded = _from_json(value)
    return decoded if isinstance(decoded, Message) else stored


# --- per reader ----------------------------------------------------------------------------


def _meaning(message: Message) -> Message:
    code = WITHHELD[message.code]
    if code == "worker.exit_meaning" and message.params.get("code") == 0:
        code = "worker.completed_meaning"
    return Message(code, {k: v for k, v in message.params.items() if k in KEPT_PARAMS})


def withhold(param: Param) -> Param:
    """The message as a reader without diagnostics sees it: each code of WITHHELD, wherever it
    is nested (a Job's message holds its Tasks', which hold a pod's problem), replaced by its
    meaning. Everything else is kept as it is."""
    if isinstance(param, Stored):
        param = decode(param.text)
    if isinstance(param, Message):
        if param.code in WITHHELD:
            return _meaning(param)
        return Message(param.code, {k: withhold(v) for k, v in param.params.items()})
    if isinstance(param, str | int | Kube):
        return param
    return [withhold(item) for item in param]


def carries_diagnostics(stored: str) -> bool:
    """The message itself (not one nested in it) is one of WITHHELD: a Worker row whose message
    is its container's exit, and whose reason is then the termination reason."""
    return api_code(stored, diagnostics=True) in WITHHELD


def _for_reader(stored: str, diagnostics: bool) -> Param:
    decoded = decode(stored)
    return decoded if diagnostics else withhold(decoded)


# --- rendering -----------------------------------------------------------------------------

# Pages poll: the same stored messages are worded again every few seconds. Each process keeps
# the latest wordings per language (wordings do not change while it runs).
RENDERED = 4096


def _separator() -> str:
    return pgettext("between the parts of a message", "; ")


def _wording(message: Message, params: dict[str, Any]) -> str:
    """A code or parameters this version does not know (a row written by another version of
    the console) are shown as they are rather than failing the page."""
    template = CODES.get(message.code)
    if template is not None:
        try:
            return str(template % params)
        except (KeyError, TypeError, ValueError):
            pass
    return " ".join([conditional_escape(message.code), *(str(value) for value in params.values())])


def _text(param: Param) -> str:
    if isinstance(param, Stored):
        param = decode(param.text)
    if isinstance(param, Message):
        return _wording(param, {k: _param_text(k, v) for k, v in param.params.items()})
    if isinstance(param, Kube):
        return param.text
    if isinstance(param, str | int):
        return str(param)
    return _separator().join(_text(item) for item in param)


def _param_text(name: str, value: Param) -> Any:
    return value if name == "count" and isinstance(value, int) else _text(value)


def render_text(stored: str, diagnostics: bool = False) -> str:
    """The message in the active language, as plain text (the API, a copied record); with
    `diagnostics` for a reader who may see them."""
    return _cached_text(stored, get_language(), diagnostics)


@lru_cache(maxsize=RENDERED)
def _cached_text(stored: str, language: str | None, diagnostics: bool) -> str:
    """`language` is the cache key only: it is the active one when this runs."""
    return _text(_for_reader(stored, diagnostics))


def _html(param: Param) -> SafeString:
    if isinstance(param, Stored):
        param = decode(param.text)
    if isinstance(param, Message):
        params = {k: _param_html(k, v) for k, v in param.params.items()}
        return mark_safe(_wording(param, params))  # wordings hold no markup (tested)
    if isinstance(param, Kube):
        return format_html(
            '<span class="from-kube"><small class="kube-tag">{}</small> <q lang="en">{}</q></span>',
            gettext("from Kubernetes"),
            param.text,
        )
    if isinstance(param, str | int):
        return conditional_escape(str(param))
    return mark_safe(conditional_escape(_separator()).join(_html(item) for item in param))


def _param_html(name: str, value: Param) -> Any:
    return value if name == "count" and isinstance(value, int) else _html(value)


def render_html(stored: str, diagnostics: bool = False) -> SafeString:
    """The message in the active language for a page; Kubernetes' text marked and `lang="en"`;
    with `diagnostics` for a reader who may see them."""
    return _cached_html(stored, get_language(), diagnostics)


@lru_cache(maxsize=RENDERED)
def _cached_html(stored: str, language: str | None, diagnostics: bool) -> SafeString:
    return _html(_for_reader(stored, diagnostics))


# --- the JSON API --------------------------------------------------------------------------


def _api_param(param: Param) -> Any:
    if isinstance(param, Stored):
        param = decode(param.text)
    if isinstance(param, Message):
        return {"code": param.code, "params": {k: _api_param(v) for k, v in param.params.items()}}
    if isinstance(param, Kube):
        return {"kubernetes": param.text}
    if isinstance(param, str | int):
        return param
    return [_api_param(item) for item in param]


def api_code(stored: str, diagnostics: bool = False) -> str | None:
    """The stable code, None for plain text (an older row); a meaning's code for a reader
    without diagnostics."""
    decoded = _for_reader(stored, diagnostics)
    return decoded.code if isinstance(decoded, Message) else None


def api_params(stored: str, diagnostics: bool = False) -> dict[str, Any]:
    """The parameters: nested messages as {code, params}, Kubernetes text as {kubernetes}."""
    decoded = _for_reader(stored, diagnostics)
    if not isinstance(decoded, Message):
        return {}
    return {name: _api_param(value) for name, value in decoded.params.items()}
