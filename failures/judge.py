"""The first error of a Job's run, judged from its kept logs and stored as its Finding; and the
one description of a Finding that the job page's banner, the dashboard, the Jobs list and the
API give (issue 34, item 5)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import translation
from django.utils.translation import gettext

from failures import store
from failures.models import Finding, KeptLog, Signature
from jobs.choices import FailureClass, JobPhase
from jobs.models import Job
from jobs.status import failure
from workers.models import PodInstance

# Kubernetes' reasons a pod instance may carry, the most telling first.
REASONS = ("OOMKilled", "Evicted", "DeadlineExceeded", "ImagePullBackOff", "ErrImagePull")


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
    """The Job's current run judged again from everything kept of it; None (and nothing stored)
    when neither its logs nor Kubernetes name anything."""
    job = Job.objects.get(pk=job_id)
    kept = list(KeptLog.objects.filter(job=job, run=job.run).order_by("last_line_at", "kept_at"))
    logs = [failure.KeptLog(k.pod_name, k.container, k.attempt, store.read(k)) for k in kept]
    found = failure.first_error(logs, signatures())
    if found is not None:
        log = next(k for k in kept if (k.pod_name, k.attempt) == (found.pod, found.attempt))
        return _store(job, now, _from_logs(found, log))
    reason = _kubernetes_reason(job)
    if reason is None:
        return None
    return _store(job, now, reason)


def _from_logs(found: failure.Finding, kept: KeptLog) -> dict[str, Any]:
    label, failure_class, _ = failure.summary(found)
    return {
        "code": found.signature.code if found.signature else "", "label": str(label)[:200],
        "failure_class": failure_class, "first_error": found.line,
        "raised_at": found.raised_at or "", "pod_name": found.pod,
        "container": found.container, "attempt": found.attempt,
        "line_number": found.line_number, "at": found.at or kept.last_line_at,
        "kept_log": kept, "consequence": found.consequence,
    }  # fmt: skip


def _kubernetes_reason(job: Job) -> dict[str, Any] | None:
    instances = PodInstance.objects.filter(task__job=job, termination_reason__in=REASONS)
    for reason in REASONS:
        instance = next((i for i in instances if i.termination_reason == reason), None)
        sig = failure.for_reason(reason)
        if instance is not None and sig is not None:
            return {
                "code": sig.code, "label": str(sig.label), "failure_class": sig.failure_class,
                "first_error": "", "raised_at": "", "pod_name": instance.pod_name,
                "container": "", "attempt": instance.restart_count, "line_number": None,
                "at": instance.last_seen_at, "kept_log": None, "consequence": False,
            }  # fmt: skip
    return None


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
