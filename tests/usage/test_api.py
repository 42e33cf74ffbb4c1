"""`GET /api/v1/usage`, `/api/v1/usage.csv` and the Job object's `usage` (issue 33, Build 5):
read from the hourly roll-ups and the intervals at the period's edges; members see their
projects' rows only; `from`/`to` are ISO 8601 and a bad one is a 422 naming it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client

from console.models import ApiToken, Cluster, Project
from jobs.choices import JobPhase, UsageClass
from jobs.models import Job, Task
from usage.ledger import roll_up
from usage.models import GpuInterval

NOW = datetime(2026, 5, 4, 12, 30, tzinfo=UTC)
API = "/api/v1"


def at(hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 5, 4, hour, minute, second, tzinfo=UTC)


def held(job: Job, klass: UsageClass, gpus: int, start: datetime, end: datetime | None) -> None:
    """An interval of the ledger; a closed one is rolled up as the ledger does."""
    task = job.tasks.first() or Task.objects.create(job=job, role="worker", template={})
    row = GpuInterval.objects.create(
        job=job, run=job.run, task=task, cluster=job.cluster, pod_uid=f"{job.pk}-{start}",
        pod_name="worker-0", gpus=gpus, usage_class=klass, started_at=start, ended_at=end,
    )  # fmt: skip
    if end is not None:
        roll_up([row])


def job_of(owner: User, project: Project, cluster: Cluster, name: str) -> Job:
    return Job.objects.create(
        project=project, cluster=cluster, name=name, namespace="default", owner=owner,
        spec={"tasks": []}, phase=JobPhase.RUNNING,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def now() -> Iterator[None]:
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def ledger(
    alice: User, charlie: User, project: Project, other_project: Project, cluster: Cluster
) -> dict[str, Job]:
    """ppo (vision, alice): 2 GPUs progressing 09:30-10:30 and stalled 10:30-12:00, then 1 GPU
    finished since 12:00 (open); asr (speech, charlie): 1 GPU progressing 10:00-11:00."""
    ppo = job_of(alice, project, cluster, "ppo")
    held(ppo, UsageClass.PROGRESSING, 2, at(9, 30), at(10, 30))
    held(ppo, UsageClass.STALLED, 2, at(10, 30), at(12))
    held(ppo, UsageClass.FINISHED, 1, at(12), None)
    asr = job_of(charlie, other_project, cluster, "asr")
    held(asr, UsageClass.PROGRESSING, 1, at(10), at(11))
    return {"ppo": ppo, "asr": asr}


def get(path: str, user: User | None) -> Any:
    headers = {"Authorization": f"Bearer {ApiToken.issue(user, name='t')[1]}"} if user else {}
    return Client().get(f"{API}{path}", headers=headers)


PERIOD = "from=2026-05-04T09:45:00Z&to=2026-05-04T18:00:00Z"


def test_it_answers_only_with_a_token(ledger: dict[str, Job]) -> None:
    assert get(f"/usage?{PERIOD}", None).status_code == 401
    assert get(f"/usage.csv?{PERIOD}", None).status_code == 401


def test_it_gives_a_member_her_projects_rows_to_now(alice: User, ledger: dict[str, Job]) -> None:
    """The edges from the intervals (09:45-10:00), whole hours from the roll-ups, the open
    interval up to now (`to` lies in the future)."""
    body = get(f"/usage?{PERIOD}&group_by=job", alice).json()
    assert (body["from"], body["to"]) == ("2026-05-04T09:45:00+00:00", "2026-05-04T18:00:00+00:00")
    [row] = body["rows"]
    assert (row["key"], row["label"]) == (ledger["ppo"].pk, "ppo")
    assert row["by_class"]["progressing"] == 1.5  # 2 GPUs x 45 min
    assert row["by_class"]["stalled"] == 3.0  # 2 GPUs x 90 min
    assert row["by_class"]["finished"] == 0.5  # 1 GPU x 30 min, until now
    assert (row["gpu_hours"], row["wasted_gpu_hours"]) == (5.0, 3.5)
    assert set(row["by_class"]) == set(UsageClass.values)


def test_it_gives_an_operator_every_project(olga: User, ledger: dict[str, Job]) -> None:
    body = get(f"/usage?{PERIOD}&group_by=project", olga).json()
    assert [(r["key"], r["gpu_hours"]) for r in body["rows"]] == [("vision", 5.0), ("speech", 1.0)]
    by_user = get(f"/usage?{PERIOD}&group_by=user&project=speech", olga).json()["rows"]
    assert [(r["key"], r["gpu_hours"]) for r in by_user] == [("charlie", 1.0)]


def test_it_hides_other_projects_from_an_outsider(charlie: User, ledger: dict[str, Job]) -> None:
    rows = get(f"/usage?{PERIOD}&group_by=cluster&project=vision", charlie).json()["rows"]
    assert rows == []


def test_it_keeps_a_short_run_from_rounding_to_zero(
    alice: User, project: Project, cluster: Cluster
) -> None:
    blip = job_of(alice, project, cluster, "blip")
    held(blip, UsageClass.STARTING, 1, at(11, 0, 0), at(11, 0, 1))
    [row] = get(f"/usage?{PERIOD}", alice).json()["rows"]
    assert row["gpu_hours"] == 0.000278 and row["by_class"]["starting"] == 0.000278


@pytest.mark.parametrize(
    ("query", "field"),
    [("from=yesterday", "from"), (f"{PERIOD}&to=noon", "to"),
     ("from=2026-05-04&to=2026-05-03", "to"), (f"{PERIOD}&group_by=team", "group_by")],
)  # fmt: skip
def test_it_names_a_bad_parameter(alice: User, query: str, field: str) -> None:
    response = get(f"/usage?{query}", alice)
    assert response.status_code == 422
    assert field in response.json()["errors"]
    assert get(f"/usage.csv?{query}", alice).status_code == 422


def test_it_exports_the_same_rows_as_csv(olga: User, ledger: dict[str, Job]) -> None:
    response = get(f"/usage.csv?{PERIOD}&group_by=project", olga)
    assert response["Content-Type"].startswith("text/csv")
    header, vision, speech = response.content.decode().splitlines()
    assert header == "key,label,gpu_hours,wasted_gpu_hours," + ",".join(UsageClass.values)
    assert vision.startswith("vision,vision,5.000000,3.500000,0.000000,1.500000")
    assert speech.startswith("speech,speech,1.000000,0.000000")


def test_it_gives_the_job_object_its_usage(alice: User, ledger: dict[str, Job]) -> None:
    job = ledger["ppo"]
    body = get(f"/jobs/{job.pk}", alice).json()
    assert body["usage"]["gpu_hours"] == 2.0 + 3.0 + 0.5
    assert body["usage"]["wasted_gpu_hours"] == 3.5
    assert body["usage"]["run_gpu_hours"] == 5.5
    assert body["usage"]["utilisation"] is None  # its cluster has no Prometheus
    assert body["policies"]["stop_when_idle_minutes"] is None


def test_it_accepts_the_idle_policy_in_a_spec(alice: User, cluster: Cluster) -> None:
    spec = {
        "name": "idle", "cluster": cluster.name,
        "tasks": [{"role": "worker", "kind": "StatefulSet", "replicas": 1, "image": "x:1"}],
    }  # fmt: skip
    headers = {"Authorization": f"Bearer {ApiToken.issue(alice, name='t')[1]}"}
    for minutes, status in ((30, 201), (10_081, 422), (-1, 422)):
        body = {
            **spec,
            "name": f"idle{status}{minutes}",
            "policies": {"stop_when_idle_minutes": minutes},
        }
        response = Client().post(
            f"{API}/jobs", body, content_type="application/json", headers=headers
        )
        assert response.status_code == status, response.content
    assert Job.objects.get(name="idle20130").spec["policies"]["stop_when_idle_minutes"] == 30


def test_it_answers_every_period_for_the_week_before_by_default(
    alice: User, ledger: dict[str, Job]
) -> None:
    body = get("/usage", alice).json()
    assert body["from"] == (NOW - timedelta(days=7)).isoformat()
    assert body["rows"][0]["gpu_hours"] == 5.5
