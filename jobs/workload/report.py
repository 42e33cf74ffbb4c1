"""A Job's workload: its messages stored and folded into one report row as they arrive, its
state derived when read (jobs.status.workload), and the policies that act on its completion.

Every source goes through `record`: signals posted by the pods (the API), a completion JSON in a
container's termination message and progress lines read from the head pod's log (the poller's
fallbacks). The fold keeps the newest message of each kind and the last step advances; it runs
under the report row's lock, so concurrent requests from many pods never lose one another's word.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import orjson
from django.db import transaction
from django.db.models import QuerySet, TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast
from django.utils import timezone

from console.statements import Statement
from jobs.choices import JobPhase, SignalSource, WorkloadState
from jobs.messages import Message
from jobs.models import Job, WorkloadReport, WorkloadSpell
from jobs.records import recount_workflow, stop_by_console
from jobs.status.spells import (
    Spell,
    ended_by_gathering,
    ended_degraded,
    ended_quiet,
    ended_stall,
)
from jobs.status.workload import (
    RECENT_STEPS,
    Policies,
    Report,
    Workload,
    degraded,
    derive,
    gathering,
    judge,
    may_turn,
)
from jobs.workload import intake
from jobs.workload.intake import COMMON, SignalBase
from notify import record as notify_record
from usage import ledger


@dataclass(frozen=True)
class Recorded:
    accepted: int
    duplicates: int
    stopped: bool  # the Job's stop_on_completion stopped it: its caller reconciles it
    ended: bool = False  # a completion came: its caller keeps the logs (console.engine.keep_logs)


def record(
    job_id: int, run: int, items: Sequence[SignalBase], source: SignalSource = SignalSource.SIGNAL
) -> Recorded:
    """Store the messages (deduplicated), fold the new ones into the report, and act on a
    completion (policy `stop_on_completion`). A duplicate changes nothing, whatever it carries
    now (jobs.workload.intake.insert): a batch of duplicates only takes no lock and writes no
    report. The insert and the fold commit together (one commit per request, the report's row lock
    taken last); the compaction, when the fold found it due, follows outside the lock. The Job
    itself is read only when a completion came (most requests carry none)."""
    now = timezone.now()
    with transaction.atomic():
        accepted = intake.insert(job_id, run, items, source, now)
        folded = fold(job_id, run, accepted, source, now) if accepted else Folded("", False)
        if folded.outcome:  # workload.succeeded / failed, with the report that says so
            notify_record.workload_completed(job_id, now)
    if folded.compact:
        intake.compact(job_id, run, now)
    stopped = False
    job = Job.objects.filter(pk=job_id).first() if folded.outcome else None
    if job is not None and run == job.run and Policies.of(job.spec).stop_on_completion:
        stopped = stop_on_completion(job, folded.outcome)
    stopped = ledger.after_signal(job_id, folded.before, now) or stopped  # GPU-hours, idle policy
    return Recorded(len(accepted), len(items) - len(accepted), stopped, bool(folded.outcome))


def stop_on_completion(job: Job, outcome: str) -> bool:
    """Policy `stop_on_completion`: the console itself stops a Job whose workload reported its
    completion, so its GPUs are freed (jobs.records.stop_by_console)."""
    reason = Message("operation.stopped_on_completion", {"outcome": outcome})
    return stop_by_console(job, reason)


# --- the fold ----------------------------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _entry(item: SignalBase, source: SignalSource, now: datetime) -> dict[str, Any]:
    fields = item.model_dump(mode="json", exclude_none=True)
    entry = {key: value for key, value in fields.items() if key not in COMMON}
    at = item.at or now
    stamp = {"pod": item.pod, "at": _iso(at), "received_at": _iso(now), "source": source}
    return entry | stamp | {"kind": getattr(item, "kind", "")}


@dataclass(frozen=True)
class Folded:
    outcome: str  # the completion outcome the messages carried, else ""
    compact: bool  # the run's signals are due for compaction (jobs.workload.intake.compact)
    before: Report | None = None  # the report as it was until these messages (usage.ledger)


def fold(
    job_id: int, run: int, items: Iterable[SignalBase], source: SignalSource, now: datetime
) -> Folded:
    """Fold messages into the Job's report. Part of the caller's transaction when there is one
    (no savepoint). The report row also says when the run's signals were last compacted: the
    fold that finds that a minute ago marks it now, so of all the requests of every web
    process, one a minute per Job compacts."""
    with transaction.atomic(savepoint=False):
        report = _locked_report(job_id, run, now)
        if report.run > run:  # a late word from an earlier run: the report is the current one's
            return Folded("", compact=False)
        before = _rarely_changed(report)
        previous = _report_before(report)
        new_run = report.run < run
        if new_run:
            report.run, report.first_received_at, report.outcome = run, now, ""
            report.latest, report.steps = {}, []
            report.policies = _job_policies(job_id)
        policies = Policies.of({"policies": report.policies})
        quiet = None if new_run else ended_quiet(report.last_received_at, now, policies)
        spells = [quiet] if quiet else []
        outcome = ""
        kinds: list[str] = []
        for item in sorted(items, key=lambda item: item.at or now):
            entry = _entry(item, source, now)
            kinds.append(entry["kind"])
            spells += _ended_by(report, entry, policies, now, quiet)
            outcome = _fold_one(report, entry, item.at or now) or outcome
        _record_spells(job_id, run, spells)
        if may_turn(kinds, bool(spells), new_run or previous is None):  # judged next cycle
            notify_record.mark_due([job_id])
        report.last_received_at = max(report.last_received_at, now)
        compact = report.compacted_at is None or now - report.compacted_at >= intake.COMPACT_EVERY
        if compact:
            report.compacted_at = now
        after = _rarely_changed(report)
        changed = [name for name in RARELY_CHANGED if before[name] != after[name]]
        report.save(update_fields=["latest", "last_received_at", *changed])  # 1/6 of a whole save
        if "outcome" in changed:  # what the Job's Workflow counts of it (counted_children)
            recount_workflow(job_id, now)
    return Folded(outcome, compact, previous)


def _report_before(report: WorkloadReport) -> Report | None:
    """The report before the fold changes it in place (its messages copied); None when new."""
    if not report.latest:
        return None
    latest = {kind: dict(entry) for kind, entry in report.latest.items()}
    return Report(
        report.run, report.first_received_at, report.last_received_at, latest, list(report.steps)
    )


RARELY_CHANGED = ("run", "first_received_at", "steps", "outcome", "compacted_at", "policies")


def _rarely_changed(report: WorkloadReport) -> dict[str, Any]:
    """What most messages leave as it was (a copy, as the fold changes the steps in place)."""
    return {name: copy.copy(getattr(report, name)) for name in RARELY_CHANGED}


def _locked_report(job_id: int, run: int, now: datetime) -> WorkloadReport:
    """The Job's report row, locked until the transaction ends; created on the first message
    (ignoring a concurrent creation, then locking the row that won)."""
    found = _LOCKED_REPORT.first(job_id)
    if found is None:
        blank = WorkloadReport(
            job_id=job_id, run=run, first_received_at=now, last_received_at=now,
            compacted_at=now, policies=_job_policies(job_id),
        )  # fmt: skip
        WorkloadReport.objects.bulk_create([blank], ignore_conflicts=True)
        found = _LOCKED_REPORT.first(job_id)
    return WorkloadReport.from_db("default", _REPORT_FIELDS, found)


_REPORT_FIELDS = [field.attname for field in WorkloadReport._meta.concrete_fields]
_LOCKED_REPORT = Statement(
    lambda job_id: (
        WorkloadReport.objects.select_for_update()
        .filter(job_id=job_id)
        .values_list(*_REPORT_FIELDS)
    ),
    int,
)


def _job_policies(job_id: int) -> dict[str, Any]:
    """The Job's workload policies as its spec gives them (read once per run)."""
    spec = Job.objects.filter(pk=job_id).values_list("spec", flat=True).first() or {}
    return dict(spec.get("policies") or {})


