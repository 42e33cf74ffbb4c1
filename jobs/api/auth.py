"""`Authorization: Bearer <token>` for the API: a user's token, checked against its hash."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone
from ninja.errors import HttpError
from ninja.security import HttpBearer

from console import audit, ratelimit
from console.models import ApiToken

TOKEN_TOUCH_INTERVAL = timedelta(minutes=1)


class BearerToken(HttpBearer):
    """`Authorization: Bearer <token>`, checked against the SHA-256 stored in ApiToken."""

    def authenticate(self, request: HttpRequest, token: str) -> AbstractBaseUser | None:
        """An expired token is as unknown as a wrong one. Failures are counted per client
        address (console/ratelimit.py): past the limit, every token is refused for a while."""
        limits = ratelimit.api_limits(audit.client_ip(request))
        minutes = ratelimit.minutes_to_wait(limits)
        if minutes:
            raise HttpError(
                429, f"Too many invalid tokens from this address; try again in {minutes} minutes."
            )
        live = ApiToken.objects.filter(expires_at__gt=timezone.now())
        record = live.select_related("user").filter(token_hash=ApiToken.hash(token)).first()
        if record is None or not record.user.is_active:
            ratelimit.note_failure(limits)
            return None
        touch(record)
        request.user = record.user
        return record.user


def touch(record: ApiToken) -> None:
    """`last_used_at`, written at most once a minute so that reads stay read-only."""
    now = timezone.now()
    if record.last_used_at is not None and now - record.last_used_at < TOKEN_TOUCH_INTERVAL:
        return
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - TOKEN_TOUCH_INTERVAL)
    ApiToken.objects.filter(stale, pk=record.pk).update(last_used_at=now)
