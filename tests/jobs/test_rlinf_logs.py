"""RLinf's progress lines read from a log tail (issue 10, item 3b; docs/workload-signals.md,
"Fallbacks"): the metric table of the embodied runners and the tqdm bar of the others."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from jobs.workload.rlinf_logs import MAX_METRICS, parse_progress, split_stamp

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_it_reads_every_closed_metric_table_of_the_tail() -> None:
    points = parse_progress((FIXTURES / "rlinf_progress.log").read_text())

    assert [point.step for point in points] == [41, 42, 43, 44]  # the 45th is still printing
    assert {point.max_steps for point in points} == {1000}
    assert points[0].step_seconds == 61.9


def test_it_gives_the_metrics_back_under_rlinfs_own_keys() -> None:
    first = parse_progress((FIXTURES / "rlinf_progress.log").read_text())[0]

    assert first.metrics["time/actor_training"] == 21.734
    assert first.metrics["time/env/step"] == 9.812
    assert first.metrics["env/success_once"] == 0.359
    assert first.metrics["env/episode_len"] == 80
    assert first.metrics["train/actor/grad_norm"] == 1.482
    assert first.metrics["train/actor/approx_kl"] == 4.10e-04
    assert len(first.metrics) == 18


def test_it_reads_the_time_the_api_server_stamped_on_the_line() -> None:
    text = (FIXTURES / "rlinf_progress.log").read_text()
    stamped = "".join(
        f"2026-12-03T14:00:{n % 60:02d}.123456789Z {line}\n"
        for n, line in enumerate(text.splitlines())
    )

    points = parse_progress(stamped)

    assert [point.step for point in points] == [41, 42, 43, 44]
    step_line = next(n for n, line in enumerate(text.splitlines()) if "Global Step:   41" in line)
    assert points[0].at == datetime(2026, 12, 3, 14, 0, step_line % 60, 123456, tzinfo=UTC)


def test_it_splits_the_stamp_with_an_offset_and_leaves_a_plain_line_alone() -> None:
    at, line = split_stamp("2026-12-03T15:00:01+01:00 hello")
    assert (at, line) == (datetime(2026, 12, 3, 14, 0, 1, tzinfo=UTC), "hello")
    assert split_stamp("2026-12-03 13:58:02,114 INFO") == (None, "2026-12-03 13:58:02,114 INFO")


def test_it_reads_each_redraw_of_the_tqdm_bar_with_its_postfix() -> None:
    bar = "Global Step:  {p:2d}%|{b:<10}| {n}/50 [{e}<{r}, {rate}{post}]"
    redraws = [
        bar.format(p=0, b="", n=0, e="00:00", r="?", rate="?it/s", post=""),
        bar.format(p=2, b="▏", n=1, e="00:12", r="09:48", rate="12.02s/it",
                   post=", actor/grad_norm=0.873, rollout/rewards=0.25, status=ok"),
        bar.format(p=4, b="▍", n=2, e="00:23", r="09:12", rate="2.50it/s",
                   post=", actor/grad_norm=0.8, rollout/rewards=0.312"),
    ]  # fmt: skip
    text = "INFO starting\n" + "\r" + "\r".join(redraws) + "\n"

    points = parse_progress(text)

    assert [(p.step, p.max_steps, p.step_seconds) for p in points] == [
        (0, 50, None), (1, 50, 12.02), (2, 50, 0.4),
    ]  # fmt: skip
    assert points[1].metrics == {"actor/grad_norm": 0.873, "rollout/rewards": 0.25}


def test_it_keeps_at_most_the_signals_number_of_metrics_and_skips_cut_cells() -> None:
    cells = ", ".join(f"m{n}={n}.5" for n in range(40))
    text = f"Global Step:  10%|█| 5/50 [00:10<01:30, 2.00s/it, cut=0.12…, {cells}]"

    (point,) = parse_progress(text)

    assert len(point.metrics) == MAX_METRICS
    assert "cut" not in point.metrics and point.metrics["m0"] == 0.5


def test_it_ignores_lines_that_are_not_rlinfs() -> None:
    text = "step 10 loss=0.5\nGlobal Step: ten of them\n│ Global Step: 3/x │\n╰──╯\n\x00\ufffd"
    assert parse_progress(text) == []
