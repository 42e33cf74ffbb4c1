"""Thin Celery task: the messages of the occurrences due written (notify.fanout.fan_out), then
the outbox drained (notify.deliver.drain), by plain functions."""

from __future__ import annotations

from celery import shared_task


@shared_task
def drain_outbox() -> None:
    from django.utils import timezone

    from notify.deliver import drain
    from notify.fanout import fan_out

    now = timezone.now()
    fan_out(now)
    drain(now)
