"""Thin Celery task: the outbox drained by a plain function (notify.deliver.drain)."""

from __future__ import annotations

from celery import shared_task


@shared_task
def drain_outbox() -> None:
    from notify.deliver import drain

    drain()
