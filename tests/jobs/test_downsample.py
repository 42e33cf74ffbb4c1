"""The charts' downsampling (jobs.downsample, issue 35 "Downsampling that keeps what matters"):
min/max per bucket, pure, tried on plain lists."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from jobs.downsample import (
    OVERVIEW_BUCKETS,
    SEPARATE_GROUPS,
    SERIES_POINTS,
    Axis,
    Overview,
    Point,
    downsample,
    in_range,
    thin_rows,
)

T0 = 1_796_000_000.0


def noisy_run(count: int = 20_000, seed: int = 7) -> list[Point]:
    """A reward that rises through noise, one step per 3 s, with a spike and a dip."""
    chance = random.Random(seed)
    points = [Point(T0 + 3 * n, n, n / count + chance.gauss(0, 0.05)) for n in range(count)]
    points[4321] = points[4321]._replace(value=9.5)  # a spike
    points[15_000] = points[15_000]._replace(value=-7.25)  # a dip
    return points


def test_it_returns_at_most_the_limit_and_keeps_the_global_min_and_max_of_every_bucket() -> None:
    points = noisy_run()
    shown = downsample(points, limit=500)
    assert 250 <= len(shown) <= 500
    kept = set(shown)
    width = (points[-1].t - points[0].t) / 250
    for bucket in range(250):
        low, high = points[0].t + bucket * width, points[0].t + (bucket + 1) * width
        inside = [p for p in points if low <= p.t < high or (bucket == 249 and p.t == high)]
        assert min(inside, key=lambda p: p.value) in kept
        assert max(inside, key=lambda p: p.value) in kept
    assert max(p.value for p in shown) == 9.5 and min(p.value for p in shown) == -7.25
    assert [p.t for p in shown] == sorted(p.t for p in shown)


def test_it_refines_a_zoomed_range() -> None:
    """Zooming to a tenth of the run gives as many points for that tenth as the whole run got
    for all of it: ten times the detail, and every point in range."""
    points = noisy_run()
    whole = downsample(points, limit=500)
    start, end = points[4000].t, points[6000].t
    zoomed = downsample(points, Axis.TIME, start, end, limit=500)
    in_whole = [p for p in whole if start <= p.t <= end]
    assert len(zoomed) >= 5 * len(in_whole) and len(zoomed) <= 500
    assert all(start <= p.t <= end for p in zoomed)
    assert max(p.value for p in zoomed) == 9.5  # the spike is in the zoomed range


def test_it_buckets_by_step_on_the_step_axis_and_leaves_out_points_without_a_step() -> None:
    points = [Point(T0 + n, n * 10, float(n)) for n in range(2000)] + [Point(T0, None, 99.0)]
    shown = downsample(points, Axis.STEP, 1000, 5000, limit=100)
    assert len(shown) <= 100 and all(1000 <= (p.step or 0) <= 5000 for p in shown)
    assert (shown[0].step, shown[-1].step) == (1000, 5000)
    assert in_range(points, Axis.STEP, None, None)[-1].value == 1999.0


def test_it_returns_few_points_as_they_are() -> None:
    points = [Point(T0 + n, n, float(n)) for n in range(10)]
    assert downsample(list(reversed(points)), limit=500) == points


def test_thinning_stored_rows_keeps_every_series_extremes_and_at_least_2000_rows() -> None:
    """The compaction's rule (jobs.workload.intake): 24,000 rows of 32 noisy metrics thinned to
    at most 4,000 keep at least 2,000 points of every series, and each series' spike."""
    chance = random.Random(3)
    rows = [
        (T0 + 3.6 * n, {f"m{k}": chance.random() for k in range(32)} | {"step": float(n)})
        for n in range(24_000)
    ]
    rows[777][1]["m5"] = 50.0
    kept = thin_rows(rows, 4000)
    assert 2000 <= len(kept) <= 4000
    assert 777 in kept and kept[0] == 0 and kept == sorted(kept)


def test_thinning_twice_keeps_what_the_first_pass_kept() -> None:
    """Slices are aligned and nest: compacting a history again (with newer rows) never loses
    the older rows an earlier pass kept as their slice's extremes."""
    chance = random.Random(5)
    rows = [(T0 + n, {"loss": chance.random()}) for n in range(10_000)]
    first = thin_rows(rows, 1000)
    kept_rows = [rows[i] for i in first] + [(T0 + 10_000 + n, {"loss": 0.5}) for n in range(500)]
    second = thin_rows(kept_rows, 1000)
    early = [kept_rows[i] for i in second if kept_rows[i][0] < T0 + 10_000]
    assert max(v["loss"] for _, v in early) == max(v["loss"] for _, v in rows)
    assert min(v["loss"] for _, v in early) == min(v["loss"] for _, v in rows)


