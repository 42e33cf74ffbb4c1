"""One module per platform, each with its wire format and its success rule; here what they
share: what a send needs, what it concluded, and the HTTP answers every platform reads alike
(429 and 5xx are retried, honouring Retry-After; another 4xx is a configuration error)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from django.db import models

from notify.outbound import Answer


class Verdict(models.TextChoices):
    SENT = "sent"
    RETRY = "retry"  # not this time: network, 5xx, 429, a platform's rate-limit code
    BROKEN = "broken"  # a configuration error: never retried, the channel shows it


@dataclass(frozen=True)
class Target:
    """A channel as a send needs it (decrypted), and the message's stable id."""

    kind: str
    url: str
    secret: str
    previous_secret: str
    language: str
    message_id: str


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    message: str
    http_status: int | None = None
    platform_code: str = ""
    retry_after: float | None = None
    latency_ms: int = 0


@dataclass(frozen=True)
class Request:
    url: str
    body: bytes
    headers: dict[str, str]


def json_body(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def retry_after(value: str | None, now: datetime) -> float | None:
    """Retry-After in seconds or as an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - now).total_seconds())
    except (TypeError, ValueError):
        return None


def by_http_status(answer: Answer, now: datetime) -> Outcome | None:
    """The outcome when the HTTP status decides it alone; None for a 2xx (the platform's
    body decides)."""
    if 200 <= answer.status < 300:
        return None
    said = answer.body[:2048]
    if answer.status == 429 or answer.status >= 500:
        wait = retry_after(
            answer.headers.get("Retry-After") or answer.headers.get("retry-after"), now
        )
        return Outcome(Verdict.RETRY, said, answer.status, retry_after=wait)
    return Outcome(Verdict.BROKEN, said, answer.status)


def platform_code(answer: Answer, key: str) -> tuple[str, str]:
    """(code, the platform's message) from a JSON answer; ("", body) when it is not JSON."""
    try:
        data = json.loads(answer.body)
    except ValueError:
        return "", answer.body[:2048]
    if not isinstance(data, dict) or key not in data:
        return "", answer.body[:2048]
    return str(data[key]), answer.body[:2048]


def by_code(answer: Answer, key: str, rate_limited: frozenset[str], now: datetime) -> Outcome:
    """Feishu, DingTalk and WeCom answer 200 with a code: success only when it is 0 (an HTTP
    200 carrying 19021 is a failure); their rate-limit codes are retried; any other code is a
    configuration error (a bad signature, an unknown robot, a keyword missing)."""
    decided = by_http_status(answer, now)
    if decided is not None:
        return decided
    code, said = platform_code(answer, key)
    if code == "0":
        return Outcome(Verdict.SENT, said, answer.status, code)
    verdict = Verdict.RETRY if code in rate_limited else Verdict.BROKEN
    return Outcome(verdict, said, answer.status, code)
