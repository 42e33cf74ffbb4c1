"""`GET /api/v1/jobs/{id}/series` (issue 35, docs/api.md "Series"): a Job's curves, its
checkpoints, spells, runs and restarts, read by jobs.series.

A plain view routed in console/urls.py before the API object's catch-all, not one of its
operations; the same token check and the same JSON errors (`BearerToken`, `error`), and the
same access as the Job: a reader who cannot see the Job gets 404, as for
`GET /api/v1/jobs/{id}`. A read-only GET, so the console's own session is accepted beside a
token: the Metrics tab draws from this endpoint.
"""

from __future__ import annotations

import orjson
from django.contrib.auth.models import AbstractBaseUser
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from jobs import series
from jobs.access import get_job_for_user
from jobs.api.auth import BearerToken
from jobs.api.core import error
from jobs.diagnostics import shows_diagnostics

MAX_ID = 2**63 - 1


def _reader(request: HttpRequest) -> AbstractBaseUser | None:
    """The token's user when an Authorization header is sent, else the session's."""
    if request.headers.get("Authorization"):
        return BearerToken()(request)  # type: ignore[no-any-return]
    user = request.user
    return user if user.is_authenticated else None  # type: ignore[return-value]


@require_GET
def job_series(request: HttpRequest, job_id: int) -> HttpResponse:
    """The series of `names` (default: every one) of run `run` (default: the current one;
    `all`: every run), in [`from`, `to`] on the `x` axis (`time`, seconds since the epoch, or
    `step`), at most `points` (<= 500) per series. With `after` (the `cursor` of an earlier
    answer): only the points stored since, or 204 when nothing changed."""
    user = _reader(request)
    if user is None:
        response = error(request, 401, "Send a valid API token: Authorization: Bearer <token>.")
        response["WWW-Authenticate"] = "Bearer"
        return response
    try:
        job = get_job_for_user(user, job_id if job_id <= MAX_ID else 0)
        query = series.parse_query(request.GET)
    except Http404:
        return error(request, 404, "No such job.")
    except series.BadQuery as bad:
        return error(request, 422, "Invalid query parameters.", errors={"query": str(bad)})
    answer = series.read(job, query, diagnostics=shows_diagnostics(user, job))
    if answer is None:
        return HttpResponse(status=204)
    response = HttpResponse(orjson.dumps(answer), content_type="application/json")
    response["Cache-Control"] = "private, no-cache"
    return response
