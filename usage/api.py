"""`GET /api/v1/usage` and `/api/v1/usage.csv`: GPU-hours grouped by project, person, cluster
or Job (docs/api.md, "Usage"). Registered on the console's API (jobs.api.api) when the URLconf
imports this module; the same bearer tokens and JSON errors."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Router

from jobs.access import is_operator, projects_for
from jobs.api.core import api
from jobs.choices import UsageClass
from jobs.schemas import READ
from usage.period import ReportInvalid, asked
from usage.report import Row, Scope, report, rows_as_dicts

router = Router(tags=["usage"])


def scope_for(
    user: AbstractBaseUser | AnonymousUser, project: str = "", cluster: str = ""
) -> Scope:
    """Operators see every project's rows; anyone else those of their own projects."""
    visible = None if is_operator(user) else list(projects_for(user).values_list("name", flat=True))
    return Scope(projects=visible, project=project, cluster=cluster)


def _rows(request: HttpRequest) -> tuple[dict[str, Any], list[Row]]:
    """Raises ReportInvalid for bad parameters (answered 422, naming each field)."""
    now = timezone.now()
    wanted = asked(request.GET, now)
    user = request.auth  # type: ignore[attr-defined]
    scope = scope_for(user, wanted.project, wanted.cluster)
    rows = report(wanted.start, wanted.end, wanted.group_by, scope, now)
    period = {"from": wanted.start.isoformat(), "to": wanted.end.isoformat()}
    return period, rows


def _invalid(request: HttpRequest, invalid: ReportInvalid) -> HttpResponse:
    body = {"message": "Invalid query parameters.", "errors": invalid.errors}
    return api.create_response(request, body, status=422)


@router.get("/usage", response={200: dict[str, Any], **READ}, operation_id="usage_report")
def usage_report(request: HttpRequest) -> dict[str, Any] | HttpResponse:
    """GPU-hours held and wasted in [from, to) (ISO 8601; `to` may lie in the future and is
    counted up to now), grouped by `group_by` (project, user, cluster or job), filtered by the
    `project` and `cluster` names; hours with 6 decimals, each class named in `by_class`."""
    try:
        period, rows = _rows(request)
    except ReportInvalid as invalid:
        return _invalid(request, invalid)
    return {**period, "rows": rows_as_dicts(rows)}


@router.get("/usage.csv", response={200: str, **READ}, operation_id="usage_report_csv")
def usage_report_csv(request: HttpRequest) -> HttpResponse:
    """The same rows as CSV: key,label,gpu_hours,wasted_gpu_hours and one column per class."""
    try:
        _period, rows = _rows(request)
    except ReportInvalid as invalid:
        return _invalid(request, invalid)
    response = HttpResponse(as_csv(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="usage.csv"'
    return response


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: str) -> str:
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def as_csv(rows: list[Row]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["key", "label", "gpu_hours", "wasted_gpu_hours", *UsageClass.values])
    for row in rows:
        hours = [f"{value:.6f}" for value in row.by_class.values()]
        names = [_cell(str(row.key)), _cell(row.label)]
        writer.writerow([*names, f"{row.gpu_hours:.6f}", f"{row.wasted_gpu_hours:.6f}", *hours])
    return out.getvalue()


api.add_router("/", router)