def _ended_by(
    report: WorkloadReport,
    entry: dict[str, Any],
    policies: Policies,
    now: datetime,
    quiet: Spell | None,
) -> list[Spell]:
    """The spells this message ends, judged before it is folded (jobs.status.spells): a step
    advance ends a stall, a Ray report with every node alive ends a degradation (and a
    degraded one keeps when the degradation began). While the workload gathers its Ray nodes a
    Ray report does neither: fewer nodes alive then is its wait (jobs.status.workload), and the
    phase that says it gathers them again ends a degradation."""
    kind, latest = entry["kind"], report.latest
    previous = latest.get(kind)
    if previous is not None and previous["at"] > entry["at"]:
        return []  # a late message: folded as nothing, ends nothing
    if kind == "progress" and previous is not None and previous["step"] != entry["step"]:
        until = quiet.started_at if quiet else None
        stall = ended_stall(_as_report(report), policies, now, until)
        return [stall] if stall else []
    if kind == "phase":
        ended = ended_by_gathering(latest, entry, now)
        return [ended] if ended else []
    if kind == "ray" and gathering(latest):
        return []  # its wait for its nodes: Starting, not Degraded (judge's order)
    if kind == "ray":
        if degraded(entry):
            kept = previous.get("degraded_since") if previous and degraded(previous) else None
            entry["degraded_since"] = kept or entry["received_at"]
        ended = ended_degraded(previous, entry, now)
        return [ended] if ended else []
    return []


