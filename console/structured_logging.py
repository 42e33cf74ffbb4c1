"""Structured logs (`TRAINYARD_LOG_FORMAT=json`): one JSON object per line and event, with the
ids of the cluster or Job it concerns.

Ids come from two places: a log call's own `extra=` (`logger.info(..., extra={"job_id": 7})`),
and the `log_context` a Celery task opens around its work, so that every line logged inside a
sync cycle names its cluster without each call in the engine passing it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson

# The attributes every LogRecord has: anything else on a record came from `extra=`.
_STANDARD = {*vars(logging.makeLogRecord({})), "message", "asctime"}
_context: ContextVar[dict[str, Any]] = ContextVar("trainyard_log_context", default={})  # noqa: B039


@contextmanager
def log_context(**ids: Any) -> Iterator[None]:
    """Adds these fields to every JSON line logged inside the block (in this thread or task)."""
    token = _context.set(_context.get() | ids)
    try:
        yield
    finally:
        _context.reset(token)


class JsonFormatter(logging.Formatter):
    """time, level, logger, message, then the context's and the call's own fields."""

    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_context.get(),
        }
        event.update((k, v) for k, v in vars(record).items() if k not in _STANDARD)
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(event, default=str).decode()
