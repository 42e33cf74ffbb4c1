"""DingTalk custom robot: a `markdown` message.

Signing (the platform's scheme): HMAC-SHA256 keyed by the secret over
`timestamp_ms + "\\n" + secret`, base64, URL-encoded, as the `timestamp` and `sign` query
parameters. Success only when `errcode == 0`; 130101 (sending too fast) is retried."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime
from urllib.parse import quote_plus

from notify.outbound import Answer
from notify.render import Rendered
from notify.senders import Outcome, Request, Target, by_code, json_body

RATE_LIMITED = frozenset({"130101"})


def sign(timestamp_ms: int, secret: str) -> str:
    message = f"{timestamp_ms}\n{secret}".encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return quote_plus(base64.b64encode(digest).decode())


def markdown(message: Rendered) -> str:
    lines = [f"### {message.title}", *(f"- {line}" for line in message.lines)]
    if message.link:
        lines.append(f"[{message.link_text}]({message.link})")
    return "\n".join(lines)


def request(target: Target, message: Rendered, now: datetime) -> Request:
    url = target.url
    if target.secret:
        timestamp_ms = int(now.timestamp() * 1000)
        joiner = "&" if "?" in url else "?"
        url = f"{url}{joiner}timestamp={timestamp_ms}&sign={sign(timestamp_ms, target.secret)}"
    body = {"msgtype": "markdown", "markdown": {"title": message.title, "text": markdown(message)}}
    return Request(url, json_body(body), {"Content-Type": "application/json"})


def judge(answer: Answer, now: datetime) -> Outcome:
    return by_code(answer, "errcode", RATE_LIMITED, now)
