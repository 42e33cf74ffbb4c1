"""Probes for Kubernetes, and the one place that serves them and /metrics.

- `/healthz`: the process answers (liveness). It touches neither the database nor the broker: a
  database outage must not make Kubernetes restart every web pod.
- `/readyz`: the database and the broker answer (readiness); 503 names the one that did not, and
  Kubernetes stops sending users to the pod until both answer again.

`endpoints_middleware` comes first in MIDDLEWARE and answers these paths before any other
middleware runs: a probe or a scrape arrives with the pod's IP as its Host, which
ALLOWED_HOSTS rightly refuses, over plain HTTP, which an HTTPS redirect would bounce, and with
no session or login.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.checks import CheckMessage, Tags, register
from django.core.checks import Warning as CheckWarning
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse

# Seconds a readiness check waits for the broker before calling it down.


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok\n", content_type="text/plain")


def database_problem() -> str:
    """'' when the database answers a query, else the kind of error (never its text, which may
    name hosts or users)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        connection.close()  # the next request opens a fresh one
        return f"unavailable ({type(error).__name__})"
    return ""


def broker_problem() -> str:
    from console.celery import broker_connection

    try:
        with broker_connection() as broker:
            broker.default_channel  # noqa: B018 (opening a channel is the check: Redis answers PING)
    except Exception as error:  # any transport's failure means the same to the probe
        return f"unavailable ({type(error).__name__})"
    return ""


def readyz(request: HttpRequest) -> HttpResponse:
    problems = {"database": database_problem(), "broker": broker_problem()}
    status = 503 if any(problems.values()) else 200
    return JsonResponse(
        {name: problem or "ok" for name, problem in problems.items()}, status=status
    )


@register(Tags.security, deploy=True)
def metrics_token_check(**_kwargs: object) -> list[CheckMessage]:
    """`manage.py check --deploy` warns of an open /metrics."""
    if settings.TRAINYARD_METRICS_TOKEN:
        return []
    return [
        CheckWarning(
            "TRAINYARD_METRICS_TOKEN is not set: /metrics answers anyone who reaches the web.",
            hint="Set it, or let a network policy keep /metrics from anyone but Prometheus "
            "(docs/operations.md, 'Health and metrics').",
            id="trainyard.W001",
        )
    ]


def _endpoints() -> dict[str, Callable[[HttpRequest], HttpResponse]]:
    from console.metrics import metrics

    return {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}


def endpoints_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    endpoints = _endpoints()

    def middleware(request: HttpRequest) -> HttpResponse:
        endpoint = endpoints.get(request.path_info)
        if endpoint is None:
            return get_response(request)
        if request.method not in ("GET", "HEAD"):
            return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
        return endpoint(request)

    return middleware
