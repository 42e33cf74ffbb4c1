"""Retiring a cluster (issue 36, Build 1: "refused while it has live Jobs; its credentials
deleted, its history kept"): nothing becomes live on it afterwards (no resume, no new Job, no
add-on), a second retirement keeps the first time, and a resume racing the retirement is either
counted by it or refused, never both let through (row locks: run on PostgreSQL in CI)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from console import addon_actions, cluster_actions
from console.models import ApiToken, AuditEvent, Cluster
from console.node_actions import ActionRefused
from jobs import operations
from jobs.choices import JobPhase
from jobs.models import Job, Operation
from jobs.spec import SpecInvalid, parse_job_spec
from tests.jobs.test_spec import job_data


def api(method: str, path: str, user: User) -> Any:
    headers = {"Authorization": f"Bearer {ApiToken.issue(user)[1]}"}
    return getattr(Client(), method)(f"/api/v1{path}", headers=headers)


def stopped_job(alice: User) -> Job:
    job = operations.create_job(alice, parse_job_spec(job_data(), alice))
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    return Job.objects.get(pk=job.pk)


def test_a_second_retirement_keeps_the_first_time_and_answers_409(
    olga: User, cluster: Cluster
) -> None:
    first = cluster_actions.retire(olga, cluster).retired_at
    assert first is not None
    with pytest.raises(ActionRefused) as refused:
        cluster_actions.retire(olga, Cluster.objects.get(pk=cluster.pk))
    assert (refused.value.status, refused.value.message) == (
        409,
        "This cluster is retired already.",
    )
    answer = api("delete", "/clusters/gpu-a", olga)
    assert answer.status_code == 409 and "retired already" in answer.json()["message"]
    assert Cluster.objects.get(pk=cluster.pk).retired_at == first
    results = AuditEvent.objects.filter(action=AuditEvent.Action.CLUSTER_RETIRE)
    assert list(results.order_by("pk").values_list("result", flat=True)) == [
        "succeeded", "refused", "refused",
    ]  # fmt: skip
    page = Client()
    page.force_login(olga)
    answer = page.post("/clusters/gpu-a/retire/", follow=True)
    assert "This cluster is retired already." in answer.content.decode()


def test_it_refuses_to_resume_create_or_install_on_a_retired_cluster(
    olga: User, alice: User, cluster: Cluster
) -> None:
    job = stopped_job(alice)
    cluster_actions.retire(olga, cluster)
    with pytest.raises(operations.OperationRefused) as refused:
        operations.resume_job(alice, job)
    assert refused.value.message == (
        "Cluster gpu-a is retired: no Job runs on it again. Clone this one to another cluster."
    )
    answer = api("post", f"/jobs/{job.pk}/resume", alice)
    assert answer.status_code == 409 and "is retired" in answer.json()["message"]
    assert Job.objects.get(pk=job.pk).phase == JobPhase.STOPPED
    assert Operation.objects.filter(job=job, action="resume", result="refused").count() == 2
    with pytest.raises(SpecInvalid) as invalid:
        parse_job_spec(job_data(name="again"), alice)
    assert invalid.value.errors["cluster"] == (
        "Cluster 'gpu-a' is retired: no Job is created on it any more."
    )
    with pytest.raises(ActionRefused) as addon:
        addon_actions.create_addon(olga, Cluster.objects.get(pk=cluster.pk), {"name": "metrics"})
    assert (addon.value.status, addon.value.message) == (409, "This cluster is retired.")


def test_it_refuses_a_job_whose_cluster_was_retired_after_its_spec_was_checked(
    olga: User, alice: User, cluster: Cluster
) -> None:
    spec = parse_job_spec(job_data(), alice)
    cluster_actions.retire(olga, cluster)
    with pytest.raises(SpecInvalid) as invalid:
        operations.create_job(alice, spec)
    assert "retired" in invalid.value.errors["cluster"]
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_resume_racing_a_retirement_is_counted_by_it_never_let_through_beside_it(
    olga: User, alice: User, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resume is held inside its transaction, after its cluster check and its UPDATE; the
    retirement runs meanwhile. Without the cluster row locked by both, the retirement counts no
    live Job (the resume is not committed) and the Job then turns Pending on a retired cluster."""
    job = stopped_job(alice)
    inside, reset = threading.Event(), operations._reset_tasks
    errors: list[BaseException] = []

    def held(job: Job) -> None:
        inside.set()
        time.sleep(0.5)
        reset(job)

    def resume() -> None:
        try:
            operations.resume_job(alice, job)
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            from django.db import connection

            connection.close()

    monkeypatch.setattr(operations, "_reset_tasks", held)
    thread = threading.Thread(target=resume)
    thread.start()
    assert inside.wait(10)
    with pytest.raises(ActionRefused) as refused:
        cluster_actions.retire(olga, Cluster.objects.get(pk=cluster.pk))
    thread.join(10)
    assert errors == []
    assert refused.value.status == 409 and "Pending or Running" in refused.value.message
    assert Cluster.objects.get(pk=cluster.pk).retired_at is None
    assert Job.objects.get(pk=job.pk).phase == JobPhase.PENDING


def test_it_answers_the_retirement_with_its_time_in_the_api(olga: User, cluster: Cluster) -> None:
    answer = api("delete", "/clusters/gpu-a", olga)
    assert answer.status_code == 200
    retired = Cluster.objects.get(pk=cluster.pk).retired_at
    assert retired is not None
    assert json.loads(answer.content)["retired_at"].startswith(retired.strftime("%Y-%m-%dT%H:%M"))
