"""The workload's word on the pages (issue 10, "Pages"; spec §Job status: a StatefulSet Job never
reports Succeeded or Failed, Running is not progress, training is judged by its own completion
signal, progress and checkpoints): the job page's Workload panel beside the Kubernetes phase,
the same answers as the API's `workload`, the Job's policies, the Workload column of the list
and the dashboard's attention list."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import count
from typing import Any

import time_machine
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.models import ApiToken, Cluster, Project
from jobs.choices import Action, JobPhase, WorkloadState
from jobs.messages import Message
from jobs.models import Job, Workflow
from jobs.records import Result, record_operation
from jobs.workload.intake import BATCH, signal_token
from jobs.workload.report import record
from tests.web.test_jobs import (
    HTMX,
    NOW,
    body,
    frozen_clock,
    get,
    job,
    make_job,
    operator,
    reachable,
    version_in,
)
from tests.web.test_workflows import get as get_page
from tests.web.test_workflows import pipeline

__all__ = ["frozen_clock", "job", "operator", "pipeline", "reachable"]  # fixtures used here

SEQ = count(1)


def post(job: Job, *messages: dict[str, Any], pod: str = "train-worker-0") -> None:
    """The job's pod says something (jobs.workload.report.record, as the signals endpoint does)."""
    items = BATCH.validate_python(
        [{"pod": pod, "uid": "uid-0", "seq": next(SEQ), **message} for message in messages]
    )
    record(job.pk, job.run, items)


def progress(
    job: Job, frozen_clock: Any, steps: Sequence[int], every: float = 10.0, end: datetime = NOW
) -> None:
    """One progress message every `every` seconds, ending at `end`."""
    frozen_clock.move_to(end - timedelta(seconds=every * len(steps)))
    for step in steps:
        frozen_clock.shift(timedelta(seconds=every))
        metrics = {"loss": 1.0 / (step + 1), "reward": step / 100, "lr": 0.001, "grad": 2.0}
        post(job, {"kind": "progress", "step": step, "max_steps": 100, "metrics": metrics})


def panel(html: str) -> str:
    start = html.index('id="workload"')
    return html[start : html.index("</section>", start)]


def state_of(html: str) -> str:
    match = re.search(r'data-workload-state="(\w+)"', html)
    assert match
    return match.group(1)


# --- the panel in each state ------------------------------------------------------------------


def test_it_explains_how_to_send_signals_while_the_workload_is_silent(
    client: Client, job: Job, alice: User
) -> None:
    html = panel(body(get(client, alice, f"/jobs/{job.pk}/")))
    assert state_of(html) == WorkloadState.SILENT
    assert 'data-status="Silent"' in html and "TRAINYARD_SIGNAL_TOKEN" in html
    assert "docs/workload-signals.md" in html and 'href="/api/v1/docs#/signals"' in html
    assert 'data-status="Running"' in html, "beside the Kubernetes phase, never instead of it"


def test_it_shows_a_progressing_run_with_its_bar_eta_sparklines_and_checkpoint(
    client: Client, job: Job, alice: User, frozen_clock: Any
) -> None:
    post(job, {"kind": "heartbeat"})
    progress(job, frozen_clock, range(0, 50, 5))
    post(job, {"kind": "checkpoint", "step": 45, "path": "/out/ckpt/global_step_45"})
    post(job, {"kind": "ray", "expected_nodes": 2, "alive_nodes": 2, "gpus": 16})
    html = panel(body(get(client, alice, f"/jobs/{job.pk}/")))
    assert state_of(html) == WorkloadState.PROGRESSING
    assert "from signal" in html and "At step 45." in html
    assert '<progress max="100" value="45"' in html and "step 45 of 100 (45%)" in html
    assert "2.00 s per step" in html and "to go" in html  # 55 steps of 2 s: about 1 minute
    labels = re.findall(r'<span class="spark-label">([^<]+)</span>', html)
    assert labels == ["Step rate (steps/min)", "grad", "loss", "lr"], "three metrics, by name"
    assert html.count("<polyline points=") == 4
    assert "/out/ckpt/global_step_45" in html and "step 45" in html
    assert "2/2" in html and "16 GPUs" in html


def test_it_shows_a_stall_when_the_step_stops_advancing_and_the_poll_sees_it(
    client: Client, job: Job, alice: User, frozen_clock: Any
) -> None:
    """Stalled depends on time: the poll version changes when the state does, though no new
    message arrived and the ages shown have not moved on."""
    spec = {**job.spec, "policies": {"stall_after_seconds": 20}}
    Job.objects.filter(pk=job.pk).update(spec=spec)
    progress(job, frozen_clock, range(10))
    client.force_login(alice)
    url = f"/jobs/{job.pk}/?part=status"
    version = version_in(body(client.get(url, headers=HTMX)))
    frozen_clock.shift(timedelta(seconds=15))
    assert client.get(f"{url}&v={version}", headers=HTMX).status_code == 204
    frozen_clock.shift(timedelta(seconds=10))
    html = body(client.get(f"{url}&v={version}", headers=HTMX))
    assert state_of(html) == WorkloadState.STALLED
    assert "Step 9 has not advanced for 25 s (limit 20 s)." in html
    assert 'class="card workload-panel attention"' in html


