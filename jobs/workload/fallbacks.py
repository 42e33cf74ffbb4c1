"""The workload's word when its code says nothing (issue 10, "Fallbacks with no code change"): a
completion JSON a container wrote to its termination message, and RLinf's progress lines in the
head pod's log. Each becomes an ordinary message recorded through `jobs.workload.report.record`,
labelled with where it was read (SignalSource).

Each is keyed like a posted message, (pod, pod UID, seq), with a negative seq: a posted one is
never negative (jobs.workload.intake), so the two never meet (docs/decisions.md, "Fallbacks:
sequence numbers"). Reading the same thing again gives the same key, a duplicate:
- a termination message: TERMINATION_SEQ + the container's run (0 for the first, then its
  restart count), the same whether read from `state` or, after a restart, `lastState`;
- a progress line: LOG_SEQ + the container's run * RUN_STRIDE + the step, so a restarted
  container that resumes from a checkpoint reports its steps again.
A message already stored is not folded again either (`unseen`): the poller re-reads a
terminated pod at every change of it and the log task re-reads the same tail every minute, and
each costs one query.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from pydantic import ValidationError

from jobs.choices import SignalSource
from jobs.models import Job, Signal
from jobs.workload.intake import Completion, Progress, SignalBase
from jobs.workload.report import Recorded, record
from jobs.workload.rlinf_logs import LogProgress

TERMINATION_SEQ = -(2**62)  # up to LOG_SEQ: 2**61 container runs
LOG_SEQ = -(2**61)  # up to 0
RUN_STRIDE = 2**32  # above any step (jobs.workload.intake: steps are below 2**31)
MAX_RUNS = 2**29 - 1  # LOG_SEQ's range holds this many container runs


def termination_seq(instance: int) -> int:
    return TERMINATION_SEQ + min(max(instance, 0), 2**61 - 1)


def log_seq(instance: int, step: int) -> int:
    return LOG_SEQ + min(max(instance, 0), MAX_RUNS) * RUN_STRIDE + step


def completion_signal(
    pod: str, uid: str, instance: int, outcome: str, exit_code: int | None, reason: str,
    message: str, at: datetime | None,
) -> Completion | None:  # fmt: skip
    """The Completion a termination message says; None when it says it out of bounds (an exit
    code beyond 32 bits). Over-long text is cut to what a posted signal may carry. Validated as
    a posted one, then given its own (negative) seq."""
    try:
        signal = Completion.model_validate({
            "kind": "completion", "pod": pod, "uid": uid, "seq": 0, "at": at,
            "outcome": outcome, "exit_code": exit_code, "reason": reason[:128] or None,
            "message": message[:1024] or None,
        })  # fmt: skip
    except ValidationError:
        return None
    return signal.model_copy(update={"seq": termination_seq(instance)})


def progress_signals(
    pod: str, uid: str, instance: int, points: Iterable[LogProgress]
) -> list[Progress]:
    """One Progress per point read from the log (the last one of a step when read twice)."""
    by_step: dict[int, Progress] = {}
    for point in points:
        try:
            signal = Progress(
                kind="progress", pod=pod, uid=uid, seq=0, at=point.at, step=point.step,
                max_steps=point.max_steps, step_seconds=point.step_seconds,
                metrics=point.metrics or None,
            )  # fmt: skip
        except ValidationError:
            continue
        by_step[point.step] = signal.model_copy(update={"seq": log_seq(instance, point.step)})
    return list(by_step.values())


def unseen(job_id: int, items: Sequence[SignalBase]) -> list[SignalBase]:
    """The messages not stored yet (one query)."""
    if not items:
        return []
    rows = Signal.objects.filter(
        job_id=job_id, uid__in={item.uid for item in items}, seq__in={item.seq for item in items}
    )
    stored = set(rows.values_list("pod", "uid", "seq"))
    return [item for item in items if (item.pod, item.uid, item.seq) not in stored]


def record_fallback(
    job: Job, run: int, items: Sequence[SignalBase], source: SignalSource
) -> Recorded | None:
    """Records what was not recorded before; None when everything was."""
    fresh = unseen(job.pk, items)
    return record(job.pk, run, fresh, source) if fresh else None
