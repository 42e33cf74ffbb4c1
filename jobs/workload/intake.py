"""Signals: what a Job's workload says about itself, posted by its pods to
`POST /api/v1/jobs/{id}/signals` (docs/api.md, "Signals").

A pod proves which Job it belongs to with `TRAINYARD_SIGNAL_TOKEN`, an HMAC of the Job's id and
run under the console's secret key: the same value on every reconcile (the plan stays
deterministic), a new one on every resume, nothing to look up and nothing stored in plain.
Messages are validated per kind; (pod, uid, seq) is unique, so a resent message is counted once
and, whatever it carries, changes nothing (an insert that ignores conflicts and returns the keys
that went in, safe under concurrency; only those are folded). Old heartbeats and Ray reports are
compacted to the latest per pod UID, progress is thinned to a bounded number of points per Job
run keeping every bucket's extremes (jobs.downsample), and the other kinds keep their latest
few, at most once a minute per Job run (decided under the Job report's row lock, so for every
web process together): over a 3-day run the table stays bounded and most requests compact
nothing: one INSERT, then the fold into the Job's report (jobs.workload.report), in one transaction.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from django.conf import settings
from django.core.cache import cache
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.constants import OnConflict
from django.utils import timezone
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, RootModel, TypeAdapter

from jobs.downsample import thin_rows
from jobs.models import Signal, WorkloadSpell
from jobs.workload import overview

MAX_BATCH = 100
MAX_METRICS = 32
KEEP_LATEST = 100  # phase, checkpoint and completion messages kept per Job run
LATEST_ONLY = ("heartbeat", "ray")  # only the newest per pod UID matters
KEEP_LATEST_KINDS = ("phase", "checkpoint", "completion")
KEEP_SPELLS = 500  # Stalled / Unresponsive / Degraded spells kept per Job run (the newest)

# --- the token ---------------------------------------------------------------------------------


def _mac(job_id: int, run: int) -> str:
    key = settings.SECRET_KEY.encode()
    digest = hmac.new(key, f"trainyard-signal:{job_id}:{run}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def signal_token(job_id: int, run: int) -> str:
    """The token of one run of one Job; it names them, so a check needs no query."""
    return f"{job_id}.{run}.{_mac(job_id, run)}"


def token_owner(token: str) -> tuple[int, int] | None:
    """(job id, run) of a genuine token; None for anything else."""
    parts = token.split(".")
    if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    job_id, run = int(parts[0]), int(parts[1])
    if job_id > 2**63 - 1 or run > 2**31 - 1:
        return None
    return (job_id, run) if hmac.compare_digest(parts[2], _mac(job_id, run)) else None


def signal_url(job_id: int) -> str:
    """Where a Job's pods post; "" when the console has no public URL (docs/decisions.md)."""
    base = settings.TRAINYARD_PUBLIC_URL
    return f"{base}/api/v1/jobs/{job_id}/signals" if base else ""


# --- the messages ------------------------------------------------------------------------------

Name = Annotated[str, Field(min_length=1, max_length=253)]
Text = Annotated[str, Field(max_length=1024)]
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]


