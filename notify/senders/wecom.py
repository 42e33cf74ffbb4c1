"""WeCom (企业微信) group robot: a `markdown` message of at most 4096 bytes of UTF-8, cut on a
character boundary with the link back kept. Success only when `errcode == 0`; 45009 (over the
frequency limit) is retried."""

from __future__ import annotations

from datetime import datetime

from notify.outbound import Answer
from notify.render import Rendered
from notify.senders import Outcome, Request, Target, by_code, json_body

MAX_BYTES = 4096
RATE_LIMITED = frozenset({"45009"})


def cut(text: str, tail: str, limit: int = MAX_BYTES) -> str:
    """`text` + `tail` within `limit` bytes: the text cut on a character boundary (an ellipsis
    marks the cut), the tail (the link back) always whole."""
    whole = text + tail
    if len(whole.encode()) <= limit:
        return whole
    room = limit - len(tail.encode()) - len("…".encode())
    kept = text.encode()[: max(room, 0)].decode("utf-8", "ignore")
    return kept + "…" + tail


def request(target: Target, message: Rendered, now: datetime) -> Request:
    text = "\n".join([f"### {message.title}", *(f"> {line}" for line in message.lines)])
    tail = f"\n[{message.link_text}]({message.link})" if message.link else ""
    body = {"msgtype": "markdown", "markdown": {"content": cut(text, tail)}}
    return Request(target.url, json_body(body), {"Content-Type": "application/json"})


def judge(answer: Answer, now: datetime) -> Outcome:
    return by_code(answer, "errcode", RATE_LIMITED, now)