def test_it_shows_an_unresponsive_workload_after_three_heartbeat_intervals(
    client: Client, job: Job, alice: User, frozen_clock: Any
) -> None:
    post(job, {"kind": "heartbeat"})
    frozen_clock.shift(timedelta(seconds=91))
    html = panel(body(get(client, alice, f"/jobs/{job.pk}/")))
    assert state_of(html) == WorkloadState.UNRESPONSIVE
    assert "No message for 91 s (limit 90 s: three heartbeat intervals)." in html


def test_it_shows_a_degraded_ray_cluster(client: Client, job: Job, alice: User) -> None:
    post(job, {"kind": "ray", "expected_nodes": 4, "alive_nodes": 3})
    html = panel(body(get(client, alice, f"/jobs/{job.pk}/")))
    assert state_of(html) == WorkloadState.DEGRADED
    assert "3 of 4 Ray nodes alive." in html and "3/4" in html and "fewer than expected" in html


def test_it_shows_a_completion_beside_a_job_that_stays_running(
    client: Client, job: Job, alice: User
) -> None:
    post(job, {"kind": "completion", "outcome": "failed", "exit_code": 3, "reason": "OOM",
               "message": "CUDA out of memory"})  # fmt: skip
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    head = html[html.index("<h1>") : html.index("</h1>")]
    assert 'data-status="Running"' in head and 'data-status="Failed"' in head
    shown = panel(html)
    assert state_of(shown) == WorkloadState.FAILED
    assert "The workload reported failed with exit code 3. CUDA out of memory" in shown
    assert "exit code 3" in shown and "OOM" in shown and "from signal" in shown


def test_it_shows_a_job_whose_pods_are_gone_without_completion_as_lost(
    client: Client, job: Job, alice: User
) -> None:
    post(job, {"kind": "heartbeat"})
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    html = panel(body(get(client, alice, f"/jobs/{job.pk}/")))
    assert state_of(html) == WorkloadState.LOST


def test_it_gives_the_page_and_the_api_the_same_answer(
    client: Client, job: Job, alice: User, frozen_clock: Any
) -> None:
    """Signals posted by the pods with their token; the API's `workload` and the panel agree."""
    signals = [
        {"kind": "progress", "pod": "train-worker-0", "uid": "u", "seq": seq, "step": step,
         "max_steps": 60, "at": (NOW - timedelta(seconds=40 - 4 * seq)).isoformat()}
        for seq, step in enumerate(range(0, 30, 3))
    ]  # fmt: skip
    pod = {"Authorization": f"Bearer {signal_token(job.pk, job.run)}"}
    posted = Client().post(
        f"/api/v1/jobs/{job.pk}/signals", signals, content_type="application/json", headers=pod
    )
    assert posted.status_code == 202, posted.content
    user = {"Authorization": f"Bearer {ApiToken.issue(alice, name='test')[1]}"}
    workload = Client().get(f"/api/v1/jobs/{job.pk}", headers=user).json()["workload"]
    html = panel(body(get(client, alice, f"/jobs/{job.pk}/")))
    assert state_of(html) == workload["state"] == "Progressing"
    assert workload["reason"] == "At step 27." and workload["reason"] in html
    assert f"step {workload['step']} of 60 (45%)" in html
    assert f"{workload['step_seconds']:.2f} s per step" in html


def test_it_shows_the_panel_to_members_viewers_and_operators_only(
    client: Client, job: Job, bob: User, operator: User, charlie: User
) -> None:
    post(job, {"kind": "ray", "expected_nodes": 4, "alive_nodes": 3})
    for user in (bob, operator):
        assert state_of(body(get(client, user, f"/jobs/{job.pk}/"))) == "Degraded"
    assert get(client, charlie, f"/jobs/{job.pk}/").status_code == 404


def test_it_reads_the_progress_points_in_one_bounded_query(
    client: Client, job: Job, alice: User, frozen_clock: Any
) -> None:
    progress(job, frozen_clock, range(200))
    client.force_login(alice)
    with CaptureQueriesContext(connection) as queries:
        html = body(client.get(f"/jobs/{job.pk}/?part=status", headers=HTMX))
    signal_reads = [query["sql"] for query in queries if '"jobs_signal"' in query["sql"]]
    assert len(signal_reads) == 1 and "LIMIT 2000" in signal_reads[0]
    line = re.search(r'<polyline points="([^"]+)"', html)
    assert line and len(line[1].split()) == 59, "60 points thinned from 200: 59 rates"


