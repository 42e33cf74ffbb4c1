"""RLinf's own progress lines, read from a log tail (docs/workload-signals.md, "Fallbacks"): the
step, the number of steps, the step time and the metrics, with no change to the training code.

RLinf prints its progress two ways (rlinf/runners, rlinf/utils/metric_utils.py):

- the metric table of `print_metrics_table` (the embodied runners), once per global step:

      ╭──────────────────────────────────────╮
      ├──────────── Metric Table ────────────┤
      │ Global Step:    5/100 │ Progress: ██░░ │   5.0% │
      │ Elapsed: 00:25 │ ETA: 07:55 │ Step Time: 5.000s │
      ├──────────────── Time ────────────────┤
      │actor_training=1.234 │env_step=0.812 │           │
      ...
      ╰──────────────────────────────────────╯

  Each section holds one prefix of RLinf's metric keys (`Time` -> `time/`, `Environment` ->
  `env/`, `Training/Actor` -> `train/` with names starting `actor/`, ...): the keys are given back
  whole, as the runner logged them. A table counts once it is closed (`╰`): one still being
  printed is read on the next pass.
- the tqdm bar "Global Step" of the reasoning, agent and SFT runners, its postfix the step's
  metrics: `Global Step:  42%|████▏     | 42/100 [01:23<01:55,  1.99s/it, loss=0.5, ...]`.
  Without a terminal tqdm redraws the bar after a carriage return: each redraw counts.

A line may start with the timestamp the API server adds (`timestamps=true`): it is the time the
progress was true. The step is the number of steps done (the table's `step + 1`, tqdm's `n`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

MAX_METRICS = 32  # jobs.workload.intake.MAX_METRICS: the first ones read are kept
MAX_NAME = 64

# The API server's timestamp: RFC 3339 with up to nanoseconds (Python reads microseconds).
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d) ")
TABLE_STEP = re.compile(r"│\s*Global Step:\s*(\d+)\s*/\s*(\d+)\s*│")
STEP_TIME = re.compile(r"│.*Step Time:\s*([0-9.]+)s")
TQDM = re.compile(
    r"Global Step:\s*\d+%\|[^|]*\|\s*(\d+)/(\d+)\s*\[[^,\]]*(?:,\s*([0-9.]+)(s/it|it/s))?"
    r"[^,\]]*(.*)\]"
)
SECTION = re.compile(r"^├─+ (.+?) ─+┤\s*$")
PREFIXES = {
    "Time": "time/",
    "Environment": "env/",
    "Rollout": "rollout/",
    "Evaluation": "eval/",
    "Replay Buffer": "replay_buffer/",
    "Training/Actor": "train/",
    "Training/Critic": "train/",
    "Training/Other": "train/",
}


@dataclass
class LogProgress:
    """One progress point read from the log."""

    step: int
    max_steps: int | None = None
    step_seconds: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    at: datetime | None = None


def parse_progress(text: str) -> list[LogProgress]:
    """Every progress point in `text`, oldest first; lines that are not RLinf's are ignored."""
    points: list[LogProgress] = []
    table: LogProgress | None = None
    prefix = ""
    for line in text.splitlines():
        at, line = split_stamp(line)
        for segment in line.split("\r"):
            if "Global Step:" in segment and "%|" in segment:
                points += _tqdm(segment, at)
            elif (step := TABLE_STEP.search(segment)) is not None:
                table = LogProgress(int(step[1]), int(step[2]), at=at)
                prefix = ""
            elif table is not None:
                prefix = _table_line(table, segment, prefix)
                if segment.startswith("╰"):
                    points.append(table)
                    table = None
    return points


def split_stamp(line: str) -> tuple[datetime | None, str]:
    """(the API server's timestamp of the line, the line without it)."""
    match = STAMP.match(line)
    if match is None:
        return None, line
    fraction = (match[2] or "")[:6].ljust(6, "0")
    zone = "+00:00" if match[3] == "Z" else match[3]
    return datetime.fromisoformat(f"{match[1]}.{fraction}{zone}"), line[match.end() :]


def _table_line(table: LogProgress, line: str, prefix: str) -> str:
    """Reads one line of an open table into it; the section's key prefix after the line."""
    if (title := SECTION.match(line)) is not None:
        return PREFIXES.get(title[1], "")
    if (step_time := STEP_TIME.search(line)) is not None:
        table.step_seconds = _number(step_time[1])
    elif prefix and line.startswith("│"):
        cells = (cell.strip() for cell in line.strip().strip("│").split("│"))
        _add_metrics(table.metrics, cells, prefix)
    return prefix


def _tqdm(segment: str, at: datetime | None) -> list[LogProgress]:
    match = TQDM.search(segment)
    if match is None:
        return []
    point = LogProgress(int(match[1]), int(match[2]), at=at)
    rate = _number(match[3]) if match[3] else None
    if rate:
        point.step_seconds = rate if match[4] == "s/it" else 1 / rate
    _add_metrics(point.metrics, match[5].split(", "), "")
    return [point]


def _add_metrics(metrics: dict[str, float], cells: Iterable[str], prefix: str) -> None:
    """`name=value` cells with a finite number; a cut cell (`…`) or a text value is left out."""
    for cell in cells:
        name, equals, value = cell.strip(" ,").partition("=")
        number = _number(value) if equals else None
        key = prefix + name.strip()
        if number is None or not name.strip() or len(key) > MAX_NAME:
            continue
        if len(metrics) < MAX_METRICS or key in metrics:
            metrics[key] = number


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None
