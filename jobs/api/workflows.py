"""Workflows: list, read, submit."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpRequest
from ninja import Status

from jobs.access import get_workflow_for_user, workflows_for
from jobs.api.core import ObjectId, api, body_doc, forbid_viewer, json_body, user_of
from jobs.models import Workflow
from jobs.operations import create_workflow
from jobs.schemas import READ, WRITE, WorkflowDetailOut, WorkflowOut
from jobs.spec import WORKFLOW_MAX_BYTES, WORKFLOW_MAX_NODES, WorkflowSpec, parse_workflow_spec


@api.get("/workflows", response={200: list[WorkflowOut], **READ}, tags=["workflows"])
def list_workflows(request: HttpRequest) -> QuerySet[Workflow]:
    return workflows_for(user_of(request)).select_related("project")


@api.get("/workflows/{workflow_id}", response={200: WorkflowDetailOut, **READ}, tags=["workflows"])
def workflow_detail(request: HttpRequest, workflow_id: ObjectId) -> Workflow:
    return get_workflow_for_user(user_of(request), workflow_id)


@api.post(
    "/workflows",
    response={201: WorkflowDetailOut, **WRITE},
    openapi_extra=body_doc(WorkflowSpec),
    tags=["workflows"],
)
def submit_workflow(request: HttpRequest) -> Status[Workflow]:
    """A Workflow of child Jobs; a child starts once every Job in its `depends_on` Succeeded."""
    user, data = user_of(request), json_body(request, WORKFLOW_MAX_BYTES, WORKFLOW_MAX_NODES)
    forbid_viewer(user, data.get("project"))
    workflow = create_workflow(user, parse_workflow_spec(data, user))
    return Status(201, workflow)
