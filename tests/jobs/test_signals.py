"""POST /api/v1/jobs/{id}/signals: the Job's token, every kind valid and invalid, duplicates,
the caps, and a 3-day run's rows staying bounded."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from console import metrics
from console.models import ApiToken, Cluster
from jobs.models import Job, Signal, WorkloadReport
from jobs.workload.intake import BATCH, signal_token, token_owner
from jobs.workload.report import record

POD, UID = "ppo-math-head-0", "0f5a3c1e-uid"
VALID: dict[str, dict[str, Any]] = {
    "heartbeat": {},
    "phase": {"phase": "training"},
    "progress": {"step": 12, "max_steps": 100, "step_seconds": 3.5, "metrics": {"loss": 0.25}},
    "checkpoint": {"step": 10, "path": "s3://ckpt/ppo/10"},
    "ray": {"expected_nodes": 4, "alive_nodes": 3, "gpus": 24},
    "completion": {"outcome": "failed", "exit_code": 1, "reason": "NaNLoss", "message": "nan"},
}
KINDS = ("heartbeat", "progress", "ray")
INVALID: dict[str, list[dict[str, Any]]] = {
    "heartbeat": [{"step": 1}],
    "phase": [{}, {"phase": "running"}],
    "progress": [
        {},
        {"step": -1},
        {"step": 1, "metrics": {"loss": "low"}},
        {"step": 1, "step_seconds": -2},
    ],
    "checkpoint": [{"step": 1}, {"path": "/ckpt"}, {"step": 1, "path": ""}],
    "ray": [{"expected_nodes": 2}, {"expected_nodes": 2, "alive_nodes": -1}],
    "completion": [{}, {"outcome": "crashed"}, {"outcome": "failed", "reason": "x" * 200}],
}


@pytest.fixture(autouse=True)
def _fresh_rate() -> None:
    cache.clear()


@pytest.fixture
def job(alice: User, cluster: Cluster) -> Job:
    return Job.objects.create(
        project=alice.memberships.get().project, cluster=cluster, name="ppo-math",
        namespace="default", owner=alice, spec={"tasks": []}, run=2,
    )  # fmt: skip


def message(kind: str, seq: int, pod: str = POD, uid: str = UID, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "pod": pod, "uid": uid, "seq": seq, **VALID[kind], **fields}


def post(job_id: int, body: Any, token: str | None, raw: str | None = None) -> Any:
    """As a pod posts: no session, no CSRF token (the endpoint is token-authenticated)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    data = raw if raw is not None else json.dumps(body)
    return Client(enforce_csrf_checks=True).post(
        f"/api/v1/jobs/{job_id}/signals", data, "application/json", headers=headers
    )


def token(job: Job) -> str:
    return signal_token(job.pk, job.run)


# --- tokens ------------------------------------------------------------------------------------


def test_it_derives_one_token_per_job_and_run_which_names_them() -> None:
    assert signal_token(7, 2) == signal_token(7, 2)
    assert len({signal_token(7, 2), signal_token(7, 3), signal_token(8, 2)}) == 3
    assert token_owner(signal_token(7, 2)) == (7, 2)
    forged = signal_token(7, 2).replace("7.2.", "8.2.", 1)
    assert token_owner(forged) is None
    assert token_owner("7.2") is None and token_owner("") is None


def test_it_answers_401_without_a_token_or_with_a_wrong_or_a_users_token(job: Job) -> None:
    user_token = ApiToken.issue(job.owner, name="ci")[1]  # type: ignore[arg-type]
    for given in (None, "", "nope", token(job)[:-2] + "xx", user_token):
        response = post(job.pk, message("heartbeat", 1), given)
        assert response.status_code == 401, given
        assert response.json()["message_code"] == "signals.token"
        assert response["WWW-Authenticate"] == "Bearer"
    assert not Signal.objects.exists()


