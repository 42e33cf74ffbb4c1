"""The record of what was done to a Job: one Operation row, and the same fact in the audit trail.

Written by the users' operations (jobs.operations) and by the console itself when a Job's policy
acts (jobs.workload.report: no user then).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from console import audit
from jobs.choices import Action, JobPhase
from jobs.messages import Message, encode, render_text
from jobs.models import Job, Operation, Workflow
from jobs.status.lifecycle import TransitionRefused, phase_after_stop
from notify import record as notify_record
from notify.choices import Event

User = AbstractBaseUser | AnonymousUser
Result = Operation.Result


def owner(user: User) -> Any:
    """The user to store: None for the console itself (an anonymous user)."""
    return user if user.is_authenticated else None


def recorded_by(user: Any) -> str:
    """Who an Operation names: its user, or the console itself (a policy acted; no user)."""
    return str(user.username) if user is not None else _("the console")


def _in_english(message: Message) -> str:
    """The trail is read by operators of every language: one language, the source one."""
    with translation.override("en"):
        return render_text(encode(message))


def _audit(user: User, job: Job, action: Action, result: Result, message: Message) -> None:
    """The same fact in the audit trail, with where the request came from (console.audit)."""
    audited = audit.Result.ACCEPTED if result == Result.ACCEPTED else audit.Result.REFUSED
    audit.record(
        audit.Action(f"job.{action}"),
        user=owner(user),
        target=f"job {job.name} (#{job.pk}) in {job.project.name}",
        result=audited,
        detail=_in_english(message),
    )


def record_operation(
    user: User, job: Job, action: Action, result: Result, message: Message, *, attached: bool = True
) -> Operation:
    """`attached=False` when the Job row may be gone already: the record keeps only its name.
    The message is stored as a code (jobs.messages): each reader sees it in their language."""
    _audit(user, job, action, result, message)
    return Operation.objects.create(
        job=job if attached else None,
        job_name=job.name,
        project_id=job.project_id,
        user=owner(user),
        action=action,
        result=result,
        message=encode(message),
    )


def recount_workflow(job_id: int, now: datetime) -> None:
    """What the Job's Workflow counts of it changed where no watch sees it: its workload's
    outcome (posted or read by a fallback), a stop, a resume, a delete. A sync cycle derives a
    Workflow only with the Jobs a Kubernetes change touched, so the Workflow is marked, in the
    caller's transaction, and the next cycle of any cluster derives it and clears the mark
    (console.engine.rows.workflows_to_recount): a Workflow is up to date one cycle after
    any change of what it counts. A Job outside a Workflow marks nothing (one UPDATE)."""
    Workflow.objects.filter(jobs=job_id).update(recount_requested_at=now)


def stop_by_console(job: Job, reason: Message) -> bool:
    """A policy of the Job's stops it (stop_on_completion, stop_when_idle_minutes), so its GPUs
    are freed (spec §Job status: Pending/Running -> Stopped; a Failed Job stays Failed and
    releases what it holds). Recorded as an Operation with no user and `reason` in words, in
    the same conditional UPDATE as a user's stop (jobs.operations). Nothing happens, and nothing
    is recorded, when the Job is being deleted, already stopped, or may not be stopped."""
    for _attempt in range(5):
        row = Job.objects.filter(pk=job.pk, delete_requested_at__isnull=True)
        state = row.values_list("phase", "stopped").first()
        if state is None or state[1]:
            return False
        try:
            target = phase_after_stop(JobPhase(state[0]), False)
        except TransitionRefused:
            return False
        with transaction.atomic():
            if row.filter(phase=state[0], stopped=False).update(phase=target, stopped=True):
                now = timezone.now()
                recount_workflow(job.pk, now)
                job.refresh_from_db()
                record_operation(AnonymousUser(), job, Action.STOP, Result.ACCEPTED, reason)
                event = Event.JOB_STOPPED_BY_CONSOLE
                notify_record.job_event(job.pk, job.run, job.cluster_id, event, now)
                return True
    return False
