"""The job page tells the truth (spec §Where to look, §Job status, §Task status, §Pod and Worker
status): open Worker rows refresh, the Observed card shows one observation and the console's own
decision as such, small wording fixes, and the troubleshooting record of §Do not treat Worker
rows as a retry history."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import User
from django.test import Client

from console.models import Cluster, Membership, Project
from jobs.choices import Action, JobPhase, PodPhase, TaskPhase
from jobs.models import Job, Operation
from tests.web.test_jobs import (
    HTMX,
    NOW,
    add_task,
    add_worker,
    body,
    frozen_clock,
    get,
    job,
    make_job,
    operator,
    reachable,
    record,
)
from workers.models import PodInstance, Worker

__all__ = ["frozen_clock", "job", "operator", "reachable"]  # fixtures used here


# --- 1. open Worker rows refresh with the page ----------------------------------------------


def test_it_lets_the_open_worker_rows_poll_their_own_fragment(
    client: Client, job: Job, alice: User
) -> None:
    """The <details> targets its slot on first open; the fragment loaded into it must not
    inherit that target (htmx:targetError on every poll, rows frozen at their first value)."""
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    details = html[html.index('<details id="workers-') :].split(">")[0]
    assert 'hx-target="find .workers-slot"' in details and 'hx-disinherit="*"' in details
    assert "hx-preserve" in details, "open rows stay open across the status refresh"
    task = job.tasks.get()
    fragment = body(get(client, alice, f"/jobs/{job.pk}/tasks/{task.pk}/workers/", **HTMX))
    head = fragment[fragment.index('<div class="workers"') :].split(">")[0]
    assert 'hx-target="this"' in head and "every 5s" in head and "data-poll" in head


# --- 3. the Observed card: one observation, and the console's decision as such ------------


def test_it_shows_a_stop_not_yet_observed_as_the_consoles_decision(
    client: Client, job: Job, alice: User
) -> None:
    """Spec §Job status: stop sets `spec.stopped` and the phase Stopped at once; until the
    cluster reports after it, the card says the phase is the console's decision, and the time
    and message it shows are those of the last report (from before the stop)."""
    Job.objects.filter(pk=job.pk).update(
        phase=JobPhase.STOPPED, stopped=True, message="worker: Running — 2/2 replicas ready"
    )
    stop = record(job, alice, Action.STOP, Operation.Result.ACCEPTED)
    Operation.objects.filter(pk=stop.pk).update(requested_at=NOW - timedelta(seconds=1))
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    card = html[html.index("cluster report</span>") :].split("</section>")[0]
    assert 'id="phase-decision"' in card and "decided by the console" in card
    assert "spec.stopped was set to true by alice" in card
    assert "not observed since the decision" in card
    observed = card[card.index('id="observed-at"') :].split("</dd>")[0]
    assert "2026-03-02 11:59:57" in observed, "the last report's time, not the stop's"


def test_it_shows_the_phase_as_observed_once_the_cluster_reported_after_the_stop(
    client: Client, job: Job, alice: User, reachable: Cluster
) -> None:
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    stop = record(job, alice, Action.STOP, Operation.Result.APPLIED)
    Operation.objects.filter(pk=stop.pk).update(requested_at=NOW - timedelta(seconds=10))
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    card = html[html.index("cluster report</span>") :].split("</section>")[0]
    assert "decided by the console" not in card
    assert 'data-status="Stopped"' in card


def test_it_never_calls_a_refused_stop_a_decision(client: Client, job: Job, alice: User) -> None:
    record(job, alice, Action.STOP, Operation.Result.REFUSED, "no")
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert "decided by the console" not in html


# --- 13. small ones on the job page ------------------------------------------------------


def test_it_links_the_clone_source_by_its_name(
    client: Client, job: Job, alice: User, project: Project, reachable: Cluster
) -> None:
    clone = make_job(project, reachable, "train-2", owner=alice, cloned_from=job)
    html = body(get(client, alice, f"/jobs/{clone.pk}/"))
    assert f'<a href="/jobs/{job.pk}/">train</a>' in html and f"#{job.pk}</a>" not in html


def test_it_does_not_name_a_clone_source_the_viewer_cannot_see(
    client: Client, job: Job, charlie: User, other_project: Project, reachable: Cluster
) -> None:
    clone = make_job(other_project, reachable, "copied", owner=charlie, cloned_from=job)
    html = body(get(client, charlie, f"/jobs/{clone.pk}/"))
    assert "not visible to you, or deleted" in html and ">train<" not in html


def test_it_says_pending_until_reported_only_until_the_cluster_reported(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    fresh = make_job(project, reachable, "fresh", JobPhase.PENDING, owner=alice, observed_at=None)
    html = body(get(client, alice, f"/jobs/{fresh.pk}/?part=status", **HTMX))
    assert "Pending until the cluster reports it" in html
    Job.objects.filter(pk=fresh.pk).update(phase=JobPhase.RUNNING, observed_at=NOW)
    html = body(get(client, alice, f"/jobs/{fresh.pk}/?part=status", **HTMX))
    assert "Pending until the cluster reports it" not in html


# --- 14. the troubleshooting record ------------------------------------------------------


def bad_image_job(project: Project, cluster: Cluster, alice: User) -> Job:
    broken = make_job(project, cluster, "bad", JobPhase.PENDING, owner=alice,
                      created_at=NOW - timedelta(hours=1))  # fmt: skip
    task = add_task(broken, phase=TaskPhase.PENDING, ready_replicas=0, workload_replicas=2,
                    message="0/2 replicas ready")  # fmt: skip
    add_worker(task, "bad-worker-0", phase=PodPhase.PENDING, ready=False, ip="10.0.0.8",
               reason="ImagePullBackOff", message="Back-off", pod_uid="uid-a")  # fmt: skip
    add_worker(task, "bad-worker-1", node_name="node-2", ip="10.0.1.9",
               last_reported_at=NOW - timedelta(minutes=3))  # fmt: skip
    PodInstance.objects.create(
        task=task, uid="uid-a", pod_name="bad-worker-0", node_name="node-1", ip="10.0.0.8",
        phase=PodPhase.PENDING, first_seen_at=NOW - timedelta(minutes=9),
        last_seen_at=NOW - timedelta(minutes=1), last_exit_code=None,
    )  # fmt: skip
    return broken


def test_it_answers_the_record_only_to_who_may_see_the_job(
    client: Client, job: Job, charlie: User
) -> None:
    assert client.get(f"/jobs/{job.pk}/record/").status_code == 302
    assert get(client, charlie, f"/jobs/{job.pk}/record/").status_code == 404


def test_it_records_job_task_pods_with_layer_time_viewing_time_and_first_wrong_layer(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    """Spec §Do not treat Worker rows as a retry history: the Job, the Task, the Pod names,
    nodes, IPs, phases and the time looked at, each value with its layer and observation time."""
    broken = bad_image_job(project, reachable, alice)
    response = get(client, alice, f"/jobs/{broken.pk}/record/")
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    text = body(response)
    assert "Viewed at: 2026-03-02 12:00:00 UTC by alice" in text
    first = "First layer that looks wrong: 3. Worker (Pod) phase, node, IP and logs — "
    assert first + "Not in the last report" in text
    assert f"Job bad (#{broken.pk}), project vision, cluster gpu-a, namespace default" in text
    assert "  [desired] spec.stopped: false, run 1" in text
    assert "  [template] desired replicas 2" in text
    assert (
        "  [observed 2026-03-02 11:59:57 UTC] phase Pending, workload's desired replicas 2" in text
    )
    assert "  [observed 2026-03-02 11:59:57 UTC] Pod bad-worker-0: node node-1, IP 10.0.0.8, " \
           "phase Pending, ready no, reason ImagePullBackOff" in text  # fmt: skip
    assert "  [not in the last report; last reported 2026-03-02 11:57:00 UTC] Pod bad-worker-1: " \
           "gone, last known: node node-2, IP 10.0.1.9, phase Running" in text  # fmt: skip
    assert "uid-a" not in text and "instance history" not in text, "operators only"


def test_it_adds_the_instance_history_by_uid_to_an_operators_record(
    client: Client, project: Project, reachable: Cluster, alice: User, olga: User
) -> None:
    broken = bad_image_job(project, reachable, alice)
    Membership.objects.create(user=olga, project=project, role=Membership.Role.VIEWER)
    text = body(get(client, olga, f"/jobs/{broken.pk}/record/"))
    assert "Pod instance history by UID (diagnostics)" in text
    assert "bad-worker-0 uid uid-a: node node-1, IP 10.0.0.8, phase Pending, restarts 0, " \
           "exit code —, termination reason —; first seen 2026-03-02 11:51:00" in text  # fmt: skip


def test_it_offers_the_record_on_the_troubleshooting_panel_with_and_without_javascript(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    broken = bad_image_job(project, reachable, alice)
    html = body(get(client, alice, f"/jobs/{broken.pk}/"))
    panel = html[html.index('class="card troubleshoot"') :].split("</section>")[0]
    assert "Copy troubleshooting record" in panel and 'class="copy-record"' in panel
    assert f'href="/jobs/{broken.pk}/record/"' in panel
    box = panel[panel.index("<textarea") :].split("</textarea>")[0]
    assert "readonly" in box and "Pod bad-worker-0: node node-1, IP 10.0.0.8" in box
    Worker.objects.filter(task__job=broken).delete()
    status = body(get(client, alice, f"/jobs/{broken.pk}/?part=status", **HTMX))
    assert 'id="troubleshooting-record"' in status and "hx-preserve" in status


def test_it_writes_the_record_in_the_readers_language(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    broken = bad_image_job(project, reachable, alice)
    chinese = {"Accept-Language": "zh-Hans"}
    text = body(get(client, alice, f"/jobs/{broken.pk}/record/", **chinese))
    assert "排查记录" in text and "首个看起来有问题的层" in text


def test_it_gives_a_superuser_the_operators_record(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    broken = bad_image_job(project, reachable, alice)
    User.objects.filter(pk=alice.pk).update(is_superuser=True, is_staff=False)
    text = body(get(client, User.objects.get(pk=alice.pk), f"/jobs/{broken.pk}/record/"))
    assert "Pod instance history by UID (diagnostics)" in text and "uid-a" in text
