"""Slack incoming webhook: blocks and a plain `text`. Success is HTTP 200 with the body `ok`;
429 is retried after its Retry-After; another 4xx (`no_service`, `invalid_token`...) is a
configuration error."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from notify.outbound import Answer
from notify.render import Rendered
from notify.senders import Outcome, Request, Target, Verdict, by_http_status, json_body


def blocks(message: Rendered) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": message.title[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(message.lines)}},
    ]
    if message.link:
        button = {
            "type": "button", "url": message.link,
            "text": {"type": "plain_text", "text": message.link_text},
        }  # fmt: skip
        found.append({"type": "actions", "elements": [button]})
    return found


def request(target: Target, message: Rendered, now: datetime) -> Request:
    text = "\n".join([message.title, *message.lines, message.link])
    body = {"text": text.strip(), "blocks": blocks(message)}
    return Request(target.url, json_body(body), {"Content-Type": "application/json"})


def judge(answer: Answer, now: datetime) -> Outcome:
    decided = by_http_status(answer, now)
    if decided is not None:
        return decided
    if answer.status == 200 and answer.body.strip() == "ok":
        return Outcome(Verdict.SENT, "ok", 200)
    return Outcome(Verdict.BROKEN, answer.body[:2048], answer.status)
