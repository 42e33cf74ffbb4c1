"""One range query to a cluster's Prometheus, bounded like every request that leaves the console
(ARCHITECTURE §Principles): the server's address checked first (console.outbound.check_server:
no cloud metadata, link-local or non-unicast address; a private one is allowed, since a
cluster's Prometheus lives there), one overall timeout, no redirect, no retry (the next sync
cycle is the retry), and the answer read up to MAX_ANSWER_BYTES."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import orjson
import urllib3

from console.outbound import AddressRefused, check_server

MAX_ANSWER_BYTES = 8 * 1024 * 1024
_HTTP = urllib3.PoolManager(maxsize=4, retries=False)


class PrometheusError(Exception):
    """No usable answer: the message says why (never a credential)."""


@dataclass(frozen=True)
class Series:
    """One series of a range query's matrix: its labels and (moment, value) points."""

    labels: dict[str, str]
    points: list[tuple[datetime, float]]


def query_range(
    base_url: str, promql: str, start: datetime, end: datetime, step_seconds: int, timeout: float
) -> list[Series]:
    """GET {base_url}/api/v1/query_range: the matrix, NaN points left out."""
    try:
        check_server(base_url)
    except AddressRefused as refused:
        raise PrometheusError(str(refused)) from None
    params = {
        "query": promql, "start": f"{start.timestamp():.3f}", "end": f"{end.timestamp():.3f}",
        "step": str(step_seconds), "timeout": f"{timeout:g}s",
    }  # fmt: skip
    url = f"{base_url.rstrip('/')}/api/v1/query_range?{urlencode(params)}"
    try:
        response = _HTTP.request(
            "GET", url, timeout=urllib3.Timeout(total=timeout), redirect=False,
            preload_content=False,
        )  # fmt: skip
        body = response.read(MAX_ANSWER_BYTES + 1)
        response.release_conn()
    except urllib3.exceptions.HTTPError as error:
        raise PrometheusError(f"No answer from {base_url}: {type(error).__name__}.") from None
    if len(body) > MAX_ANSWER_BYTES:
        raise PrometheusError(f"The answer of {base_url} is larger than {MAX_ANSWER_BYTES} bytes.")
    return _matrix(base_url, response.status, body)


def _matrix(base_url: str, status: int, body: bytes) -> list[Series]:
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise PrometheusError(f"{base_url} answered {status} with no JSON.") from None
    if status != 200 or not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error", "") if isinstance(answer, dict) else ""
        raise PrometheusError(f"{base_url} answered {status}: {str(error)[:200]}")
    data = answer.get("data") or {}
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"{base_url} answered a {data.get('resultType')!r}, not a matrix.")
    return [_series(item) for item in data.get("result") or ()]


def _series(item: dict[str, Any]) -> Series:
    labels: dict[str, Any] = item.get("metric") or {}
    points = []
    for moment, value in item.get("values") or ():
        number = float(value)
        if not math.isnan(number):
            points.append((datetime.fromtimestamp(float(moment), UTC), number))
    return Series({str(k): str(v) for k, v in labels.items()}, points)
