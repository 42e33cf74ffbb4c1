"""The idle policy `stop_when_idle_minutes`: a Job whose workload has been Stalled, Unresponsive
or finished-but-held for that long is stopped by the console, as `stop_on_completion` does (an
Operation with no user, the reason in words, audited: jobs.records.stop_by_console).

Judged where a run's class is judged (usage.ledger: the sync cycle, for the runs due, and
signal intake), so it acts within one sync cycle of its time running out. Never on Silent (a run
that never signalled is not judged idle: jobs.status.workload.idle_since), never on a Job whose
own policy sets it off (0).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.utils import formats

from jobs.choices import WorkloadState
from jobs.messages import Message
from jobs.models import Job
from jobs.records import stop_by_console
from jobs.status.usage import stop_at
from jobs.status.workload import idle_since, judge
from usage.runs import Run


def due_stop(run: Run, now: datetime) -> datetime | None:
    """When the idle policy stops the run if nothing arrives (None: it will not)."""
    if run.idle_minutes is None or run.stopped:
        return None
    since = idle_since(run.report, run.phase, run.run, run.policies, now)
    return stop_at(since, run.idle_minutes)


def stop_if_idle(runs: Iterable[Run], now: datetime) -> int:
    """Stops the runs whose idle time ran out; returns how many were stopped."""
    stopped = 0
    for run in runs:
        moment = due_stop(run, now)
        if moment is None or moment > now:
            continue
        job = Job.objects.select_related("project").filter(pk=run.job_id).first()
        if job is None or job.run != run.run:
            continue
        state = judge(run.report, run.phase, run.run, run.policies, now)[0]
        since = idle_since(run.report, run.phase, run.run, run.policies, now) or now
        reason = Message(
            "operation.stopped_when_idle",
            {"state": _state_word(state), "minutes": run.idle_minutes or 0,
             "since": formats.date_format(since, "Y-m-d H:i:s e")},
        )  # fmt: skip
        stopped += stop_by_console(job, reason)
    return stopped


def _state_word(state: WorkloadState) -> str:
    """The state as the reason names it: completion reads as finished (the issue's word)."""
    return "finished" if state in (WorkloadState.SUCCEEDED, WorkloadState.FAILED) else str(state)
