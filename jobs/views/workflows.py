"""Workflow pages: the list, and one Workflow with its DAG drawn as a server-rendered SVG.

Scoped by project like every Job query (`jobs.access`). A child Job's box is coloured *and*
labelled with its name, its phase as text and an icon (spec §Workflow status: never colour alone).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from console.templatetags.trainyard import BADGES
from console.web import HtmxHttpRequest, not_modified, poll_version
from jobs.access import get_workflow_for_user, workflows_for
from jobs.choices import JOB_TERMINAL, WORKFLOW_TERMINAL, JobPhase, TaskKind
from jobs.dag import DagLayout, DagNode, layout
from jobs.diagnostics import shows_diagnostics
from jobs.models import Task, Workflow
from jobs.status.lifecycle import CycleError, blocked_by

PAGE_SIZE = 50
WORKFLOW_FIELDS = ("pk", "name", "project__name", "phase", "message", "created_at")


def _child_counts() -> dict[str, Count]:
    """One count per Job phase, of the children still visible (deletion not requested)."""
    return {
        f"jobs_{phase.value.lower()}": Count(
            "jobs", filter=Q(jobs__phase=phase, jobs__delete_requested_at__isnull=True)
        )
        for phase in JobPhase
    }


def _with_children(row: dict[str, Any]) -> dict[str, Any]:
    children = [(phase.value, row[f"jobs_{phase.value.lower()}"]) for phase in JobPhase]
    return {**row, "children": [(phase, n) for phase, n in children if n]}


@login_required
def workflow_list(request: HtmxHttpRequest) -> HttpResponse:
    workflows = (
        workflows_for(request.user)
        .values(*WORKFLOW_FIELDS)
        .annotate(**_child_counts())
        .order_by("-created_at", "-pk")
    )
    page = Paginator(workflows, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [_with_children(row) for row in page.object_list]
    now = timezone.now()
    version = poll_version(request, rows, page.number, page.paginator.count, now=now)
    context = {"workflows": rows, "page": page, "version": version, "now": now}
    template = "workflows/list.html#rows" if request.htmx else "workflows/list.html"
    return not_modified(request, version) or render(request, template, context)


CHILD_FIELDS = ("pk", "name", "phase", "message", "cluster__name", "delete_requested_at")


def _children(workflow: Workflow) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The child Jobs (three queries whatever their number), each with the phase its Workflow
    counts (`counted`: `JobQuerySet.counted_children`), and the edges between them, by id."""
    jobs = list(workflow.jobs.values(*CHILD_FIELDS).order_by("name", "pk"))
    counted = {child.pk: child.phase for child in workflow.jobs.all().counted_children()}
    for job in jobs:
        job["counted"] = counted[job["pk"]]
    known = {str(job["pk"]) for job in jobs}
    edges = [
        (str(up), str(down))
        for up, down in workflow.edges.values_list("upstream_id", "downstream_id")
        if str(up) in known and str(down) in known
    ]
    return jobs, edges


def _child_rows(jobs: list[dict[str, Any]], edges: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Each child with the names it depends on and those it still waits for (`blocked_by`,
    with each upstream's phase as the Workflow counts it)."""
    names = {str(job["pk"]): job["name"] for job in jobs}
    phases = {str(job["pk"]): job["counted"] for job in jobs}
    return [
        {
            **job,
            "depends_on": sorted(names[up] for up, down in edges if down == str(job["pk"])),
            "waiting_for": [names[up] for up in blocked_by(str(job["pk"]), phases, edges)],
        }
        for job in jobs
    ]


def _picture(dag: DagLayout, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The layout plus what the SVG needs per box: icon, tone, phase label and link."""
    by_id = {str(job["pk"]): job for job in jobs}
    boxes = []
    for box in dag.boxes:
        icon, tone = BADGES.get(box.phase, ("•", "off"))
        job = by_id[box.id]
        label = JobPhase(box.phase).label
        boxes.append({"box": box, "icon": icon, "tone": tone, "job": job, "phase_label": label})
    succeeded = {job_id for job_id, job in by_id.items() if job["counted"] == JobPhase.SUCCEEDED}
    arrows = [{"arrow": arrow, "done": arrow.upstream in succeeded} for arrow in dag.arrows]
    return {"width": dag.width, "height": dag.height, "boxes": boxes, "arrows": arrows}


def _draw(jobs: list[dict[str, Any]], edges: list[tuple[str, str]]) -> dict[str, Any]:
    """The picture and the children in its order (column by column, as the arrows run), or the
    reason there is no picture (edges that form a cycle cannot be laid out)."""
    nodes = [DagNode(str(job["pk"]), job["name"], job["phase"]) for job in jobs]
    rows = _child_rows(jobs, edges)
    try:
        dag = layout(nodes, edges)
    except CycleError as error:
        return {"picture": None, "cycle": str(error), "children": rows}
    place = {box.id: index for index, box in enumerate(dag.boxes)}
    rows.sort(key=lambda row: place[str(row["pk"])])
    return {"picture": _picture(dag, jobs), "cycle": "", "children": rows}


@login_required
def workflow_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    workflow = get_workflow_for_user(request.user, pk)
    jobs, edges = _children(workflow)
    now = timezone.now()
    facts = (workflow.phase, workflow.message, workflow.finished_at, jobs, edges)
    version = poll_version(request, *facts, now=now)
    if response := not_modified(request, version):
        return response
    context = {
        "workflow": workflow,
        "project": workflow.project.name,
        "diagnostics": shows_diagnostics(request.user, workflow),
        **_draw(jobs, edges),
        "has_statefulset": Task.objects.filter(
            job__workflow=workflow, kind=TaskKind.STATEFULSET
        ).exists(),
        # Polling stops once nothing can change any more: the Workflow and every child terminal.
        "live": not (
            workflow.phase in WORKFLOW_TERMINAL
            and all(job["phase"] in JOB_TERMINAL for job in jobs)
        ),
        "version": version,
        "now": now,
    }
    template = "workflows/detail.html#dag" if request.htmx else "workflows/detail.html"
    return render(request, template, context)