def _record_spells(job_id: int, run: int, spells: Sequence[Spell]) -> None:
    if spells:
        WorkloadSpell.objects.bulk_create(
            WorkloadSpell(
                job_id=job_id, run=run, state=spell.state, started_at=spell.started_at,
                ended_at=spell.ended_at,
            )
            for spell in spells
            if spell.ended_at is not None
        )  # fmt: skip


def _fold_one(report: WorkloadReport, entry: dict[str, Any], at: datetime) -> str:
    """Keep `entry` when it is the newest of its kind; the outcome when it is a completion."""
    kind = entry.pop("kind")
    latest: dict[str, Any] = report.latest
    previous = latest.get(kind)
    if previous is not None and previous["at"] > entry["at"]:
        return ""  # an older message arriving late changes nothing
    if kind == "progress":
        _advance(report, previous, entry, at)
    if kind == "phase" and entry["phase"] == "starting":
        # A new attempt began (a re-created or restarted process): an earlier completion is over.
        completion = latest.get("completion")
        if completion is not None and completion["at"] < entry["at"]:
            latest.pop("completion")
            report.outcome = ""
    latest[kind] = entry
    if kind == "completion":
        report.outcome = entry["outcome"]
        return str(entry["outcome"])
    return ""


def _advance(
    report: WorkloadReport, previous: Mapping[str, Any] | None, entry: dict[str, Any], at: datetime
) -> None:
    """A step that moved is an advance: remember when it was received (the stall clock) and
    where it stands (the step time). A step that went back (a restart from a checkpoint)
    starts the history again."""
    step = entry["step"]
    if previous is not None and previous["step"] == step:
        entry["advanced_at"] = previous.get("advanced_at", previous["received_at"])
        return
    entry["advanced_at"] = entry["received_at"]
    steps: list[list[Any]] = report.steps
    if previous is not None and step < previous["step"]:
        steps.clear()
    steps.append([at.timestamp(), step])
    del steps[:-RECENT_STEPS]


# --- reading -----------------------------------------------------------------------------------

REPORT_FIELDS = ("run", "first_received_at", "last_received_at", "latest", "steps")


def report_of(row: WorkloadReport | None) -> Report | None:
    return None if row is None else _as_report(row)


def _as_report(row: WorkloadReport) -> Report:
    return Report(**{name: getattr(row, name) for name in REPORT_FIELDS})


# What `with_workload` reads of a Job's spec: its policies only (a list leaves the spec out).
POLICIES = "workload_policies"
# The report's fields a list selects with the Job (`.only(*REPORT_ONLY)` beside its own).
REPORT_ONLY = tuple(f"workload__{name}" for name in REPORT_FIELDS)


def workload_of(job: Job, now: datetime | None = None) -> Workload:
    """The Job's workload state (one query unless the report was selected with the Job)."""
    try:
        row = job.workload
    except WorkloadReport.DoesNotExist:
        row = None
    spec = {"policies": getattr(job, POLICIES)} if hasattr(job, POLICIES) else job.spec
    return derive(
        report_of(row), JobPhase(job.phase), job.run, Policies.of(spec), now or timezone.now()
    )


