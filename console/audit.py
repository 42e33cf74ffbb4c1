"""The audit trail: who did what, when (UTC), from where (IP, user agent) and with what result.

`record()` is the one way to add an event; operations (jobs/operations.py), logins and logouts
(Django's auth signals, below), API tokens, clusters, projects and memberships call it. Callers
pass facts, never a secret: no token, password or kubeconfig, only names and ids.

Where a request is at hand its origin is taken from it; code that has only a user (operations
called from a view or the API) gets the origin of the request being served, which
`origin_middleware` keeps in a context variable for the length of the request (read only when
an event is recorded: most requests record none).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.auth import get_user_model, user_logged_in, user_logged_out, user_login_failed
from django.db.models.signals import m2m_changed, pre_save
from django.http import HttpRequest, HttpResponse

from console.models import AuditEvent

Action = AuditEvent.Action
Result = AuditEvent.Result
USER_AGENT_MAX = 300


class Origin(NamedTuple):
    ip: str | None
    user_agent: str


_NOWHERE = Origin(None, "")
_current: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    networks = settings.TRAINYARD_TRUSTED_PROXIES
    return any(ip in ipaddress.ip_network(net, strict=False) for net in networks)


def client_ip(request: HttpRequest) -> str | None:
    """The client's address: REMOTE_ADDR, or, behind proxies listed in TRAINYARD_TRUSTED_PROXIES,
    the right-most X-Forwarded-For address that is not one of them (a client can write anything
    to the left of what its proxies appended)."""
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    chain = [*hops, request.META.get("REMOTE_ADDR", "")]
    for address in reversed(chain):
        if not _trusted(address):
            return _valid(address)
    return _valid(chain[0])


def _valid(address: str) -> str | None:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None


def origin_of(request: HttpRequest | None) -> Origin:
    request = request if request is not None else _current.get()
    if request is None:
        return _NOWHERE
    agent = request.META.get("HTTP_USER_AGENT", "")[:USER_AGENT_MAX]
    return Origin(client_ip(request), agent)


def origin_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        token = _current.set(request)
        try:
            return get_response(request)
        finally:
            _current.reset(token)

    return middleware


def _actor(user: Any, request: HttpRequest | None) -> Any:
    actor = user if user is not None else getattr(request, "user", None)
    return actor if actor is not None and actor.is_authenticated else None


def record(
    action: AuditEvent.Action,
    *,
    user: Any = None,
    request: HttpRequest | None = None,
    target: str = "",
    result: AuditEvent.Result = Result.SUCCEEDED,
    detail: str = "",
    actor_name: str = "",
) -> AuditEvent:
    """Adds one event. `user` defaults to the request's; `actor_name` names who it was when
    there is no user (a failed login)."""
    actor = _actor(user, request)
    where = origin_of(request)
    return AuditEvent.objects.create(
        actor=actor,
        actor_name=actor.get_username() if actor else actor_name[:150],
        action=action,
        target=target[:200],
        result=result,
        detail=detail[:500],
        ip=where.ip,
        user_agent=where.user_agent,
    )


# --- Django's auth signals -------------------------------------------------------------------


def _logged_in(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    record(Action.LOGIN, user=user, request=request)


def _logged_out(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    if user is not None:
        record(Action.LOGOUT, user=user, request=request)


def _login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    """The name tried is kept only if such a user exists: people type passwords into the name
    field, and a name that matches no one tells an operator nothing a count would not."""
    tried = str(credentials.get(get_user_model().USERNAME_FIELD, ""))
    known = get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: tried})
    name = tried if tried and known.exists() else ""
    record(Action.LOGIN_FAILED, request=request, result=Result.FAILED, actor_name=name)


# --- a user's rights: superuser, staff, active, groups, permissions -----------------------------

RIGHTS = ("is_superuser", "is_staff", "is_active")


def _rights_changed(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    """Before a user is saved: which of RIGHTS the save changes (a login's save of last_login
    is skipped without a query)."""
    if instance.pk is None or (update_fields is not None and not set(update_fields) & set(RIGHTS)):
        return
    before = sender._default_manager.filter(pk=instance.pk).values(*RIGHTS).first()
    if before is None:
        return
    changed = [
        f"{name}: {before[name]} -> {getattr(instance, name)}"
        for name in RIGHTS
        if before[name] != getattr(instance, name)
    ]
    if changed:
        record(
            Action.ROLE_CHANGE, target=f"user {instance.get_username()}", detail="; ".join(changed)
        )


def _groups_changed(
    sender: Any, instance: Any, action: str, pk_set: Any, model: Any, **kwargs: Any
) -> None:
    if action not in ("post_add", "post_remove", "post_clear") or not isinstance(
        instance, get_user_model()
    ):
        return
    names = sorted(str(item) for item in model._default_manager.filter(pk__in=pk_set or ()))
    what = f"{sender._meta.model_name}: {action.removeprefix('post_')} {', '.join(names)}".strip()
    record(Action.ROLE_CHANGE, target=f"user {instance.get_username()}", detail=what)


def connect_signals() -> None:
    User = get_user_model()
    pre_save.connect(_rights_changed, sender=User, dispatch_uid="audit_rights")
    for through in (User.groups.through, User.user_permissions.through):
        m2m_changed.connect(_groups_changed, sender=through, dispatch_uid=f"audit_{through}")
    user_logged_in.connect(_logged_in, dispatch_uid="audit_login")
    user_logged_out.connect(_logged_out, dispatch_uid="audit_logout")
    user_login_failed.connect(_login_failed, dispatch_uid="audit_login_failed")