def test_it_answers_403_to_another_jobs_token_and_to_an_earlier_runs(job: Job) -> None:
    other = Job.objects.create(
        project=job.project, cluster=job.cluster, name="other", namespace="default",
        spec={"tasks": []},
    )  # fmt: skip
    response = post(job.pk, message("heartbeat", 1), token(other))
    assert (response.status_code, response.json()["message_code"]) == (403, "signals.other_job")
    response = post(job.pk, message("heartbeat", 1), signal_token(job.pk, job.run - 1))
    assert (response.status_code, response.json()["message_code"]) == (403, "signals.old_run")
    assert not Signal.objects.exists()


def test_it_answers_404_when_the_job_is_gone(job: Job) -> None:
    given = token(job)
    job.delete()
    assert post(int(given.split(".")[0]), message("heartbeat", 1), given).status_code == 404


# --- kinds -------------------------------------------------------------------------------------


def test_it_accepts_every_kind_and_stores_its_fields(job: Job) -> None:
    batch = [message(kind, seq) for seq, kind in enumerate(VALID)]
    batch[0]["at"] = "2026-12-01T10:00:00Z"
    response = post(job.pk, batch, token(job))
    assert (response.status_code, response.json()) == (202, {"accepted": 6, "duplicates": 0})
    stored = {row.kind: row for row in Signal.objects.filter(job=job)}
    assert set(stored) == set(VALID)
    for kind, fields in VALID.items():
        assert stored[kind].data == fields
        assert (stored[kind].run, stored[kind].pod, stored[kind].uid) == (2, POD, UID)
    assert stored["heartbeat"].at == datetime(2026, 12, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kind", "fields"), [(kind, fields) for kind, cases in INVALID.items() for fields in cases]
)
def test_it_refuses_an_invalid_message_of_each_kind_saying_where(
    job: Job, kind: str, fields: dict[str, Any]
) -> None:
    body = {"kind": kind, "pod": POD, "uid": UID, "seq": 1, **fields}
    response = post(job.pk, [message("heartbeat", 0), body], token(job))
    assert response.status_code == 422
    assert response.json()["message_code"] == "signals.invalid"
    assert all(path.startswith(f"1.{kind}") for path in response.json()["errors"])
    assert not Signal.objects.exists()  # all or nothing


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"kind": "gossip", "pod": POD, "uid": UID, "seq": 1}, "signals.invalid"),
        ({"kind": "heartbeat", "uid": UID, "seq": 1}, "signals.invalid"),
        ({"kind": "heartbeat", "pod": POD, "uid": UID, "seq": -1}, "signals.invalid"),
        ({"kind": "heartbeat", "pod": POD, "uid": "", "seq": 1}, "signals.invalid"),
        (
            {"kind": "heartbeat", "pod": POD, "uid": UID, "seq": 1, "at": "2026-12-01T10:00:00"},
            "signals.invalid",
        ),  # no time zone
        (
            {
                "kind": "progress",
                "pod": POD,
                "uid": UID,
                "seq": 1,
                "step": 1,
                "metrics": {"loss": float("nan")},
            },
            "signals.invalid",
        ),
        ([], "signals.batch"),
        ("heartbeat", "signals.invalid"),
    ],
)
def test_it_refuses_malformed_messages(job: Job, body: Any, code: str) -> None:
    response = post(job.pk, body, token(job))
    assert (response.status_code, response.json()["message_code"]) == (422, code)


def test_it_refuses_a_body_that_is_not_json(job: Job) -> None:
    response = post(job.pk, None, token(job), raw="{not json")
    assert (response.status_code, response.json()["message_code"]) == (422, "signals.not_json")


# --- duplicates --------------------------------------------------------------------------------


def test_it_counts_a_resent_message_once(job: Job) -> None:
    first = post(job.pk, message("progress", 5), token(job))
    again = post(job.pk, [message("progress", 5), message("progress", 6, step=13)], token(job))
    assert first.json() == {"accepted": 1, "duplicates": 0}
    assert again.json() == {"accepted": 1, "duplicates": 1}
    twice = post(job.pk, [message("heartbeat", 7), message("heartbeat", 7)], token(job))
    assert twice.json() == {"accepted": 1, "duplicates": 1}
    assert Signal.objects.filter(job=job).count() == 3


