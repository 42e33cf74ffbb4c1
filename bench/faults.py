"""Cluster faults (issue 13, item 1): runs tests/engine/test_cluster_faults.py, where each fault is
injected with simcluster's fault controls into a cluster holding a Running Job of two Workers, and
tabulates what each test saw (the messages and times it records with `record_property`) and
whether it passed. What a row claims in its "Faulted cycle" and "Recovery" columns is what that
test asserts, so a row is true exactly when its test passed.

The tests run as `make test` runs them: their own SQLite database and in-process brokers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

TESTS = "tests/engine/test_cluster_faults.py"
SURVIVES = "test_it_survives_the_fault_and_recovers_in_the_first_cycle_after_it"
UNREACHABLE, FIRST = "unreachable", "first cycle"

# Test name -> the fault, and what its test asserts of the faulted cycle and of the recovery.
ROWS: dict[str, tuple[str, str, str]] = {
    f"{SURVIVES}[connection refused]": (
        "API server stopped, started again on its address", UNREACHABLE, FIRST),
    f"{SURVIVES}[500]": ("500 for 0.6 s", UNREACHABLE, FIRST),
    f"{SURVIVES}[503]": ("503 for 0.6 s", UNREACHABLE, FIRST),
    f"{SURVIVES}[429 Retry-After]": (
        "429 with `Retry-After: 1` (reason TooManyRequests)",
        "unreachable, no sleep in the cycle", FIRST),
    f"{SURVIVES}[read timeout]": (
        "requests hang 3 s (read timeout)", "unreachable after the read timeout", FIRST),
    f"{SURVIVES}[truncated body]": (
        "bodies cut in half, watches cut after one event", UNREACHABLE, FIRST),
    f"{SURVIVES}[non-JSON body]": ("bodies that are not JSON", UNREACHABLE, FIRST),
    "test_it_restarts_a_list_whose_continue_token_expired_mid_way": (
        "410 on a continue token in the middle of the pods' LIST (pages of 1)",
        "reachable: the LIST restarted, the cycle completed", "—"),
    "test_it_marks_the_cluster_unreachable_when_every_list_keeps_expiring": (
        "410 on every continue token", "unreachable after 3 attempts", FIRST),
    "test_it_relists_when_the_watch_cursor_expired": (
        "410 Expired on the watch (cursor older than the compaction)",
        "reachable: the same cycle relisted", "—"),
    "test_it_reports_a_create_that_meets_a_foreign_object_without_a_false_transition": (
        "409 AlreadyExists: a foreign StatefulSet of the Job's name",
        "reachable; the Job stays Pending; the foreign object untouched; the Task's apply "
        "error is the message", "—"),
    "test_it_takes_a_create_that_meets_its_own_object_as_done": (
        "409 AlreadyExists: the same run's object (another reconcile first)",
        "reachable; success, one StatefulSet", "—"),
    "test_it_keeps_syncing_a_healthy_cluster_on_time_while_another_hangs": (
        "one of two clusters hangs (read timeout 4 s)",
        "the hung cycle took at least 4 s; the other cluster completed cycles (≥ 3, each "
        "< 2 s) meanwhile", "—"),
}  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    passed: bool
    seconds: float  # the test's own time
    seen: dict[str, str]  # what the test recorded


def run_tests(folder: Path, *tests: str, environment: bool = False) -> dict[str, Outcome]:
    """The tests (the fault tests by default), by name, on their own SQLite database and
    in-process brokers unless `environment`: then on the environment's database and broker."""
    report = folder / "tests.xml"
    leave_out = () if environment else ("DATABASE_URL", "REDIS_URL")
    env = {k: v for k, v in os.environ.items() if k not in leave_out}
    command = [sys.executable, "-m", "pytest", "-q", *(tests or [TESTS]),
               f"--junitxml={report}", "-o", "junit_family=xunit1"]  # fmt: skip
    subprocess.run(command, cwd=settings.BASE_DIR, env=env, check=False, timeout=900)
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        failed = any(case.find(tag) is not None for tag in ("failure", "error", "skipped"))
        seen = {item.get("name", ""): item.get("value", "") for item in case.iter("property")}
        outcomes[case.get("name", "")] = Outcome(not failed, float(case.get("time", 0)), seen)
    return outcomes


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "—"


def table(outcomes: dict[str, Outcome]) -> str:
    rows = [
        "| Fault | The cluster's message | Faulted cycle | Recovery | Test |",
        "|---|---|---|---|---|",
    ]
    for name, (fault, cycle, recovery) in ROWS.items():
        outcome = outcomes.get(name)
        if outcome is None:
            rows.append(f"| {fault} | | | | NOT RUN |")
            continue
        took = outcome.seen.get("seconds")
        cycle = f"{cycle} ({took} s)" if took else cycle
        healthy = outcome.seen.get("healthy")
        cycle = f"{cycle}; the other's cycles: {healthy} s" if healthy else cycle
        verdict = "passed" if outcome.passed else "FAILED"
        rows.append(
            f"| {fault} | {_cell(outcome.seen.get('message', ''))} | {cycle} | {recovery} "
            f"| {verdict} |"
        )
    return "\n".join(rows)


def run() -> str:
    with tempfile.TemporaryDirectory() as folder:
        outcomes = run_tests(Path(folder))
    unnamed = sorted(set(outcomes) - set(ROWS))
    passed = sum(outcome.passed for outcome in outcomes.values())
    return "\n".join([
        "## Cluster faults",
        "",
        "Each fault injected with simcluster's fault controls into a cluster holding a Running "
        f"Job of two Workers, synced by watch (`{TESTS}`, in `make test`; connect and read "
        "timeouts 1 s). In every case the faulted cycle changed no Job, Task, Worker, pod "
        "instance or Node row, marked the cluster unreachable with the message below, kept its "
        "last successful sync time and released its lease; the first cycle after the fault "
        "ended was reachable (a relist: the cursors were dropped) and left every status as it "
        "was. Each row is one test's assertions, with the message and times it saw in this run.",
        "",
        table(outcomes),
        "",
        f"- {passed} of {len(outcomes)} tests passed"
        + (f"; tests without a row: {', '.join(unnamed)}" if unnamed else "")
        + ".",
    ])  # fmt: skip
