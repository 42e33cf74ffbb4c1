"""API tokens end: at their expiry (chosen when issued), when their owner revokes them, and when
their owner's password changes — a token must not outlive the password of the person it acts
for. Every end by revocation is in the audit trail."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import pre_save
from django.http import HttpRequest

from console import audit
from console.models import ApiToken

# The lifetimes offered when a token is issued (days); the default is ApiToken's.
LIFETIMES = (7, 30, 90, 365)


def label(token: ApiToken) -> str:
    """How the trail names a token: its name and id, never its secret or hash."""
    return f"{token.name or '-'} (#{token.pk}) of {token.user}"


def issue(user: Any, name: str, days: int, request: HttpRequest | None = None) -> str:
    token, plain = ApiToken.issue(user, name=name, days=days)
    audit.record(audit.Action.TOKEN_ISSUE, user=user, request=request, target=label(token),
                 detail=f"expires {token.expires_at:%Y-%m-%d %H:%M} UTC")  # fmt: skip
    return plain


def revoke(token: ApiToken, reason: str, *, user: Any = None, request: Any = None) -> None:
    audit.record(audit.Action.TOKEN_REVOKE, user=user, request=request, target=label(token),
                 detail=reason)  # fmt: skip
    token.delete()


def _password_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """`_password` is set by set_password() until the save, and only then: it is how Django
    itself tells a new password from a hash upgraded at login (AbstractBaseUser.save)."""
    if instance.pk is None or getattr(instance, "_password", None) is None:
        return
    for token in ApiToken.objects.filter(user_id=instance.pk).select_related("user"):
        revoke(token, "password changed")


def connect_signals() -> None:
    pre_save.connect(_password_changed, sender=get_user_model(), dispatch_uid="token_password")
