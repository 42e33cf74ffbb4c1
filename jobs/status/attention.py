"""Why a Job needs a look on the dashboard, most telling first (pure: facts in, reasons out).

Spec §Troubleshooting orders the search: the Task layer, then the cluster and workload, then the
Pods. The dashboard says so in that order: a failure nobody looked at, the known problems in the
troubleshooting panel's words (`jobs.status.troubleshoot`), else how long the Job has been
Pending, then how old what is shown is. `jobs.problem_facts` gathers the facts for many Jobs at
once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from jobs.choices import WORKLOAD_ATTENTION, JobPhase, Problem, WorkloadState
from jobs.messages import Message, encode, render_text
from jobs.status.freshness import Freshness
from jobs.status.troubleshoot import Diagnosis, FindingGroup

# A Job Pending for longer than this (since it was created or last resumed) is listed as stuck.
STUCK_PENDING_AFTER = timedelta(minutes=10)
LIVE_PHASES = (JobPhase.PENDING, JobPhase.RUNNING, JobPhase.STOPPED)
# The dashboard words the freshness of each Job itself; the cluster's own findings would repeat it.
CLUSTER_PROBLEMS = frozenset({Problem.CLUSTER_UNREACHABLE, Problem.CLUSTER_STALE})


@dataclass(frozen=True)
class Reason:
    """One line of "why it needs a look": words, and a fact quoted as observed (may be empty)."""

    text: str
    detail: str = ""
    # A stale status: the moment it was last observed, worded as an age by the page that shows
    # it (console.web.age_words_in_steps): a status rule returns moments, pages word them.
    stale_since: datetime | None = None


@dataclass(frozen=True)
class JobFacts:
    phase: str
    pending_since: datetime
    freshness: Freshness
    cluster: str
    cluster_reachable: bool


def workload_reason(state: WorkloadState, reason: Message | None) -> Reason | None:
    """A workload that is Stalled, Unresponsive, Degraded or reported its failure (issue 10):
    its state and why, in the job page's Workload panel's words. The seconds it counts go in
    steps of 10, as the dashboard's ages do, so its poll re-renders only when they moved on."""
    if state not in WORKLOAD_ATTENTION:
        return None
    seconds = reason.params.get("seconds") if reason else None
    if reason is not None and isinstance(seconds, int):
        reason = Message(reason.code, {**reason.params, "seconds": seconds // 10 * 10})
    why = render_text(encode(reason)) if reason else ""
    return Reason(_("Workload %(state)s: %(reason)s") % {"state": state, "reason": why})


def attention_reasons(
    job: JobFacts, problems: Iterable[Reason], now: datetime, workload: Reason | None = None
) -> list[Reason]:
    """Why a Job needs a look, most telling first (spec §Troubleshooting: the Task layer, then the
    cluster and workload, then the Pods): what its workload says when that needs a look, a
    failure nobody looked at, the known problems in the panel's words, else how long it has
    been Pending, then how old what is shown is."""
    reasons = []
    if job.phase == JobPhase.FAILED:
        reasons.append(Reason(_("Failed, and no member of the project has opened it since: save "
                                "its logs and outputs, fix the spec, then clone it.")))  # fmt: skip
    reasons += problems
    if (
        not reasons
        and job.phase == JobPhase.PENDING
        and now - job.pending_since > STUCK_PENDING_AFTER
    ):
        reasons.append(Reason(_stuck_reason(now - job.pending_since)))
    if job.phase in LIVE_PHASES:
        reasons += _freshness_reasons(job)
    return [workload, *reasons] if workload else reasons


def _freshness_reasons(job: JobFacts) -> list[Reason]:
    if not job.cluster_reachable:
        text = _("Cluster %(cluster)s is unreachable: the status shown is the last one observed.")
        return [Reason(text % {"cluster": job.cluster})]
    if job.freshness.stale and job.freshness.observed_at is None:
        return [Reason(_("No sync has observed this job yet."))]
    if job.freshness.stale:
        return [Reason("", stale_since=job.freshness.observed_at)]
    return []


def _stuck_reason(pending_for: timedelta) -> str:
    minutes = int(pending_for.total_seconds() // 60)
    return ngettext(
        "Pending for %(count)d minute: look at its tasks' messages, node selection and the "
        "cluster's capacity.",
        "Pending for %(count)d minutes: look at its tasks' messages, node selection and the "
        "cluster's capacity.",
        minutes,
    ) % {"count": minutes}


def problem_reasons(diagnosis: Diagnosis) -> tuple[Reason, ...]:
    """The panel's findings, one line per problem and layer, the cluster's own left out."""
    groups = (group for check in diagnosis.layers for group in check.groups)
    return tuple(_line(group) for group in groups if group.problem not in CLUSTER_PROBLEMS)


def _line(group: FindingGroup) -> Reason:
    """The panel's words: "<label>: <subjects> and N more", and its first detail."""
    text = f"{group.problem.label}: {', '.join(group.shown)}"
    if group.more:
        more = ngettext("and %(more)s more", "and %(more)s more", group.more)
        text += " " + more % {"more": group.more}
    return Reason(text, group.details[0] if group.details else "")