def workload_states(
    jobs: QuerySet[Job], now: datetime
) -> Iterator[tuple[int, WorkloadState, Message]]:
    """Each Job's pk with its workload state and why (jobs.status.workload.judge: the state
    without the facts shown beside it): what a page judging hundreds of Jobs needs."""
    for (pk, phase, run), report, policies in reports_of(jobs, "pk", "phase", "run"):
        state, _kind, reason = judge(report, JobPhase(phase), run, policies, now)
        yield pk, state, reason


def reports_of(
    jobs: QuerySet[Job], *fields: str
) -> Iterator[tuple[tuple[Any, ...], Report | None, Policies]]:
    """Each Job's `fields` with its workload report and policies, from one query of values,
    without building a Job and a report object for each."""
    return reports_in(report_rows(jobs, *fields), len(fields))


def report_rows(jobs: QuerySet[Job], *fields: str) -> QuerySet[Job, tuple[Any, ...]]:
    """The query of `reports_of` (for a console.statements.Statement, compiled once): the
    report's two JSON columns and the Job's policies come as text and orjson decodes them (the
    JSONField's json.loads took 5 of the dashboard's 50 ms of CPU at 500 live Jobs)."""
    texts = {f"{name}_text": Cast(f"workload__{name}", TextField()) for name in ("latest", "steps")}
    texts[POLICIES] = Cast(KeyTransform("policies", "spec"), TextField())
    return jobs.annotate(**texts).values_list(
        *fields, POLICIES, "workload__run", "workload__first_received_at",
        "workload__last_received_at", "latest_text", "steps_text",
    )  # fmt: skip


def reports_in(
    rows: Iterable[Sequence[Any]], width: int
) -> Iterator[tuple[tuple[Any, ...], Report | None, Policies]]:
    """The rows of `report_rows` with `width` fields of their own, each with its report and
    policies."""
    for row in rows:
        policies, report_run, first, last, latest, steps = row[width:]
        report = None
        if report_run is not None:
            report = Report(report_run, first, last, orjson.loads(latest), orjson.loads(steps))
        yield tuple(row[:width]), report, _policies_in(policies)


@lru_cache(maxsize=256)
def _policies_in(text: str | None) -> Policies:
    """A spec's policies from their JSON text: most Jobs share a few, read once each."""
    return Policies.of({"policies": orjson.loads(text) if text else None})


def with_workload(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """The Jobs with their report joined and their policies read out of their spec, so a list
    derives every state without a query each, and without reading whole specs."""
    return jobs.select_related("workload").annotate(**_policies())


def _policies() -> dict[str, KeyTransform]:
    """The Job's policies read out of its spec by the database, as the annotation POLICIES."""
    return {POLICIES: KeyTransform("policies", "spec")}


# --- one description for the page, the fragment and the API ------------------------------------


def _stamped(entry: Mapping[str, Any] | None, *keys: str) -> dict[str, Any] | None:
    """Some fields of a kept message, with when it was reported and where it came from."""
    if not entry:
        return None
    shown = {key: entry.get(key) for key in keys}
    return shown | {"reported_at": entry.get("at"), "source": entry.get("source")}


def describe(workload: Workload, now: datetime) -> dict[str, Any]:
    """The workload as the API's `workload` object gives it (and as the Workload panel shows it)."""
    ray = workload.ray
    eta = workload.eta_seconds
    return {
        "state": workload.state,
        "source": workload.source,
        "reported_at": workload.reported_at,
        "reason": workload.reason,
        "phase": workload.phase,
        "step": workload.step,
        "max_steps": workload.max_steps,
        "step_seconds": workload.step_seconds,
        "eta": now + timedelta(seconds=eta) if eta is not None else None,
        "metrics": dict(workload.metrics),
        "last_heartbeat_at": workload.last_heartbeat_at,
        "last_message_at": workload.last_message_at,
        "stall_after_seconds": workload.stall_after_seconds,
        "last_checkpoint": _stamped(workload.last_checkpoint, "step", "path"),
        "ray": (
            {"expected": ray.get("expected_nodes"), "alive": ray.get("alive_nodes")}
            | (_stamped(ray, "gpus") or {})
            if ray
            else None
        ),
        "completion": _stamped(workload.completion, "outcome", "exit_code", "reason", "message"),
    }
