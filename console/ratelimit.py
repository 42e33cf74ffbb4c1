"""Rate limiting of failed logins (per account and per client address) and of failed API
tokens (per address): past the limit within the window, attempts are refused, even with the
right password, until the oldest counted failure leaves the window. A small table, so that every
web process counts the same failures whatever the cache."""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from console.models import AuthFailure

Limit = tuple[str, int]  # (key, failures allowed within the window)


def login_limits(username: str, ip: str | None) -> list[Limit]:
    limits = [(f"account:{username.strip().lower()[:150]}", settings.TRAINYARD_LOGIN_FAILURES)]
    if ip:
        limits.append((f"ip:{ip}", settings.TRAINYARD_LOGIN_FAILURES_PER_IP))
    return limits


def api_limits(ip: str | None) -> list[Limit]:
    return [(f"api:{ip}", settings.TRAINYARD_LOGIN_FAILURES_PER_IP)] if ip else []


def _window() -> timedelta:
    return timedelta(seconds=settings.TRAINYARD_LOGIN_WINDOW)


def minutes_to_wait(limits: list[Limit]) -> int:
    """0 when every key is under its limit; else the minutes until one more attempt is allowed."""
    now = timezone.now()
    waits = [0.0]
    for key, allowed in limits:
        recent = AuthFailure.objects.filter(key=key, at__gt=now - _window()).order_by("-at")
        counted = list(recent.values_list("at", flat=True)[:allowed])
        if len(counted) >= allowed:
            waits.append((counted[-1] + _window() - now).total_seconds())
    return math.ceil(max(waits) / 60)


def note_failure(limits: list[Limit]) -> None:
    now = timezone.now()
    AuthFailure.objects.filter(at__lte=now - _window()).delete()
    AuthFailure.objects.bulk_create([AuthFailure(key=key, at=now) for key, _allowed in limits])


def forget(limit: Limit) -> None:
    """A successful login clears its account's failures (not its address's)."""
    AuthFailure.objects.filter(key=limit[0]).delete()
