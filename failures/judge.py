"""The first error of a Job's run, judged from its kept logs and stored as its Finding; and the
one description of a Finding that the job page's banner, the dashboard, the Jobs list and the
API give (issue 34, item 5)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.utils import translation
from django.utils.translation import gettext

from failures import store
from failures.models import Finding, KeptLog, Signature
from jobs.choices import FailureClass, JobPhase
from jobs.messages import Message, decode
from jobs.models import Job, Task, WorkloadReport
from jobs.status import failure
from workers.models import PodInstance, Worker

# Kubernetes' reasons, the most telling first (OOMKilled, Evicted, DeadlineExceeded, ImagePull).
REASONS = tuple(reason for sig in failure.KUBERNETES for reason in sig.pattern.split("|"))


def signatures() -> list[failure.Signature]:
    """Operators' enabled signatures first, then the shipped ones."""
    own = [
        failure.Signature(
            s.code, s.label, FailureClass(s.failure_class), s.pattern, s.advice, s.consequence
        )
        for s in Signature.objects.filter(enabled=True)
    ]
    return [*own, *failure.SIGNATURES]


def judge(job_id: int, now: datetime) -> Finding | None:
    """The Job's current run judged again; None (and nothing stored) when nothing names a
    failure. In this order: a cause its kept logs name; a cause the workload reported in its
    failed completion (the driver's RayNodesTimeout is said there); Kubernetes' reason (a
    container OOMKilled, a pod Evicted or past its deadline, an image that cannot be pulled);
    last, a consequence the logs name (what followed a failure no one named)."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None:  # deleted since
        return None
    kept = {k.pk: k for k in KeptLog.objects.filter(job=job, run=job.run)}
    ordered = sorted(kept.values(), key=lambda k: (_moment(k.last_line_at), _moment(k.kept_at)))
    logs = [failure.KeptLog(k.pod_name, k.container, k.attempt, store.read(k), k.pk)
            for k in ordered]  # fmt: skip
    found = failure.first_error(logs, signatures())
    from_logs = None if found is None else _from_logs(found, kept)
    if found is not None and from_logs is not None and not found.consequence:
        return _store(job, now, from_logs)
    fields = _reported(job) or _kubernetes_reason(job) or from_logs
    if fields is None:
        _withdraw_passing(job)
        return None
    return _store(job, now, fields)


def _moment(at: datetime | None) -> datetime:
    return at or datetime.min.replace(tzinfo=UTC)


def _from_logs(found: failure.Finding, logs: Mapping[int, KeptLog]) -> dict[str, Any]:
    """The Finding's fields, its kept log the one it was found in (by its row, never by its
    pod's name: a pod re-created under the same name starts again at attempt 0)."""
    kept = logs[found.log_key] if found.log_key is not None else None
    label, failure_class, _ = failure.summary(found)
    return {
        "code": found.signature.code if found.signature else "", "label": str(label)[:200],
        "failure_class": failure_class, "first_error": found.line,
        "raised_at": found.raised_at or "", "pod_name": found.pod,
        "container": found.container, "attempt": found.attempt,
        "line_number": found.line_number,
        "at": found.at or (kept.last_line_at if kept else None),
        "kept_log": kept, "consequence": found.consequence,
    }  # fmt: skip


def _reported(job: Job) -> dict[str, Any] | None:
    """The cause the workload gave in its failed completion (its reason and message, judged as a
    log), when it names one: the driver's "Ray has 1 of 2 expected nodes alive" is said only
    there and on its own log."""
    report = WorkloadReport.objects.filter(job=job, run=job.run).first()
    completion = report.latest.get("completion") if report else None
    if not completion or completion.get("outcome") != "failed":
        return None
    said = [str(completion.get(key) or "") for key in ("reason", "message")]
    text = "\n".join(part for part in said if part)
    found = failure.first_error([failure.KeptLog("", "", 0, text)], signatures())
    if found is None or found.consequence:
        return None
    label, failure_class, _ = failure.summary(found)
    at = completion.get("at")
    return {
        "code": found.signature.code if found.signature else "", "label": str(label)[:200],
        "failure_class": failure_class, "first_error": found.line,
        "raised_at": found.raised_at or "", "pod_name": str(completion.get("pod") or ""),
        "container": "", "attempt": None, "line_number": None,
        "at": datetime.fromisoformat(at) if at else None, "kept_log": None,
        "consequence": False,
    }  # fmt: skip


def _kubernetes_reason(job: Job) -> dict[str, Any] | None:
    """The most telling reason Kubernetes gives of the Job's pods and Tasks: a container's
    termination reason (the pod instance's, kept after the pod), a pod's own reason or the
    reason its container waits on (its Worker row's, as jobs.status.problems gives it), and a
    batch Job's Failed condition (DeadlineExceeded: its activeDeadlineSeconds passed)."""
    seen = [*_instance_reasons(job), *_worker_reasons(job), *_task_reasons(job)]
    for reason in REASONS:
        said = next((s for s in seen if s.reason == reason), None)
        sig = failure.for_reason(reason)
        if said is not None and sig is not None:
            return {
                "code": sig.code, "label": str(sig.label), "failure_class": sig.failure_class,
                "first_error": "", "raised_at": "", "pod_name": said.pod_name,
                "container": "", "attempt": said.attempt, "line_number": None,
                "at": said.at, "kept_log": None, "consequence": False,
            }  # fmt: skip
    return None