def test_it_keeps_the_global_min_and_max_in_a_run_overview_folded_in_passes() -> None:
    """A run's overview (docs/decisions.md, "Charts: the overview") is folded a minute's
    messages at a time by the compaction: 20,000 points over 16 hours in 40 passes keep at most
    OVERVIEW_BUCKETS buckets, two points each, the spike and the dip, and every kept bucket's
    lowest and highest is that of the points in it."""
    points = noisy_run()
    overview = Overview()
    for start in range(0, len(points), 500):
        passed = points[start : start + 500]
        overview.fit(passed[0].t, passed[-1].t)
        for point in passed:
            overview.add(point.t, point.step, {"reward": point.value})
    kept = overview.points("reward")
    assert len(overview.series["reward"]) <= OVERVIEW_BUCKETS and len(kept) <= 2 * OVERVIEW_BUCKETS
    assert min(kept, key=lambda p: p.value) == points[15_000]
    assert max(kept, key=lambda p: p.value) == points[4321]
    for bucket, (lowest, highest) in overview.series["reward"].items():
        inside = [p.value for p in points if int(p.t // overview.width) == bucket]
        assert (lowest.value, highest.value) == (min(inside), max(inside))


def test_an_overview_gives_the_time_span_of_a_step_range_even_when_the_steps_went_back() -> None:
    """A zoom on the step axis reads the stored rows of a time span (jobs.series): every point
    whose step lies in the range is inside the span the overview gives, also when the run went
    back to a checkpoint and passed the same steps twice; a range no step reached has none."""
    steps = [*range(0, 6000), *range(4000, 9000)]  # back from 5999 to 4000 at a restart
    points = [Point(T0 + 2 * n, step, float(step)) for n, step in enumerate(steps)]
    overview = Overview()
    overview.fit(points[0].t, points[-1].t)
    for point in points:
        overview.add(point.t, point.step, {"step": point.value})
    for low, high in ((4500, 4600), (100, 200), (8990, None), (None, 10)):
        span = overview.span("step", low, high)
        assert span is not None
        inside = [p.t for p in in_range(points, Axis.STEP, low, high)]
        assert span[0] <= min(inside) and max(inside) < span[1]
    narrow = overview.span("step", 100, 200)
    assert narrow is not None and narrow[1] - narrow[0] < 0.05 * (points[-1].t - points[0].t)
    assert overview.span("step", 9001, 9500) is None


@pytest.mark.parametrize("reported", [lambda n: n % 5 == 0, lambda n: n < 10 or n >= 9_000])
def test_thinning_keeps_2000_points_of_a_sparse_series_and_of_a_bunched_one(
    reported: Callable[[int], bool],
) -> None:
    """Points per series, not rows: a series in every 5th row, or one whose points come in a
    burst after a long gap, keeps min(its points, 2,000) beside the dense ones, the rows
    within the limit."""
    chance = random.Random(9)
    rows: list[tuple[float, dict[str, float]]] = []
    for n in range(12_000):
        values = {"step": float(n), "loss": chance.random()}
        if reported(n):
            values["sparse"] = chance.random()
        rows.append((T0 + 7.2 * n, values))
    kept = thin_rows(rows, 4000)
    assert len(kept) <= 4000
    for name in ("step", "loss", "sparse"):
        assert sum(1 for index in kept if name in rows[index][1]) >= 2000


def test_thinning_keeps_2000_points_of_each_series_reported_in_messages_of_its_own() -> None:
    """A workload that posts its training, rollout and evaluation metrics in separate messages:
    each group needs rows of its own, so the history keeps more than the limit's rows rather
    than fewer points of each (up to SEPARATE_GROUPS groups), and its extremes."""
    chance = random.Random(11)
    groups = ("train/loss", "rollout/reward", "eval/success")
    rows = [(T0 + 2.4 * n, {groups[n % 3]: chance.random()}) for n in range(36_000)]
    rows[999][1]["rollout/reward"] = 40.0
    kept = thin_rows(rows, 4000)
    for name in groups:
        assert sum(1 for index in kept if name in rows[index][1]) >= 2000
    assert 999 in kept and len(kept) <= 3 * 2000 + 4000


def test_thinning_stays_bounded_however_many_series_a_run_reports_apart() -> None:
    """A run inventing a series name per message cannot make its history grow without bound:
    past SEPARATE_GROUPS groups, each keeps fewer points."""
    rows = [(T0 + n, {f"metric{n % 100}": float(n)}) for n in range(100_000)]
    kept = thin_rows(rows, 4000)
    assert len(kept) <= SEPARATE_GROUPS * SERIES_POINTS