# --- the policies and the console's own operations -----------------------------------------------


def test_it_shows_the_jobs_policies(client: Client, job: Job, alice: User) -> None:
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert "<code>stop_on_completion</code>: <code>false</code>" in html
    assert "<code>heartbeat_seconds</code>: 30" in html
    assert "derived from the step time" in html
    policies = {"stop_on_completion": True, "heartbeat_seconds": 10,
                "stall_after_seconds": 600, "progress_from_logs": True}  # fmt: skip
    spec = {**job.spec, "policies": policies}
    Job.objects.filter(pk=job.pk).update(spec=spec)
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert "<code>stop_on_completion</code>: <code>true</code>" in html
    assert "<code>stall_after_seconds</code>: 600" in html
    assert "<code>progress_from_logs</code>: <code>true</code>" in html


def test_it_names_the_console_for_an_operation_it_recorded_itself(
    client: Client, job: Job, alice: User
) -> None:
    message = Message("operation.stopped_on_completion", {"outcome": "succeeded"})
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    record_operation(AnonymousUser(), job, Action.STOP, Result.ACCEPTED, message)
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    history = html[html.index('class="ops-table"') :]
    assert '<span class="by-console">⚙ the console</span>' in history
    assert "stopped by the job's stop_on_completion policy" in history
    assert "Stop · the console" in html, "the Applied card"
    assert "spec.stopped was set to true by the console" in html, "the Observed card"


# --- the list and the dashboard ---------------------------------------------------------------


def test_it_lists_each_jobs_workload_state_with_a_constant_number_of_queries(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    client.force_login(alice)

    def listed() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            html = body(client.get("/jobs/"))
        return html, len(queries)

    first = make_job(project, reachable, "first", owner=alice)
    post(first, {"kind": "ray", "expected_nodes": 2, "alive_nodes": 1})
    _html, few = listed()
    for index in range(6):
        other = make_job(project, reachable, f"other-{index}", owner=alice)
        post(other, {"kind": "heartbeat"})
    eager = make_job(project, reachable, "eager", owner=alice)
    Job.objects.filter(pk=eager.pk).update(
        spec={**eager.spec, "policies": {"heartbeat_seconds": 5}}
    )
    with time_machine.travel(NOW - timedelta(seconds=16), tick=False):
        post(eager, {"kind": "heartbeat"})  # quiet for 16 s: over 3 of its 5 s heartbeats
    html, many = listed()
    assert many == few
    assert html.count('data-status="Degraded"') == 1
    assert html.count('data-status="Starting"') == 6
    assert html.count('data-status="Unresponsive"') == 1, "the policies read with the row"
    assert ">Workload<" in html


def test_it_lists_workloads_needing_attention_first_on_the_dashboard(
    client: Client, project: Project, reachable: Cluster, alice: User, frozen_clock: Any
) -> None:
    failing = make_job(project, reachable, "failing", owner=alice, created_at=NOW)
    post(failing, {"kind": "completion", "outcome": "failed", "reason": "NaN loss"})
    degraded = make_job(project, reachable, "degraded", owner=alice)
    post(degraded, {"kind": "ray", "expected_nodes": 4, "alive_nodes": 2})
    quiet = make_job(project, reachable, "quiet", owner=alice, created_at=NOW)
    with time_machine.travel(NOW - timedelta(seconds=607), tick=False):
        post(quiet, {"kind": "heartbeat"})
    fine = make_job(project, reachable, "fine", owner=alice)
    post(fine, {"kind": "progress", "step": 3})
    html = body(get(client, alice, "/"))
    rows = re.findall(r'<tr data-job="([\w-]+)"', html)
    assert set(rows[:3]) == {"failing", "degraded", "quiet"} and "fine" not in rows
    assert "Workload Degraded: 2 of 4 Ray nodes alive." in html
    assert "Workload Unresponsive: No message for 600 s" in html, "seconds in steps of 10"
    assert "Workload Failed: The workload reported failed. NaN loss" in html


def test_it_keeps_a_succeeded_workload_off_the_dashboard(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    done = make_job(project, reachable, "done", owner=alice)
    post(done, {"kind": "completion", "outcome": "succeeded"})
    assert 'data-job="done"' not in body(get(client, alice, "/"))


def test_it_shows_a_workflows_advance_on_workload_success_policy(
    client: Client, alice: User, pipeline: Workflow
) -> None:
    html = get_page(client, alice, f"/workflows/{pipeline.pk}/")
    assert "<code>advance_on_workload_success</code>: <code>false</code>" in html
    Workflow.objects.filter(pk=pipeline.pk).update(policies={"advance_on_workload_success": True})
    html = get_page(client, alice, f"/workflows/{pipeline.pk}/")
    assert "<code>advance_on_workload_success</code>: <code>true</code>" in html
    assert "counts as Succeeded for its dependants" in html
