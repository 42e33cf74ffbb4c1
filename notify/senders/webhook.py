"""A generic HTTPS webhook: JSON `{type, timestamp, data}` signed per Standard Webhooks 1.0
(the `standardwebhooks` package): `webhook-id` (the message's, the same on every retry, so a
receiver drops a repeat), `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">` with a `whsec_` secret; for 24 h after a rotation both secrets
sign (space-separated). Any 2xx is success."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from standardwebhooks.webhooks import Webhook

from notify.choices import Language
from notify.outbound import Answer
from notify.render import failure_words
from notify.senders import Outcome, Request, Target, Verdict, by_http_status, json_body

ROTATION = timedelta(hours=24)


def payload(facts: Mapping[str, Any], now: datetime, language: str = Language.EN) -> dict[str, Any]:
    """The documented payload (docs/notifications.md): the same in every language but the
    failure's words (`failure`: label, class and advice in the channel's language)."""
    job = facts.get("job") or {}
    workload = facts.get("workload") or {}
    data = {
        "event": facts.get("event", "test"),
        "resolved": bool(facts.get("resolved")),
        "at": facts.get("at") or now.astimezone(UTC).isoformat(),
        "job": {key: job.get(key) for key in ("id", "name", "project", "cluster", "url")}
        if job else None,
        "workload": {key: workload.get(key) for key in ("state", "reason", "step", "max_steps")}
        if workload else None,
        "gpus": facts.get("gpus"),
        "cluster": facts.get("cluster"),
        "detail": facts.get("detail") or None,
        "failure": failure_words(facts, language),
    }  # fmt: skip
    if facts.get("digest"):
        data["merged"] = [payload(item, now, language)["data"] for item in facts["digest"]]
    return {"type": data["event"], "timestamp": now.astimezone(UTC).isoformat(), "data": data}


def signature(secrets: list[str], message_id: str, now: datetime, body: str) -> str:
    return " ".join(Webhook(secret).sign(message_id, now, body) for secret in secrets if secret)


def request(
    target: Target, facts: Mapping[str, Any], now: datetime, rotated_at: datetime | None = None
) -> Request:
    body = json_body(payload(facts, now, target.language))
    headers = {
        "Content-Type": "application/json",
        "webhook-id": target.message_id,
        "webhook-timestamp": str(int(now.timestamp())),
    }
    secrets = [target.secret]
    if target.previous_secret and rotated_at is not None and now - rotated_at < ROTATION:
        secrets.append(target.previous_secret)
    if target.secret:
        headers["webhook-signature"] = signature(secrets, target.message_id, now, body.decode())
    return Request(target.url, body, headers)


def judge(answer: Answer, now: datetime) -> Outcome:
    decided = by_http_status(answer, now)
    if decided is not None:
        return decided
    return Outcome(Verdict.SENT, answer.body[:2048], answer.status)