class SignalBase(BaseModel):
    """What every message carries: which pod (and which life of it: its UID) sent it, in what
    order, and when it was true (`at`, default: when received)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    pod: Name
    uid: Annotated[str, Field(min_length=1, max_length=64)]
    seq: Annotated[int, Field(ge=0, le=2**63 - 1)]
    at: AwareDatetime | None = None


class Heartbeat(SignalBase):
    kind: Literal["heartbeat"]


class PhaseSignal(SignalBase):
    kind: Literal["phase"]
    phase: Literal[
        "starting", "waiting_for_nodes", "initializing", "training", "evaluating",
        "checkpointing", "finalizing",
    ]  # fmt: skip


class Progress(SignalBase):
    kind: Literal["progress"]
    step: Count
    max_steps: Count | None = None
    step_seconds: Annotated[float, Field(ge=0)] | None = None
    metrics: Annotated[
        dict[Annotated[str, Field(min_length=1, max_length=64)], float],
        Field(max_length=MAX_METRICS),
    ] | None = None  # fmt: skip


class Checkpoint(SignalBase):
    kind: Literal["checkpoint"]
    step: Count
    path: Annotated[str, Field(min_length=1, max_length=1024)]


class Ray(SignalBase):
    kind: Literal["ray"]
    expected_nodes: Count
    alive_nodes: Count
    gpus: Count | None = None


class Completion(SignalBase):
    kind: Literal["completion"]
    outcome: Literal["succeeded", "failed"]
    exit_code: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)] | None = None
    reason: Annotated[str, Field(max_length=128)] | None = None
    message: Text | None = None


SignalIn = Annotated[
    Heartbeat | PhaseSignal | Progress | Checkpoint | Ray | Completion,
    Field(discriminator="kind"),
]
BATCH = TypeAdapter(list[SignalIn])


class SignalBatch(RootModel[SignalIn | Annotated[list[SignalIn], Field(max_length=MAX_BATCH)]]):
    """The request body of POST /api/v1/jobs/{id}/signals: one message or a list of them."""


COMMON = frozenset(("kind", "pod", "uid", "seq", "at"))


# --- rate --------------------------------------------------------------------------------------


def too_fast(job_id: int, pod: str) -> bool:
    """At most TRAINYARD_SIGNAL_RATE requests per second per pod (a burst of that many), counted
    in this web process's cache (docs/decisions.md, "Rate cap")."""
    key = f"signals:{job_id}:{pod}:{int(timezone.now().timestamp())}"
    cache.add(key, 0, timeout=2)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr: this request opens a new second
        cache.set(key, 1, timeout=2)
        count = 1
    return count > settings.TRAINYARD_SIGNAL_RATE


# --- storing -----------------------------------------------------------------------------------


def _row(job_id: int, run: int, item: SignalBase, source: str, now: datetime) -> Signal:
    fields = item.model_dump(mode="json", exclude_none=True)
    data = {key: value for key, value in fields.items() if key not in COMMON}
    kind = fields["kind"]
    return Signal(
        job_id=job_id, run=run, pod=item.pod, uid=item.uid, seq=item.seq, kind=kind,
        source=source, at=item.at or now, received_at=now, data=data,
    )  # fmt: skip


KEY = ("pod", "uid", "seq")  # with the Job: one_signal_per_seq


def insert(
    job_id: int, run: int, items: Sequence[SignalBase], source: str, now: datetime
) -> list[SignalBase]:
    """The messages that went in, in their order: one INSERT ... ON CONFLICT DO NOTHING
    RETURNING their keys. A message whose key is stored already (or comes earlier in the same
    batch) is a duplicate, whatever it carries now: it is neither stored nor folded, and of two
    requests racing with the same message only one gets it back."""
    rows = [_row(job_id, run, item, source, now) for item in items]
    fields = [f for f in Signal._meta.concrete_fields if not f.primary_key]
    inserted = Signal.objects._insert(  # type: ignore[attr-defined]
        rows, fields=fields, returning_fields=[Signal._meta.get_field(name) for name in KEY],
        on_conflict=OnConflict.IGNORE,
    )  # fmt: skip
    fresh = {tuple(key) for key in inserted or []}
    accepted = []
    for item in items:
        key = (item.pod, item.uid, item.seq)
        if key in fresh:
            fresh.discard(key)  # the first of the batch went in; a second one is its duplicate
            accepted.append(item)
    return accepted


# --- compaction --------------------------------------------------------------------------------


COMPACT_EVERY = timedelta(minutes=1)  # a Job run's signals compacted at most this often


