"""The idle policy `stop_when_idle_minutes` (issue 33, Build 3): a Job whose workload has been
Stalled, Unresponsive or finished-but-held that long is stopped by the console within one sync
cycle, as stop_on_completion does; never a Silent one, never one whose own policy is off."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.utils import translation

from console.models import AuditEvent, Cluster, Project
from jobs.messages import render_text
from jobs.models import Job, Operation
from tests.engine.conftest import submit, task
from tests.usage.conftest import Clock, say, sync, timeline

GPUS = {"cpu": "1", "memory": "1Gi", "gpu": 1}


def started(alice: User, sim_cluster: Cluster, clock: Clock, **policies: Any) -> Job:
    job = submit(alice, sim_cluster, "train", task("worker", resources=GPUS))
    policies = {"heartbeat_seconds": 3600, "stall_after_seconds": 60, **policies}
    Job.objects.filter(pk=job.pk).update(spec={**job.spec, "policies": policies})
    for _cycle in range(6):
        sync(sim_cluster)
        if timeline(job) and timeline(job)[-1][1] == "silent":
            return job
        clock.advance(2)
    raise AssertionError(timeline(job))


def stops(job: Job) -> list[Operation]:
    return list(Operation.objects.filter(job=job, action="stop"))


def test_it_stops_a_stalled_job_within_one_cycle_of_its_minutes(
    alice: User, sim_cluster: Cluster, clock: Clock
) -> None:
    job = started(alice, sim_cluster, clock, stop_when_idle_minutes=2)
    say(job, {"kind": "progress", "step": 1})
    clock.advance(60 + 115)  # stalled at 60 s; the policy acts at 60 + 120 s
    sync(sim_cluster)
    assert stops(job) == []
    clock.advance(10)
    sync(sim_cluster)
    [stop] = stops(job)
    assert stop.user is None and stop.result == Operation.Result.ACCEPTED
    with translation.override("en"):
        words = render_text(stop.message)
    assert "was Stalled for 2 min" in words and "stop_when_idle_minutes" in words
    assert AuditEvent.objects.filter(action="job.stop", actor=None).count() == 1
    job.refresh_from_db()
    assert job.stopped
    for _cycle in range(4):  # the stop is applied like a user's: the pod goes, its GPUs freed
        clock.advance(1)
        sync(sim_cluster)
    assert [row[1] for row in timeline(job)][-2:] == ["stalled", "stopping"]
    assert timeline(job)[-1][3] is not None


def test_it_never_stops_a_silent_job(alice: User, sim_cluster: Cluster, clock: Clock) -> None:
    """A run that never signalled is not judged idle."""
    job = started(alice, sim_cluster, clock, stop_when_idle_minutes=1)
    for _cycle in range(3):
        clock.advance(3600)
        sync(sim_cluster)
    assert stops(job) == []
    assert timeline(job)[-1][1:] == ("silent", timeline(job)[-1][2], None)


def test_it_takes_the_projects_default_unless_the_job_sets_it_off(
    alice: User, sim_cluster: Cluster, clock: Clock, project: Project
) -> None:
    Project.objects.filter(pk=project.pk).update(stop_when_idle_minutes=1)
    job = started(alice, sim_cluster, clock, stop_when_idle_minutes=0)
    say(job, {"kind": "completion", "outcome": "succeeded"})  # finished, GPUs still held
    clock.advance(600)
    sync(sim_cluster)
    assert stops(job) == []
    Job.objects.filter(pk=job.pk).update(spec={**job.spec, "policies": {}})
    clock.advance(5)
    say(job, {"kind": "heartbeat"})  # judged again by signal intake: the default applies now
    sync(sim_cluster)
    assert len(stops(job)) == 1


def test_an_operator_sets_the_projects_default_on_its_page(
    client: Client, olga: User, alice: User, project: Project
) -> None:
    client.force_login(olga)
    path = f"/projects/{project.pk}/idle-policy/"
    assert client.post(path, {"stop_when_idle_minutes": "0"}).status_code == 422
    assert client.post(path, {"stop_when_idle_minutes": "45"}).status_code == 302
    project.refresh_from_db()
    assert project.stop_when_idle_minutes == 45
    audited = AuditEvent.objects.get(action="policy.change", detail="stop_when_idle_minutes: 45")
    assert audited.actor == olga
    client.force_login(alice)
    assert client.post(path, {"stop_when_idle_minutes": ""}).status_code == 403
    page = client.get(f"/projects/{project.pk}/").content.decode()
    assert "idle for 45 minutes" in page
