"""The OpenAPI document at /api/v1/openapi.json describes what the API answers: every enum of
every response and request schema is its own component with its own values (spec §Node and
Addon status: a Node is Online or Offline, never Installing)."""

from __future__ import annotations

from enum import Enum
from typing import Any, get_args

from django.test import Client
from ninja import Schema
from pydantic import BaseModel

from jobs import schemas
from jobs.api import TrainyardAPI


def _nested(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _nested(arg)]


def _models() -> set[type[BaseModel]]:
    """Every schema the document is built from: the responses', the request bodies' and the
    models nested in them (a JobSpec's TaskSpec)."""
    found: set[type[BaseModel]] = set(TrainyardAPI.REQUEST_MODELS) | {
        value
        for value in vars(schemas).values()
        if isinstance(value, type) and issubclass(value, Schema) and value is not Schema
    }
    for model in list(found):
        for field in model.model_fields.values():
            found |= set(_nested(field.annotation))
    return found


def _enum_of(annotation: Any) -> type[Enum] | None:
    """The enum of `Phase`, `Phase | None` or `list[Action]`, if any."""
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return annotation
    return next(filter(None, (_enum_of(arg) for arg in get_args(annotation))), None)


def _ref_of(prop: dict[str, Any]) -> str:
    """The component a property points to, through `items` or `anyOf` (for `| None`)."""
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    for inner in [prop.get("items"), *prop.get("anyOf", []), *prop.get("allOf", [])]:
        if isinstance(inner, dict) and (found := _ref_of(inner)):
            return found
    return ""


def test_every_enum_has_its_own_schema_with_its_own_values(db: None) -> None:
    document = Client().get("/api/v1/openapi.json").json()
    components = document["components"]["schemas"]
    checked = set()
    for model in _models():
        for name, field in model.model_fields.items():
            enum = _enum_of(field.annotation)
            if enum is None:
                continue
            prop = components[model.__name__]["properties"][field.alias or name]
            component = components[_ref_of(prop)]
            assert component["enum"] == [member.value for member in enum], (model, name)
            checked.add(model.__name__)
    assert {"NodeOut", "AddonOut", "JobOut", "WorkerOut", "OperationOut", "TaskSpec"} <= checked
    node_phase = components["NodeOut"]["properties"]["phase"]
    assert node_phase == {"$ref": "#/components/schemas/NodePhase"}
    assert components["NodePhase"]["enum"] == ["Online", "Offline"]


def test_operation_ids_are_the_ones_the_api_was_published_with(db: None) -> None:
    """Issue 31, item 9: splitting the Job API (one module until then) by resource moved code and
    changed no behaviour; an operationId names a generated client's method, so each stays
    ninja's default for the one module the Job API was (`jobs_api_<function>`); another app's
    keeps the name it was published with, its function's."""
    document = Client().get("/api/v1/openapi.json").json()
    ids = {
        f"{method.upper()} {path}": operation["operationId"]
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }
    assert {
        "GET /api/v1/jobs": "jobs_api_list_jobs",
        "POST /api/v1/jobs": "jobs_api_submit_job",
        "DELETE /api/v1/jobs/{job_id}": "jobs_api_delete",
        "POST /api/v1/jobs/{job_id}/signals": "jobs_api_post_signals",
        "GET /api/v1/workflows/{workflow_id}": "jobs_api_workflow_detail",
        "GET /api/v1/nodes": "jobs_api_list_nodes",
        "GET /api/v1/channels": "list_channels",
        "GET /api/v1/usage": "usage_report",
    }.items() <= ids.items()


def test_the_series_endpoint_is_described_too(db: None) -> None:
    """docs/api.md: /api/v1/openapi.json describes the API under /api/v1/, the series endpoint
    (a plain view, not one of ninja's operations) included, with its query and its answers."""
    document = Client().get("/api/v1/openapi.json").json()
    operation = document["paths"]["/api/v1/jobs/{job_id}/series"]["get"]
    names = [parameter["name"] for parameter in operation["parameters"]]
    assert names == ["job_id", "names", "run", "from", "to", "x", "points", "after"]
    assert set(operation["responses"]) == {"200", "204", "401", "404", "422"}
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert set(answer["required"]) == {"series", "checkpoints", "spells", "runs", "restarts",
                                       "cursor", "x"}  # fmt: skip
