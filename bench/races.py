"""Races and process faults (issue 13, items 2 and 3): runs the tests that make them —
tests/jobs/test_concurrency.py and tests/console/test_process_faults.py — on the environment's
database and broker (`make bench`: PostgreSQL and Redis, where requests truly run in parallel
under row locks) and tabulates each test's claim, what its requests got (recorded with
`record_property`) and whether it passed. A row's claim is what its test asserts, so a row is
true exactly when its test passed."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.db import connection

from bench.faults import Outcome, _cell, run_tests

RACES = "tests/jobs/test_concurrency.py"
PROCESS_FAULTS = "tests/console/test_process_faults.py"

# Test name -> what runs at once, and what the test asserts of the end.
RACE_ROWS: dict[str, tuple[str, str]] = {
    "test_it_ends_in_one_legal_state_with_one_operation_per_transition": (
        "50 threads, each with its own connection, alternate stop and resume on one Running "
        "Job, 4 times each",
        "one legal state (Stopped and stopped, or Pending and resumed); the accepted operations "
        "alternate stop, resume, ...; one Operation per request; one reconcile per acceptance; "
        "the run counts the resumes"),
    "test_it_takes_one_delete_and_keeps_every_other_operation_legal_under_a_crowd": (
        "24 API clients at once send stop, resume and clone in turn, every third a delete last",
        "one delete accepted, last; stops and resumes before it alternate; after it 404 or "
        "409; each clone a new Job; one Operation per request that found the Job"),
    "test_it_creates_one_job_and_one_statefulset_per_task_when_a_name_is_sent_at_once": (
        "16 API clients create the same Job at once, then 8 reconciles of it at once",
        "one 201, fifteen 422 naming the field; one create Operation; one StatefulSet per Task"),
}  # fmt: skip

# Test name -> the fault, and what the test asserts.
FAULT_ROWS: dict[str, tuple[str, str]] = {
    "test_it_redelivers_a_sync_and_a_reconcile_killed_mid_task_and_both_converge": (
        "a worker killed with SIGKILL (its pool with it) while its sync's first LIST and its "
        "reconcile's create were held at the cluster",
        "a second worker received both tasks again (acks_late) and converged: one StatefulSet, "
        "the Operation applied, the cluster synced, its lease free"),
    "test_it_never_syncs_a_cluster_twice_at_once_under_two_beats": (
        "two beats and two workers, every request 250 ms late, 20 ticks of each beat",
        "no two cycles of one cluster overlapped; the clusters kept syncing; the other beat's "
        "syncs were skipped (the lease)"),
    "test_it_syncs_again_after_redis_restarts": (
        "Redis stopped under a worker and a beat, started again on its port",
        "a sync after the restart; the beat not restarted; the worker not restarted, unless its "
        "liveness probe (deploy/console/worker.yaml) failed three times in a row"),
    "test_it_counts_an_overlap_when_two_cycles_of_one_cluster_hold_it_at_once": (
        "the overlap count of the two-beats test, on spans made up for it",
        "two cycles of one cluster holding it at once count as an overlap; one after the "
        "other, or of two clusters, do not"),
}  # fmt: skip


def table(rows: dict[str, tuple[str, str]], outcomes: dict[str, Outcome], head: str) -> str:
    lines = [f"| {head} | What the test asserts | Seen | Test |", "|---|---|---|---|"]
    for name, (what, claim) in rows.items():
        outcome = outcomes.get(name)
        if outcome is None:
            lines.append(f"| {what} | {claim} | | NOT RUN |")
            continue
        verdict = f"passed ({outcome.seconds:.0f} s)" if outcome.passed else "FAILED"
        lines.append(f"| {what} | {claim} | {_cell(outcome.seen.get('seen', ''))} | {verdict} |")
    return "\n".join(lines)


def run() -> str:
    with tempfile.TemporaryDirectory() as folder:
        outcomes = run_tests(Path(folder), RACES, PROCESS_FAULTS, environment=True)
    unnamed = sorted(set(outcomes) - set(RACE_ROWS) - set(FAULT_ROWS))
    passed = sum(outcome.passed for outcome in outcomes.values())
    database = connection.vendor
    return "\n".join([
        "## Races and process faults",
        "",
        f"`{RACES}` and `{PROCESS_FAULTS}` (both in `make test`), run here on {database} and "
        "the environment's broker. Each row is one test's assertions, with what its requests "
        "got in this run.",
        "",
        table(RACE_ROWS, outcomes, "Race"),
        "",
        table(FAULT_ROWS, outcomes, "Process fault"),
        "",
        "PostgreSQL restarted under load: its own section below.",
        "",
        f"- {passed} of {len(outcomes)} tests passed"
        + (f"; tests without a row: {', '.join(unnamed)}" if unnamed else "")
        + ".",
    ])  # fmt: skip
