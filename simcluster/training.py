"""`sim train`: a simulated RLinf run, its command line, what it prints and the numbers it reports.

What it prints follows RLinf's embodied runner: once per global step the metric table of
`print_metrics_table` (rlinf/utils/metric_utils.py: a 120-column box whose first row is
`│ Global Step:    k/N │ Progress: ... │`, then Time, Environment and Training/Actor sections of
`name=value` cells, three a row), the runner's "Saving checkpoint at step k." before the table of
a step that saves, and the cluster's "Waiting for N nodes to be ready" warnings while Ray nodes
join. Everything is a pure function of the options, the step and the simulated time, so logs are
derived, never stored (simcluster/README.md shows the lines).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from simcluster.objects import fnv32a

USAGE = (
    "sim train STEPS [--step-seconds S] [--checkpoint-every N] [--nodes N] "
    "[--heartbeat-seconds H] [--hang-at K] [--fail-at K [--exit-code C]] [--no-signals] [--exit]"
)
LOG_PATH = "/workspace/results/sim-train"  # RLinf's runner.logger.log_path/experiment_name
WIDTH = 120  # print_metrics_table's total_width
COLUMNS = (39, 39, 38)  # its three cells a row: (WIDTH - 4) // 3, the remainder to the first two
BAR = 40
SECTIONS = (("Time", "time/"), ("Environment", "env/"), ("Training/Actor", "train/"))
EPSILON = 1e-6  # step times are sums of floats: a step due at t is done at t


@dataclass(frozen=True)
class DriverOptions:
    """The driver wrapper's options (client/trainyard_driver.py), when a template head runs the
    simulated run behind it (simcluster/scripts.py) rather than as `sim train`."""

    expected_nodes: int
    done_marker: str | None = None
    nodes_timeout: float = 600.0
    poll_seconds: float = 5.0


@dataclass(frozen=True)
class TrainOptions:
    steps: int
    step_seconds: float = 5.0
    checkpoint_every: int = 0
    nodes: int = 1
    heartbeat_seconds: float = 10.0
    hang_at: int | None = None
    pause_at: int | None = None  # after this step, no step for pause_seconds (heartbeats go on)
    pause_seconds: float = 0.0
    fail_at: int | None = None
    exit_code: int = 1
    signals: bool = True
    exit: bool = False
    driver: DriverOptions | None = None  # not an option of `sim train`
    log_path: str = LOG_PATH  # where checkpoints go: RLinf's log_path/experiment_name

    @property
    def last_step(self) -> int:
        """The last step that completes: the hang's, the one before the failure, or the end."""
        stops = [self.steps, self.hang_at or self.steps, (self.fail_at or self.steps + 1) - 1]
        return max(0, min(stops))

    def saves_at(self, step: int) -> bool:
        return self.checkpoint_every > 0 and step % self.checkpoint_every == 0


VALUED: dict[str, tuple[str, type]] = {
    "--step-seconds": ("step_seconds", float),
    "--checkpoint-every": ("checkpoint_every", int),
    "--nodes": ("nodes", int),
    "--heartbeat-seconds": ("heartbeat_seconds", float),
    "--hang-at": ("hang_at", int),
    "--pause-at": ("pause_at", int),
    "--pause-seconds": ("pause_seconds", float),
    "--fail-at": ("fail_at", int),
    "--exit-code": ("exit_code", int),
}
FLAGS = {"--no-signals": ("signals", False), "--exit": ("exit", True)}


def parse_train(args: list[str]) -> TrainOptions:
    """The options of `sim train`; ValueError (or IndexError) for what a parser would refuse."""
    fields: dict[str, Any] = {"steps": int(args[0])}
    rest = iter(args[1:])
    for arg in rest:
        name, equals, inline = arg.partition("=")
        if name in FLAGS and not equals:
            key, flag = FLAGS[name]
            fields[key] = flag
        elif name in VALUED:
            key, cast = VALUED[name]
            value = inline if equals else next(rest, None)
            if value is None:
                raise ValueError(f"{name} needs a value")
            fields[key] = cast(value)
        else:
            raise ValueError(arg)
    return _checked(TrainOptions(**fields))


def _checked(options: TrainOptions) -> TrainOptions:
    positive = (options.steps, options.nodes, options.step_seconds, options.heartbeat_seconds)
    ats = [at for at in (options.hang_at, options.fail_at) if at is not None]
    if options.pause_seconds < 0 or (options.pause_at is not None) != (options.pause_seconds > 0):
        raise ValueError("--pause-at K goes with --pause-seconds S > 0")
    if min(positive) <= 0 or options.checkpoint_every < 0 or any(at < 1 for at in ats):
        raise ValueError("counts, steps and seconds must be positive")
    if not 1 <= options.exit_code <= 255:
        raise ValueError("--exit-code must be 1..255")
    return options


@dataclass
class TrainRun:
    """What one container instance of `sim train` has done so far (the kubelet's wakes)."""

    next_beat: float
    next_check: float
    training_from: float | None = None
    step: int = 0
    alive: int = 0  # the Ray nodes last reported
    over: bool = False  # no more steps: hung, failed, or finished
    completed: bool = False  # its completion was reported (the driver then only beats)


def steps_done(options: TrainOptions, training_from: float | None, now: float) -> int:
    if training_from is None:
        return 0
    count = math.floor((now - training_from) / options.step_seconds + EPSILON)
    if options.pause_at is not None and count > options.pause_at:
        paused = now - training_from - options.pause_seconds
        count = max(options.pause_at, math.floor(paused / options.step_seconds + EPSILON))
    return max(0, min(count, options.last_step))