def test_it_folds_nothing_of_a_duplicate_whatever_it_carries_now(job: Job) -> None:
    """Issue 31, defect 2: a message resent with other content (same pod, uid and seq) is a
    duplicate, and a duplicate changes nothing: neither the stored row nor the report."""
    post(job.pk, message("progress", 5), token(job))  # step 12
    before = WorkloadReport.objects.get(job=job)

    retried = [message("progress", 5, step=20), message("heartbeat", 6)]
    answer = post(job.pk, retried, token(job))

    assert answer.json() == {"accepted": 1, "duplicates": 1}
    report = WorkloadReport.objects.get(job=job)
    assert report.latest["progress"] == before.latest["progress"]  # step 12, as first received
    assert report.steps == before.steps
    assert "heartbeat" in report.latest  # the new message in the same batch is folded
    assert Signal.objects.get(job=job, seq=5).data["step"] == 12


def test_it_folds_the_first_of_a_message_sent_twice_in_one_batch(job: Job) -> None:
    """The first one is stored; the second, whatever it carries, is its duplicate."""
    twice = [message("completion", 8, outcome="succeeded"), message("completion", 8)]
    answer = post(job.pk, twice, token(job))
    assert answer.json() == {"accepted": 1, "duplicates": 1}
    report = WorkloadReport.objects.get(job=job)
    assert (report.outcome, report.latest["completion"]["outcome"]) == ("succeeded", "succeeded")


def test_it_changes_nothing_for_a_batch_of_duplicates_only(job: Job) -> None:
    post(job.pk, [message("progress", 5), message("heartbeat", 6)], token(job))
    before = WorkloadReport.objects.values().get(job=job)
    answer = post(job.pk, [message("progress", 5, step=30), message("heartbeat", 6)], token(job))
    assert answer.json() == {"accepted": 0, "duplicates": 2}
    assert WorkloadReport.objects.values().get(job=job) == before  # not even its last message


def test_it_starts_a_new_sequence_for_a_recreated_pod(job: Job) -> None:
    post(job.pk, message("heartbeat", 1), token(job))
    response = post(job.pk, message("heartbeat", 1, uid="new-uid"), token(job))
    assert response.json() == {"accepted": 1, "duplicates": 0}


# --- caps --------------------------------------------------------------------------------------


def test_it_refuses_more_than_100_messages_or_32_metrics_or_64_kib(job: Job) -> None:
    batch = [message("heartbeat", seq) for seq in range(101)]
    assert post(job.pk, batch, token(job)).json()["message_code"] == "signals.batch"
    metrics_33 = {f"m{index}": 1.0 for index in range(33)}
    response = post(job.pk, message("progress", 1, metrics=metrics_33), token(job))
    assert response.status_code == 422 and "0.progress.metrics" in response.json()["errors"]
    huge = message("completion", 1, message="x" * 1000)
    response = post(job.pk, None, token(job), raw=json.dumps([huge] * 70))
    assert (response.status_code, response.json()["message_code"]) == (413, "signals.too_large")
    assert post(job.pk, [message("heartbeat", 1)] * 100, token(job)).status_code == 202


def test_it_refuses_a_pod_that_posts_too_fast(job: Job, settings: Any) -> None:
    """A burst of TRAINYARD_SIGNAL_RATE requests per second per pod; the next one is 429 and
    another pod is not affected; the next second is open again."""
    settings.TRAINYARD_SIGNAL_RATE = 3
    with time_machine.travel(datetime(2026, 12, 3, 9, 0, 0, 100_000, tzinfo=UTC), tick=False):
        codes = [
            post(job.pk, message("heartbeat", seq), token(job)).status_code for seq in range(4)
        ]
        assert codes == [202, 202, 202, 429]
        assert post(job.pk, message("heartbeat", 9), token(job)).json()["message_code"] == (
            "signals.too_fast"
        )
        assert post(job.pk, message("heartbeat", 1, pod="other"), token(job)).status_code == 202
    with time_machine.travel(datetime(2026, 12, 3, 9, 0, 1, 100_000, tzinfo=UTC), tick=False):
        assert post(job.pk, message("heartbeat", 10), token(job)).status_code == 202


