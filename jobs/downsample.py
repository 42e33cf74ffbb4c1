"""Fewer points that keep what a reader looks for: spikes and dips (docs/decisions.md, "Charts:
min/max per bucket").

Pure: plain lists in, plain lists out, no database and no clock. Two uses of one idea:

- `downsample`: one series for one chart. The range asked for (the whole run, or what the reader
  zoomed to) is cut into `limit // 2` buckets of equal width on the x axis (time or step), and
  each bucket keeps its lowest and its highest point. A spike survives whatever the zoom, and a
  narrower range has narrower buckets, so zooming in refines.
- `thin_rows`: the compaction of a run's stored progress (jobs.workload.intake). A stored row
  carries the series its message reported (step, step time, some or all metrics), so a row is
  kept when it holds one of the points spread over the time of any series (at least 2,000 of
  each, however sparse), or the lowest or the highest value of any series in its time slice; the
  slices are widened until the kept rows fit the limit.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import NamedTuple


class Axis(StrEnum):
    TIME = "time"
    STEP = "step"


class Point(NamedTuple):
    """One value of one series: when it was reported, at which step, and the value."""

    t: float  # seconds since the epoch
    step: int | None
    value: float

    def x(self, axis: Axis) -> float | None:
        return self.t if axis == Axis.TIME else self.step


def in_range(
    points: Sequence[Point], axis: Axis, start: float | None, end: float | None
) -> list[Point]:
    """The points whose x lies in [start, end] (either bound may be open); on the step axis a
    point without a step has no place."""
    kept = []
    for point in points:
        x = point.x(axis)
        if x is None or (start is not None and x < start) or (end is not None and x > end):
            continue
        kept.append(point)
    return kept


def downsample(
    points: Sequence[Point],
    axis: Axis = Axis.TIME,
    start: float | None = None,
    end: float | None = None,
    limit: int = 500,
) -> list[Point]:
    """At most `limit` points of [start, end]: every bucket's lowest and highest, in x order
    (ties keep the earlier point). Fewer points than `limit` come back as they are."""
    placed = sorted(in_range(points, axis, None, None), key=lambda point: _x(point, axis))
    xs = [_x(point, axis) for point in placed]
    kept = extremes(xs, [point.value for point in placed], start, end, limit)
    return [placed[index] for index in kept]


def _x(point: Point, axis: Axis) -> float:
    x = point.x(axis)
    return float(x) if x is not None else 0.0


def extremes(
    xs: Sequence[float],
    values: Sequence[float],
    start: float | None = None,
    end: float | None = None,
    limit: int = 500,
) -> list[int]:
    """The indices, in order, of at most `limit` of the points whose x (`xs`, ascending) lies in
    [start, end]: `limit // 2` buckets of equal width over the points' own span, each keeping
    the index of its first lowest and of its first highest value. Each bucket is a slice found
    by bisection and reduced by the built-in min and max, so a series of 10,000 points costs a
    few hundred slices, not 10,000 steps of Python."""
    first = bisect_left(xs, start) if start is not None else 0
    stop = bisect_right(xs, end) if end is not None else len(xs)
    if stop - first <= limit:
        return list(range(first, stop))
    buckets = max(1, limit // 2)
    low = xs[first]
    width = (xs[stop - 1] - low) / buckets or 1.0
    kept: list[int] = []
    begin = first
    for bucket in range(1, buckets + 1):
        end_of = stop if bucket == buckets else bisect_left(xs, low + bucket * width, begin, stop)
        if end_of > begin:
            part = values[begin:end_of]
            lowest = begin + part.index(min(part))
            highest = begin + part.index(max(part))
            kept.extend(sorted({lowest, highest}))
        begin = end_of
    return kept


Row = tuple[float, Mapping[str, float]]  # (seconds since the epoch, each series' value)


def slice_extremes(rows: Sequence[Row], width: int) -> list[int]:
    """The indices of the rows kept with time slices `width` seconds wide, aligned on multiples
    of it: each slice's first row and, per series, its first lowest and its last highest row
    (so a flat series keeps both ends of its slice)."""
    kept: set[int] = set()
    lowest: dict[tuple[int, str], tuple[float, int]] = {}
    highest: dict[tuple[int, str], tuple[float, int]] = {}
    seen: set[int] = set()
    for index, (at, values) in enumerate(rows):
        bucket = int(at // width)
        if bucket not in seen:
            seen.add(bucket)
            kept.add(index)
        for name, value in values.items():
            key = (bucket, name)
            if key not in lowest or value < lowest[key][0]:
                lowest[key] = (value, index)
            if key not in highest or value >= highest[key][0]:
                highest[key] = (value, index)
    kept.update(index for _, index in lowest.values())
    kept.update(index for _, index in highest.values())
    return sorted(kept)


SERIES_POINTS = 2_000  # points of every series a thinned history keeps (issue 35), if it had them


def thin_rows(rows: Sequence[Row], limit: int) -> list[int]:
    """The indices (in order) of about `limit` rows to keep, `rows` being in time order: for
    every series, min(its points, SERIES_POINTS, limit // 2) of its points spread over its time
    (`spread`), so a metric reported in one message of five keeps as many points as the step;
    then, in time slices a power of two seconds wide, each slice's first row and its lowest and
    highest row of every series (`slice_extremes`), the slices at most `limit // 2` over the
    span at first and twice as wide each time the kept rows do not fit. Aligned slices nest,
    so a later compaction of the same history never undoes an earlier one's extremes, and the
    widest (one slice) keeps every series' global minimum and maximum even past `limit`.
    Series reported in separate messages need rows of their own: up to SEPARATE_GROUPS such
    groups each keep their points past `limit` (`spread`); beyond that each keeps fewer."""
    if len(rows) <= limit:
        return list(range(len(rows)))
    spread_rows = spread(rows, min(SERIES_POINTS, limit // 2), limit)
    span = rows[-1][0] - rows[0][0]
    width = 1
    while span / width > max(1, limit // 2 - 1):
        width *= 2
    while True:
        kept = spread_rows.union(slice_extremes(rows, width))
        if len(kept) <= limit or width > span:
            return sorted(kept)
        width *= 2


# Groups of series reported in messages of their own (a workload posting its training, rollout
# and evaluation metrics apart) whose points a thinned history keeps in full past its rows'
# limit: at most SEPARATE_GROUPS * SERIES_POINTS rows, however many series names a run invents.
SEPARATE_GROUPS = 16


def spread(rows: Sequence[Row], count: int, limit: int) -> set[int]:
    """The rows holding `count` points of every series (all of a series with fewer), chosen by
    `evenly`; `count` halves while they are more than `limit` rows and more than
    SEPARATE_GROUPS groups of `count` rows."""
    positions: dict[str, list[int]] = {}
    for index, (_, values) in enumerate(rows):
        for name in values:
            positions.setdefault(name, []).append(index)
    while True:
        kept: set[int] = set()
        for found in positions.values():
            times = [rows[index][0] for index in found]
            kept.update(found[k] for k in evenly(times, count))
        if len(kept) <= max(limit, SEPARATE_GROUPS * count) or count <= 1:
            return kept
        count //= 2


def evenly(times: Sequence[float], count: int) -> list[int]:
    """The positions of min(count, len(times)) of the times (ascending), spread over their span:
    the first time at or after each of `count` evenly spaced moments from the first to the
    last, each taken once; where points bunch (a gap, then a burst) fewer moments find one of
    their own, and the rest are taken evenly from those left, so the count always holds."""
    if len(times) <= count:
        return list(range(len(times)))
    first, last = times[0], times[-1]
    chosen: list[int] = []
    position = 0
    for moment in range(count):
        target = first + (last - first) * moment / max(1, count - 1)
        position = bisect_left(times, target, position)
        if position == len(times):
            break
        chosen.append(position)
        position += 1
    if len(chosen) < count:
        taken = set(chosen)
        left = [k for k in range(len(times)) if k not in taken]
        need = count - len(chosen)
        chosen += [left[m * (len(left) - 1) // max(1, need - 1)] for m in range(need)]
    return chosen


OVERVIEW_BUCKETS = 250  # aligned time buckets of a run's overview: at most 500 points a series


class Overview:
    """A run's every series reduced to the lowest and the highest point of each aligned time
    bucket, the buckets a power of two seconds wide and at most OVERVIEW_BUCKETS of them: the
    whole run's chart, bounded however long the run (docs/decisions.md, "Charts: the overview").

    Built by folding rows in, in any number of passes (`fit`, then `add` each row): a bucket's
    lowest and highest of two passes are the lowest and highest of the two, and when the run
    outgrows the buckets they double in width, two aligned buckets making one, so the global
    minimum and maximum of every series are kept whatever the order of the passes. Ties keep
    the earlier point."""

    def __init__(
        self, width: int = 1, series: dict[str, dict[int, list[Point]]] | None = None
    ) -> None:
        self.width = width
        self.series: dict[str, dict[int, list[Point]]] = series or {}

    def add(self, t: float, step: int | None, values: Mapping[str, float]) -> None:
        """One row: each of its series' values at time `t` (seconds since the epoch)."""
        bucket = int(t // self.width)
        for name, value in values.items():
            buckets = self.series.setdefault(name, {})
            pair = buckets.get(bucket)
            if pair is None:
                buckets[bucket] = [Point(t, step, value), Point(t, step, value)]
                continue
            if value < pair[0].value:
                pair[0] = Point(t, step, value)
            if value > pair[1].value:
                pair[1] = Point(t, step, value)

    def fit(self, start: float, end: float) -> None:
        """Before rows from `start` to `end` are added: double the buckets' width until the
        run's span with them fits OVERVIEW_BUCKETS buckets. Widening first keeps at most that
        many buckets alive while a long history is folded (a bucket per row at the first width
        made the fold of 10,000 rows take seconds, mostly in the garbage collector)."""
        found = [bucket for buckets in self.series.values() for bucket in buckets]
        first = min([*found, int(start // self.width)])
        last = max([*found, int(end // self.width)])
        while last - first >= OVERVIEW_BUCKETS:
            self.width *= 2
            first, last = first // 2, last // 2
            self.series = {name: _halved(buckets) for name, buckets in self.series.items()}

    def span(self, name: str, low: float | None, high: float | None) -> tuple[float, float] | None:
        """From the start of the first bucket to the end of the last one in which the series
        reached into [low, high] (either bound may be open), in seconds since the epoch; None
        when no bucket did. Every point of the series with a value in [low, high] lies in that
        span: a bucket's lowest and highest bound all of its values. Reads a step range of a
        run as a time range (jobs.series: a zoom on the step axis)."""
        inside = [
            bucket
            for bucket, (lowest, highest) in self.series.get(name, {}).items()
            if (low is None or highest.value >= low) and (high is None or lowest.value <= high)
        ]
        if not inside:
            return None
        return min(inside) * self.width, (max(inside) + 1) * self.width

    def points(self, name: str) -> list[Point]:
        """The series' kept points in time order (a bucket's lowest and highest, once if one)."""
        kept: list[Point] = []
        for _, (lowest, highest) in sorted(self.series.get(name, {}).items()):
            if lowest == highest:
                kept.append(lowest)
            else:
                kept.extend((lowest, highest) if lowest.t <= highest.t else (highest, lowest))
        return kept


def _halved(buckets: Mapping[int, list[Point]]) -> dict[int, list[Point]]:
    """Buckets twice as wide: aligned pairs merged, each keeping the lower low and the higher
    high (the earlier bucket's on a tie)."""
    merged: dict[int, list[Point]] = {}
    for bucket, (lowest, highest) in sorted(buckets.items()):
        pair = merged.get(bucket // 2)
        if pair is None:
            merged[bucket // 2] = [lowest, highest]
            continue
        if lowest.value < pair[0].value:
            pair[0] = lowest
        if highest.value > pair[1].value:
            pair[1] = highest
    return merged