def step_at(options: TrainOptions, training_from: float, step: int) -> float:
    """When `step` is done: every step_seconds, and after a pause (--pause-at K: a trainer that
    stalls for a while and recovers, heartbeats going on) later by the pause."""
    paused = (
        options.pause_seconds if options.pause_at is not None and step > options.pause_at else 0
    )
    return training_from + step * options.step_seconds + paused


def metrics(command: str, step: int) -> dict[str, float]:
    """What the run reports for a step, as RLinf's metric logger names it: a reward that rises,
    a success rate that follows, a loss that falls, each with a little deterministic noise."""
    noise = (fnv32a(f"{command}:{step}".encode()) % 1000) / 1000 - 0.5
    learned = 1 - math.exp(-step / 150)
    return {
        "env/return": round(12.0 + 60.0 * learned + 4.0 * noise, 3),
        "env/success_once": round(min(1.0, max(0.0, 0.05 + 0.85 * learned + 0.06 * noise)), 4),
        "train/actor/policy_loss": round(0.02 + 0.35 * math.exp(-step / 250) + 0.03 * noise, 4),
    }


def table_metrics(options: TrainOptions, command: str, step: int) -> dict[str, float]:
    """The table shows the reported metrics with the step's timings and a few more."""
    seconds = options.step_seconds
    shown = {
        "time/step": seconds,
        "time/generate_rollouts": round(0.62 * seconds, 3),
        "time/actor_training": round(0.31 * seconds, 3),
        "env/episode_len": 80.0 + step % 7,
        "train/actor/grad_norm": round(0.8 + 0.4 * math.exp(-step / 300), 3),
        "train/actor/lr": 2e-6,
    }
    return shown | metrics(command, step)


def logger_line(at: float, text: str, level: str = "INFO") -> str:
    """RLinf's logger: `[LEVEL HH:MM:SS RLinf] message`."""
    return f"[{level} {time.strftime('%H:%M:%S', time.gmtime(at))} RLinf] {text}"


def checkpoint_path(options: TrainOptions, step: int) -> str:
    return f"{options.log_path}/checkpoints/global_step_{step}"


def step_lines(
    options: TrainOptions, command: str, training_from: float, end: float, limit: int
) -> list[tuple[float, str]]:
    """The lines of the last steps done by `end`, at most about `limit` lines of them."""
    count = steps_done(options, training_from, end)
    keep = min(count, limit // len(metric_table(options, command, 1)) + 1)
    lines: list[tuple[float, str]] = []
    for step in range(count - keep + 1, count + 1):
        at = step_at(options, training_from, step)
        if options.saves_at(step):
            lines.append((at, logger_line(at, f"Saving checkpoint at step {step}.")))
        lines.extend((at, line) for line in metric_table(options, command, step))
    return lines


def metric_table(options: TrainOptions, command: str, step: int) -> list[str]:
    """print_metrics_table's box for `step` of `options.steps` (its layout, our numbers)."""
    percent = step / options.steps * 100
    filled = int(BAR * percent / 100)
    bar = "█" * filled + "░" * (BAR - filled)
    elapsed = step * options.step_seconds
    eta = elapsed / step * (options.steps - step)
    lines = ["", f"╭{'─' * (WIDTH - 2)}╮", _title("Metric Table")]
    lines.append(
        _row(f"│ Global Step: {step:4d}/{options.steps} │ Progress: {bar} │ {percent:5.1f}%")
    )
    timing = f"Elapsed: {_clock(elapsed)} │ ETA: {_clock(eta)} │ Step Time: {elapsed / step:.3f}s"
    lines.append(_row(f"│ {timing}"))
    values = table_metrics(options, command, step)
    for title, prefix in SECTIONS:
        shown = sorted(
            (k.removeprefix(prefix), v) for k, v in values.items() if k.startswith(prefix)
        )
        lines += [_title(title), _blank()]
        for first in range(0, len(shown), 3):
            cells = [f"{name}={_number(value)}" for name, value in shown[first : first + 3]]
            cells += [""] * (3 - len(cells))
            row = zip(cells, COLUMNS, strict=True)
            lines.append("".join(f"│{_fit(cell, width)}" for cell, width in row) + "│")
        lines.append(_blank())
    return [*lines, f"╰{'─' * (WIDTH - 2)}╯", ""]


def _fit(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def _row(text: str) -> str:
    return f"{_fit(text, WIDTH - 2)} │"


def _blank() -> str:
    return f"│{' ' * (WIDTH - 2)}│"


def _title(title: str) -> str:
    text = f" {title} "
    left = (WIDTH - 2 - len(text)) // 2
    return f"├{'─' * left}{text}{'─' * (WIDTH - 2 - len(text) - left)}┤"


def _clock(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _number(value: float) -> str:
    """RLinf's formatting of a float cell."""
    size = abs(value)
    if (size < 0.001 and value != 0) or size > 10000:
        return f"{value:.2e}"
    if size < 0.01:
        return f"{value:.4f}"
    return f"{value:.1f}" if size > 100 else f"{value:.3f}"


def failure_lines(options: TrainOptions, step: int) -> list[str]:
    """The traceback a failing run prints; its last line is the completion's message."""
    return [
        "Traceback (most recent call last):",
        '  File "/workspace/RLinf/examples/embodiment/train_embodied_agent.py", line 62, in main',
        "    runner.run()",
        '  File "/workspace/RLinf/rlinf/runners/embodied_runner.py", line 560, in run',
        "    self.actor.recv_rollout_trajectories(input_channel=self.actor_channel).wait()",
        f"RuntimeError: simulated training failure at global step {step}, "
        f"exiting with code {options.exit_code}",
    ]