def test_it_counts_signals_in_the_metrics(job: Job) -> None:
    def received() -> float:
        sample = metrics.SIGNALS_RECEIVED.labels(job.cluster.name, "progress")
        return sample._value.get()  # type: ignore[attr-defined,no-any-return]

    before = received()
    post(job.pk, [message("progress", 1), message("progress", 1)], token(job))
    assert received() == before + 2
    assert b"trainyard_signals_duplicate_total" in metrics.exposition()


# --- compaction --------------------------------------------------------------------------------


def test_a_day_long_run_posting_every_10_seconds_keeps_a_bounded_table(
    job: Job, settings: Any
) -> None:
    """A pod reports a heartbeat, progress and Ray membership every 10 s for a simulated day
    (8,640 batches, stored as the endpoint stores them): heartbeats and Ray reports keep the
    latest per pod UID beyond the 10-minute duplicate window, progress at most
    TRAINYARD_SIGNAL_PROGRESS_POINTS points plus that window, the first step kept and the
    history spread over the whole run. The bound does not grow with the run's length: 8,640
    steps are kept as about 200 points, as a longer run's would be."""
    settings.TRAINYARD_SIGNAL_PROGRESS_POINTS = 200
    ticks, window = 24 * 360, settings.TRAINYARD_SIGNAL_KEEP_SECONDS // 10
    # per pod UID and kind: the window, the newest, and a minute between two compactions
    bound = 2 * (window + 1 + 6) + (window + 6) + 200
    most = 0
    with time_machine.travel(datetime(2026, 12, 1, tzinfo=UTC), tick=False) as clock:
        for tick in range(ticks):
            batch = BATCH.validate_python(
                [message(kind, 3 * tick + n, step=tick) if kind == "progress"
                 else message(kind, 3 * tick + n) for n, kind in enumerate(KINDS)]
            )  # fmt: skip
            recorded = record(job.pk, job.run, batch)
            assert (recorded.accepted, recorded.duplicates) == (3, 0)
            if tick % 360 == 0:
                most = max(most, Signal.objects.count())
            clock.shift(timedelta(seconds=10))
    rows = Signal.objects.filter(job=job)
    assert max(most, rows.count()) <= bound
    steps = sorted(rows.filter(kind="progress").values_list("data__step", flat=True))
    assert steps[0] == 0 and steps[-1] == ticks - 1
    # no hole: the widest gap is two aligned slices (of at most 2 * span / (200 / 2 - 1))
    assert max(b - a for a, b in pairwise(steps)) <= 4 * ticks / 99


def test_a_job_run_is_compacted_once_a_minute_whichever_web_process_answers(
    job: Job, settings: Any
) -> None:
    """The minute is kept in the Job's report row, not in a process's memory: a message folded
    within it compacts nothing, even where the cache is empty (another web process); the first
    one after it compacts every older heartbeat of the pod."""
    settings.TRAINYARD_SIGNAL_KEEP_SECONDS = 1
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    for seconds, seq, rows in ((0, 1, 1), (30, 2, 2), (59, 3, 3), (61, 4, 1)):
        cache.clear()
        with time_machine.travel(t0 + timedelta(seconds=seconds), tick=False):
            record(job.pk, job.run, BATCH.validate_python([message("heartbeat", seq)]))
        assert Signal.objects.filter(job=job).count() == rows, seconds
    assert job.workload.compacted_at == t0 + timedelta(seconds=61)
