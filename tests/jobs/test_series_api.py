"""`GET /api/v1/jobs/{id}/series` (issue 35, "API"): the Job's curves with its checkpoints,
spells, runs and restarts; the Job's access rules; the append poll's cursor and its 204."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from console.models import ApiToken, Cluster
from jobs.choices import JobPhase, WorkloadState
from jobs.models import Job, Signal, Task
from jobs.workload.intake import BATCH
from jobs.workload.report import record
from workers.models import PodInstance

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
POD = "ppo-head-0"


@pytest.fixture(autouse=True)
def _fresh_rate() -> None:
    cache.clear()


@pytest.fixture
def job(alice: User, cluster: Cluster) -> Job:
    return Job.objects.create(
        project=alice.memberships.get().project, cluster=cluster, name="ppo",
        namespace="default", owner=alice, spec={"tasks": [], "policies": {}},
        phase=JobPhase.RUNNING,
    )  # fmt: skip


def say(job: Job, at: datetime, *messages: dict[str, Any], uid: str = "uid-a") -> None:
    with time_machine.travel(at, tick=False):
        items = BATCH.validate_python([{"pod": POD, "uid": uid, **m} for m in messages])
        record(job.pk, job.run, items)


def trained(job: Job) -> None:
    """60 steps a minute apart with a reward and a loss, a checkpoint at step 20, 6 minutes
    without a step after step 30 (heartbeats every 30 s), then the pod re-created (a new UID)."""
    for step in range(60):
        at = T0 + timedelta(minutes=step) + (timedelta(minutes=5) if step > 30 else timedelta())
        metrics = {"rollout/reward": step / 60, "train/loss": 1 - step / 60}
        uid = "uid-a" if step < 45 else "uid-b"
        say(job, at, {"kind": "progress", "seq": step, "step": step, "metrics": metrics}, uid=uid)
        if step == 20:
            say(job, at, {"kind": "checkpoint", "seq": 1000, "step": 20, "path": "s3://c/20"})
        if step == 30:
            for beat in range(1, 12):
                say(
                    job,
                    at + timedelta(seconds=30 * beat),
                    {"kind": "heartbeat", "seq": 2000 + beat},
                )


def get(job_id: int, user: User | None = None, token: str = "", **params: Any) -> Any:
    client = Client()
    if user is not None:
        client.force_login(user)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get(f"/api/v1/jobs/{job_id}/series", params, headers=headers)


def test_it_gives_every_series_with_checkpoints_spells_runs_and_restarts(
    job: Job, alice: User
) -> None:
    trained(job)
    with time_machine.travel(T0 + timedelta(hours=2), tick=False):
        answer = get(job.pk, alice).json()
    names = [(s["name"], s["run"]) for s in answer["series"]]
    assert names == [("step", 1), ("step_rate", 1), ("rollout/reward", 1), ("train/loss", 1)]
    reward = answer["series"][2]["points"]
    assert len(reward) == 60 and reward[0] == [T0.timestamp(), 0, 0.0]
    assert answer["checkpoints"] == [
        {"t": (T0 + timedelta(minutes=20)).timestamp(), "step": 20, "path": "s3://c/20", "run": 1}
    ]
    stalled = answer["spells"][0]
    assert stalled["state"] == WorkloadState.STALLED and stalled["run"] == 1
    # the stall threshold: 5 typical steps of 60 s after the last advance (step 30)
    assert stalled["from"] == (T0 + timedelta(minutes=35)).timestamp()
    assert stalled["to"] == (T0 + timedelta(minutes=36)).timestamp()
    # two hours later the run says nothing: Unresponsive since 3 missed heartbeats, going on
    assert answer["spells"][-1]["state"] == WorkloadState.UNRESPONSIVE
    assert answer["spells"][-1]["to"] is None
    assert answer["runs"] == [{"run": 1, "started_at": T0.timestamp()}]
    restart_at = (T0 + timedelta(minutes=50)).timestamp()
    assert answer["restarts"] == [{"t": restart_at, "pod": POD, "run": 1, "how": "recreated"}]


def test_it_downsamples_to_at_most_500_points_and_refines_a_zoom(job: Job, alice: User) -> None:
    rows = [
        Signal(job=job, run=1, pod=POD, uid="u", seq=n, kind="progress",
               at=T0 + timedelta(seconds=n), data={"step": n, "metrics": {"loss": (n % 97) / 97}})
        for n in range(3000)
    ]  # fmt: skip
    Signal.objects.bulk_create(rows)
    whole = get(job.pk, alice, names="loss").json()["series"]
    assert [s["name"] for s in whole] == ["loss"] and len(whole[0]["points"]) <= 500
    start, end = T0.timestamp() + 1000, T0.timestamp() + 1300
    zoomed = get(job.pk, alice, names="loss", **{"from": str(start), "to": str(end)})
    zoomed = zoomed.json()["series"][0]
    in_whole = [p for p in whole[0]["points"] if start <= p[0] <= end]
    assert len(zoomed["points"]) > 2 * len(in_whole)
    assert all(start <= p[0] <= end for p in zoomed["points"])
    by_step = get(job.pk, alice, names="loss", x="step", to="100").json()
    assert by_step["x"] == "step" and max(p[1] for p in by_step["series"][0]["points"]) == 100


def test_series_access_follows_job_access(
    job: Job, alice: User, bob: User, charlie: User, olga: User
) -> None:
    """Members and operators read it, with a session or a token; another project's Job is 404,
    as is an id that does not exist; no reader at all is 401."""
    trained(job)
    assert get(job.pk).status_code == 401
    assert get(job.pk, charlie).status_code == 404
    assert get(job.pk, token=ApiToken.issue(charlie, name="t")[1]).status_code == 404
    assert get(job.pk, token="not-a-token").status_code == 401
    assert get(999_999, alice).status_code == 404
    for reader in (alice, bob, olga):
        assert get(job.pk, reader).status_code == 200
    assert get(job.pk, token=ApiToken.issue(bob, name="t")[1]).status_code == 200


def test_the_append_poll_answers_204_until_something_new_and_then_only_that(
    job: Job, alice: User
) -> None:
    trained(job)
    now = T0 + timedelta(minutes=65)
    with time_machine.travel(now, tick=False):
        cursor = get(job.pk, alice).json()["cursor"]
        assert get(job.pk, alice, after=cursor).status_code == 204
    say(job, now, {"kind": "progress", "seq": 61, "step": 61, "metrics": {"train/loss": 0.01}},
        uid="uid-b")  # fmt: skip
    with time_machine.travel(now, tick=False):
        newer = get(job.pk, alice, after=cursor)
        assert newer.status_code == 200
        loss = next(s for s in newer.json()["series"] if s["name"] == "train/loss")
        assert loss["points"] == [[now.timestamp(), 61, 0.01]]
        assert get(job.pk, alice, after=newer.json()["cursor"]).status_code == 204


def test_it_overlays_every_run_with_run_all(job: Job, alice: User) -> None:
    trained(job)
    Job.objects.filter(pk=job.pk).update(run=2)
    job.refresh_from_db()
    say(job, T0 + timedelta(hours=3), {"kind": "progress", "seq": 1, "step": 0}, uid="uid-c")
    runs = {(s["name"], s["run"]) for s in get(job.pk, alice, run="all").json()["series"]}
    assert ("step", 1) in runs and ("step", 2) in runs
    current = get(job.pk, alice).json()
    assert {s["run"] for s in current["series"]} == {2} and len(current["runs"]) == 2


@pytest.mark.parametrize(
    "params",
    [
        {"x": "pixels"},
        {"from": "soon"},
        {"points": "0"},
        {"run": "nan"},
        {"to": "nan"},
        {"from": "9000000000000000"},
        {"to": "-9000000000000000"},
    ],
)
def test_it_refuses_a_query_it_cannot_answer(job: Job, alice: User, params: Any) -> None:
    response = get(job.pk, alice, **params)
    assert response.status_code == 422 and response.json()["errors"]["query"]


def test_operators_also_see_the_pods_kubernetes_created_again(
    job: Job, alice: User, olga: User
) -> None:
    """Spec §Pod and Worker status: the instance history is for authorised operators. A member
    sees the workload's word (the pod spoke under a new UID); an operator sees when Kubernetes
    created the pod again, in its place."""
    trained(job)
    task = Task.objects.create(job=job, role="head", template={})
    for uid, minutes in (("k-1", -1), ("k-2", 49)):
        at = T0 + timedelta(minutes=minutes)
        PodInstance.objects.create(task=task, uid=uid, pod_name=POD, phase="Running",
                                   created_at=at, first_seen_at=at, last_seen_at=at)  # fmt: skip
    with time_machine.travel(T0 + timedelta(minutes=70), tick=False):
        members = get(job.pk, alice).json()["restarts"]
        operators = get(job.pk, olga).json()["restarts"]
    assert [r["how"] for r in members] == ["recreated"]
    created = (T0 + timedelta(minutes=49)).timestamp()
    assert operators == [{"t": created, "pod": POD, "run": 1, "how": "pod_created"}]