@dataclass(frozen=True)
class _Said:
    reason: str
    pod_name: str  # a batch Job's condition: the Task's name
    attempt: int | None
    at: datetime | None


def _instance_reasons(job: Job) -> list[_Said]:
    rows = PodInstance.objects.filter(task__job=job, termination_reason__in=REASONS)
    return [_Said(i.termination_reason, i.pod_name, i.restart_count, i.last_seen_at) for i in rows]


def _worker_reasons(job: Job) -> list[_Said]:
    rows = Worker.objects.filter(task__job=job, reason__in=REASONS)
    return [_Said(w.reason, w.pod_name, w.restart_count, w.last_reported_at) for w in rows]


def _task_reasons(job: Job) -> list[_Said]:
    """A batch Job's Failed condition reason, as the Task's message keeps it
    (jobs.status.observed: `task.batch_finished_reason`, alone or as a problem's progress)."""
    said = []
    for task in Task.objects.filter(job=job).select_related("job"):
        message = decode(task.message)
        if isinstance(message, Message) and message.code == "task.with_problem":
            message = message.params.get("progress")  # type: ignore[assignment]
        if isinstance(message, Message) and message.code == "task.batch_finished_reason":
            reason = str(message.params.get("reason", ""))
            said.append(_Said(reason, task.name, None, task.observed_at))
    return said


# Findings of a state that passes: a container waiting on its image pulls it at last.
PASSING = frozenset({"image_pull"})


def _withdraw_passing(job: Job) -> None:
    """The run's Finding withdrawn when it named a state that no longer holds (an image that
    could not be pulled, now pulled), nothing else naming a failure."""
    Finding.objects.filter(job=job, run=job.run, code__in=PASSING).delete()


def _store(job: Job, now: datetime, fields: dict[str, Any]) -> Finding:
    finding, _ = Finding.objects.update_or_create(
        job=job, run=job.run, defaults={**fields, "judged_at": now}
    )
    return finding


# --- one description for the page, the fragment and the API ------------------------------------


def current(job: Job) -> Finding | None:
    """The Finding the pages and the API name for a Job: its current run's, unless the Job
    Succeeded (a run that ended well has no failure to name, whatever its logs held). Reads
    `job.findings` through `.all()`, so a prefetch serves a list."""
    return next((f for f in job.findings.all() if _names(job, f)), None)


def current_of(jobs: Iterable[Job]) -> dict[int, Finding]:
    """`current` for a page of Jobs (each needs its `phase` and `run`), in one query."""
    shown = {job.pk: job for job in jobs if job.phase != JobPhase.SUCCEEDED}
    found = Finding.objects.filter(job_id__in=list(shown))
    return {f.job_id: f for f in found if _names(shown[f.job_id], f)}


def _names(job: Job, finding: Finding) -> bool:
    return job.phase != JobPhase.SUCCEEDED and finding.run == job.run


@dataclass(frozen=True)
class Words:
    label: str
    failure_class: str
    advice: str


def words(finding: Finding, own: Mapping[str, Signature] | None = None) -> Words:
    """The label, class and advice in the active language: a shipped signature's translated, an
    operator's in the language they wrote it in, a traceback no signature knows by its exception.
    `own`: the operators' signatures by code, read once for a list (`own_signatures`)."""
    shipped = {sig.code: sig for sig in (*failure.SIGNATURES, *failure.KUBERNETES)}
    chinese = translation.get_language() in ("zh-hans", "zh-cn")
    klass = str(FailureClass(finding.failure_class).label)
    if finding.code in shipped:
        sig = shipped[finding.code]
        return Words(str(sig.label), klass, str(sig.advice))
    mine = (own if own is not None else own_signatures([finding])).get(finding.code)
    if mine is not None:
        label = mine.label_zh if chinese and mine.label_zh else mine.label
        advice = mine.advice_zh if chinese and mine.advice_zh else mine.advice
        return Words(label, klass, advice)
    return Words(finding.label, klass, str(failure.USER_CODE_ADVICE))


def own_signatures(findings: Iterable[Finding]) -> dict[str, Signature]:
    """The operators' signatures these findings name, by code, in one query (none when every
    finding names a shipped signature or none)."""
    codes = {f.code for f in findings if f.code} - SHIPPED_CODES
    return {s.code: s for s in Signature.objects.filter(code__in=codes)} if codes else {}


SHIPPED_CODES = frozenset(sig.code for sig in (*failure.SIGNATURES, *failure.KUBERNETES))


def short(finding: Finding, own: Mapping[str, Signature] | None = None) -> str:
    """The short label of the Jobs list and the dashboard: "NCCL timeout (network/collective)"."""
    said = words(finding, own)
    return gettext("%(label)s (%(class)s)") % {"label": said.label, "class": said.failure_class}


def describe(finding: Finding | None, diagnostics: bool) -> dict[str, Any] | None:
    """The API's `failure` object. The log line itself and where it was raised follow the
    diagnostics rule (members see the label, class, advice, pod and time)."""
    if finding is None:
        return None
    said = words(finding)
    return {
        "label": said.label, "class": finding.failure_class, "advice": said.advice,
        "first_error": finding.first_error if diagnostics else None,
        "raised_at": (finding.raised_at or None) if diagnostics else None,
        "pod": finding.pod_name or None,
        "container": finding.container or None, "attempt": finding.attempt,
        "at": finding.at, "consequence": finding.consequence,
    }  # fmt: skip
