"""A run's overview: the whole run's chart kept by the compaction (issue 35; docs/decisions.md,
"Charts: the overview").

The series endpoint's whole-range answer would otherwise read every stored progress message of
the run (thousands of JSON documents of up to 32 metrics). The compaction (jobs.workload.intake)
folds the messages stored since its last pass into one row per run (SeriesOverview): every
series' lowest and highest point per aligned time bucket (jobs.downsample.Overview). A reader
folds in the few messages stored since, the same way. A run stays without one until it has
stored OVERVIEW_FROM progress messages (reading them all is quick below that); no message has
been thinned by then, so the first pass folds the whole run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.db.models import TextField
from django.db.models.functions import Cast

from jobs.downsample import Overview, Point
from jobs.models import SeriesOverview, Signal

OVERVIEW_FROM = 2_000  # progress messages of a run before it gets an overview
SETTLED = timedelta(seconds=10)  # a message younger than this may sit behind a lower id
STEP, STEP_RATE = "step", "step_rate"


def refresh(job_id: int, run: int, now: datetime) -> None:
    """Fold the run's progress messages stored since the last pass into its overview. Only
    messages received SETTLED ago are folded: ids come from a sequence, and a transaction still
    open may commit a lower id than one already visible, which `through` would then pass over.
    Called by the compaction before it thins (so every message is folded before it may go), at
    most once a minute per run; folding a message twice changes no bucket's lowest or highest."""
    stored = SeriesOverview.objects.filter(job_id=job_id, run=run).first()
    progress = Signal.objects.filter(job_id=job_id, run=run, kind="progress")
    if stored is None and progress.count() <= OVERVIEW_FROM:
        return
    overview, last = decoded(orjson.loads(stored.data)) if stored else (Overview(), None)
    settled = progress.filter(pk__gt=stored.through if stored else 0, received_at__lt=now - SETTLED)
    rows = list(_rows(settled))
    if not rows:
        return
    last = fold(overview, rows, last)
    data = orjson.dumps(encoded(overview, last))
    SeriesOverview.objects.update_or_create(
        job_id=job_id, run=run, defaults={"through": max(pk for pk, *_ in rows), "data": data}
    )


Row = tuple[int, float, dict[str, Any]]  # (Signal id, seconds since the epoch, progress data)


def _rows(found: Any) -> Iterable[Row]:
    """The messages in time order, their data decoded by orjson (see jobs.series)."""
    ordered = found.order_by("at", "pk").values_list("pk", "at", Cast("data", TextField()))
    return ((pk, at.timestamp(), orjson.loads(data)) for pk, at, data in ordered)


def fold(overview: Overview, rows: Sequence[Row], last: Point | None) -> Point | None:
    """Fold the rows (in time order) into the overview: the step, the step rate (steps per
    minute since the previous step point, as jobs.series.step_rates) and each metric, keyed as
    jobs.series names them (metrics under "metrics/"). Returns the newest step point."""
    if rows:
        overview.fit(rows[0][1], rows[-1][1])
    for _pk, at, data in rows:
        step = data.get("step") if isinstance(data.get("step"), int) else None
        values = {f"metrics/{name}": value for name, value in (data.get("metrics") or {}).items()}
        if step is not None:
            values[STEP] = float(step)
            if last is not None and last.step is not None and at > last.t and step >= last.step:
                values[STEP_RATE] = (step - last.step) / (at - last.t) * 60
            last = Point(at, step, float(step))
        overview.add(at, step, values)
    return last


def read(job_id: int, run: int) -> tuple[Overview, Point | None] | None:
    """The run's overview with every message stored since folded in, or None when the run has
    none (then its messages are few: read them)."""
    stored = (
        SeriesOverview.objects.filter(job_id=job_id, run=run).values_list("through", "data").first()
    )
    if stored is None:
        return None
    through, data = stored
    overview, last = decoded(orjson.loads(data))
    newer = Signal.objects.filter(job_id=job_id, run=run, kind="progress", pk__gt=through)
    last = fold(overview, list(_rows(newer)), last)
    return overview, last


def metric_names(overview: Overview) -> list[str]:
    """The metrics the run reported, sorted (without their "metrics/" key prefix)."""
    return sorted(
        name.removeprefix("metrics/")
        for name in overview.series
        if name != STEP_RATE and name != STEP
    )


# --- stored as JSON: {"width": w, "last": [t, step], "series": {name: [[bucket, low, high]]}} ---


def encoded(overview: Overview, last: Point | None) -> dict[str, Any]:
    return {
        "width": overview.width,
        "last": [last.t, last.step] if last else None,
        "series": {
            name: [[bucket, *low, *high] for bucket, (low, high) in buckets.items()]
            for name, buckets in overview.series.items()
        },
    }


def decoded(data: Mapping[str, Any]) -> tuple[Overview, Point | None]:
    series = {
        name: {
            row[0]: [Point(row[1], row[2], row[3]), Point(row[4], row[5], row[6])] for row in rows
        }
        for name, rows in data.get("series", {}).items()
    }
    last = data.get("last")
    return Overview(data.get("width", 1), series), (
        Point(last[0], last[1], float(last[1])) if last else None
    )
