"""The series endpoint's entry in the OpenAPI document (docs/api.md, "Series").

`GET /api/v1/jobs/{job_id}/series` is a plain Django view (jobs.api.series: it also accepts the
console's session), not one of the API object's operations, so ninja does not describe it;
jobs.api.core adds this entry to the document it builds, so /api/v1/openapi.json describes
every endpoint under /api/v1/.
"""

from __future__ import annotations

from typing import Any

from jobs.series import MAX_NAMES, MAX_POINTS

PATH = "/api/v1/jobs/{job_id}/series"


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"in": "query", "name": name, "required": False, "schema": schema,
            "description": description}  # fmt: skip


_NUMBER = {"type": "number"}
_POINT = {"type": "array", "items": {"type": ["number", "null"]}, "minItems": 3, "maxItems": 3}
_MARKS = {"type": "array", "items": {"type": "object"}}
ANSWER: dict[str, Any] = {
    "title": "SeriesAnswer",
    "type": "object",
    "required": ["series", "checkpoints", "spells", "runs", "restarts", "cursor", "x"],
    "properties": {
        "series": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "run", "points"],
                "properties": {
                    "name": {"type": "string"},
                    "run": {"type": "integer"},
                    "points": {"type": "array", "items": _POINT,
                               "description": "[seconds since the epoch, step or null, value]"},
                },
            },
        },
        "checkpoints": _MARKS,
        "spells": _MARKS,
        "runs": _MARKS,
        "restarts": _MARKS,
        "cursor": {"type": "string"},
        "x": {"type": "string", "enum": ["time", "step"]},
    },
}  # fmt: skip
_ERROR = {
    "content": {"application/json": {"schema": {
        "type": "object", "required": ["message"], "properties": {"message": {"type": "string"}},
    }}},
}  # fmt: skip


def operation() -> dict[str, Any]:
    """The path item of the series endpoint."""
    return {
        "get": {
            "operationId": "job_series",
            "summary": "Job Series",
            "description": (
                "A Job's curves for a chart: every series (or `names`) of a run, downsampled to "
                f"at most `points` (<= {MAX_POINTS}) per series for the range asked, with its "
                "checkpoints, spells, runs and restarts. Same access as the Job (404 otherwise); "
                "a token or the console's session. See docs/api.md, Series."
            ),
            "tags": ["jobs"],
            "parameters": [
                {
                    "in": "path",
                    "name": "job_id",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 1},
                },
                _query(
                    "names",
                    {"type": "string"},
                    f"Comma-separated series, at most {MAX_NAMES}; omitted: every one.",
                ),
                _query(
                    "run",
                    {"type": "string"},
                    "A run number; empty: the current run; `all`: every run.",
                ),
                _query("from", _NUMBER, "Start of the range on the x axis."),
                _query("to", _NUMBER, "End of the range on the x axis."),
                _query(
                    "x",
                    {"type": "string", "enum": ["time", "step"]},
                    "`time` (seconds since the epoch, the default) or `step`.",
                ),
                _query(
                    "points",
                    {"type": "integer", "minimum": 1, "maximum": MAX_POINTS},
                    f"Points per series, at most {MAX_POINTS} (the default).",
                ),
                _query(
                    "after",
                    {"type": "string"},
                    "The `cursor` of an earlier answer: only what is newer, or 204.",
                ),
            ],
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": ANSWER}}},
                "204": {"description": "Nothing new since `after`."},
                "401": {"description": "No or bad token, and no session", **_ERROR},
                "404": {"description": "No such Job, or one the reader may not see", **_ERROR},
                "422": {"description": "Invalid query parameters", **_ERROR},
            },
            "security": [{"BearerToken": []}],
        }
    }
