"""Feishu / Lark custom bot: an interactive card with a button to the Job page.

Signing (the platform's scheme): HMAC-SHA256 keyed by `timestamp + "\\n" + secret` over an
empty message, base64; `timestamp` (seconds) and `sign` go in the body. Success only when HTTP
2xx and `code == 0`; 19021 (bad signature) and the other codes are configuration errors, 11232
(frequency limited) is retried."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime
from typing import Any

from notify.outbound import Answer
from notify.render import Rendered
from notify.senders import Outcome, Request, Target, by_code, json_body

RATE_LIMITED = frozenset({"11232", "9499"})


def sign(timestamp: int, secret: str) -> str:
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def card(message: Rendered) -> dict[str, Any]:
    elements: list[dict[str, Any]] = [
        {"tag": "div", "text": {"tag": "lark_md", "content": "\n".join(message.lines)}}
    ]
    if message.link:
        button = {
            "tag": "button", "type": "primary", "url": message.link,
            "text": {"tag": "plain_text", "content": message.link_text},
        }  # fmt: skip
        elements.append({"tag": "action", "actions": [button]})
    template = "green" if message.resolved else "red"
    header = {"title": {"tag": "plain_text", "content": message.title}, "template": template}
    return {"config": {"wide_screen_mode": True}, "header": header, "elements": elements}


def request(target: Target, message: Rendered, now: datetime) -> Request:
    body: dict[str, Any] = {"msg_type": "interactive", "card": card(message)}
    if target.secret:
        timestamp = int(now.timestamp())
        body = {"timestamp": str(timestamp), "sign": sign(timestamp, target.secret), **body}
    return Request(target.url, json_body(body), {"Content-Type": "application/json"})


def judge(answer: Answer, now: datetime) -> Outcome:
    return by_code(answer, "code", RATE_LIMITED, now)