def compact(job_id: int, run: int, now: datetime) -> None:
    """Bound the rows of a Job run: one statement per rule covers every pod of the Job, so the
    work follows the Jobs, not the pods. The fold decides when (jobs.workload.report: at most
    once per COMPACT_EVERY, under the report row's lock), so most requests compact nothing. Rows
    received within TRAINYARD_SIGNAL_KEEP_SECONDS are never removed, so a client's retry
    within that window is still recognised as a duplicate."""
    keep = timedelta(seconds=settings.TRAINYARD_SIGNAL_KEEP_SECONDS)
    old = Signal.objects.filter(job_id=job_id, run=run, received_at__lt=now - keep)
    _keep_newest_per_pod(old.filter(kind__in=LATEST_ONLY))
    overview.refresh(job_id, run, now)  # before thinning: every message is folded before it goes
    _thin_progress(old.filter(kind="progress"), job_id, run)
    for kind in KEEP_LATEST_KINDS:
        _keep_latest(old.filter(kind=kind), job_id, run, kind)
    _keep_latest_spells(job_id, run)


def _keep_newest_per_pod(old: QuerySet[Signal]) -> None:
    """Every row of a pod UID with a newer one of the same kind goes (newest: highest seq)."""
    newer = Signal.objects.filter(
        job_id=OuterRef("job_id"), run=OuterRef("run"), kind=OuterRef("kind"),
        uid=OuterRef("uid"), seq__gt=OuterRef("seq"),
    )  # fmt: skip
    old.filter(Exists(newer)).delete()


def _keep_latest(old: QuerySet[Signal], job_id: int, run: int, kind: str) -> None:
    mine = Signal.objects.filter(job_id=job_id, run=run, kind=kind)
    if mine.count() <= KEEP_LATEST:
        return
    kept = mine.order_by("-received_at", "-pk").values_list("pk", flat=True)[:KEEP_LATEST]
    old.exclude(pk__in=list(kept)).delete()


def _keep_latest_spells(job_id: int, run: int) -> None:
    """A run that flaps between states records a spell each time: the newest KEEP_SPELLS stay."""
    mine = WorkloadSpell.objects.filter(job_id=job_id, run=run)
    if mine.count() <= KEEP_SPELLS:
        return
    kept = mine.order_by("-started_at", "-pk").values_list("pk", flat=True)[:KEEP_SPELLS]
    mine.exclude(pk__in=list(kept)).delete()


def _thin_progress(old: QuerySet[Signal], job_id: int, run: int) -> None:
    """Over TRAINYARD_SIGNAL_PROGRESS_POINTS points in the run, the old ones are thinned to at
    most half that many (more where series come in messages of their own: each group keeps its
    points, jobs.downsample.spread), keeping up to 2,000 points of every series spread over its
    time and in each aligned slice of time its first point and the points holding the lowest
    and the highest value of every series (step, step time, each metric:
    jobs.downsample.thin_rows), so a spike or a dip outlives the compaction, the history keeps
    its shape over the whole run, and a finished run keeps thousands of points of each series,
    however sparse."""
    limit = settings.TRAINYARD_SIGNAL_PROGRESS_POINTS
    if Signal.objects.filter(job_id=job_id, run=run, kind="progress").count() <= limit:
        return
    points = list(old.order_by("at", "pk").values_list("pk", "at", "data"))
    rows = [(at.timestamp(), progress_values(data)) for _, at, data in points]
    kept = set(thin_rows(rows, limit // 2))
    gone = [point[0] for index, point in enumerate(points) if index not in kept]
    for start in range(0, len(gone), 1000):  # bounded statements (SQLite's parameter limit)
        Signal.objects.filter(pk__in=gone[start : start + 1000]).delete()


def progress_values(data: Mapping[str, Any]) -> dict[str, float]:
    """A stored progress message's series and their values: `step`, `step_seconds` and each
    metric by its name (a metric named like them is shadowed: metrics are checked as numbers)."""
    values = {
        f"metrics/{name}": float(value)
        for name, value in (data.get("metrics") or {}).items()
        if isinstance(value, int | float)
    }
    for name in ("step", "step_seconds"):
        if isinstance(data.get(name), int | float):
            values[name] = float(data[name])
    return values
