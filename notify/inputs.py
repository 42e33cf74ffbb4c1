"""A channel or a subscription as the API and the Notifications page take it: checked field by
field, every error at once, each naming its field (`{field: message}`), as everywhere else."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from console.models import Project
from jobs.access import jobs_for, projects_for
from jobs.models import Job
from notify import outbound
from notify.choices import Event, Kind, Language, ScopeKind
from notify.models import PENDING_MINUTES, REPEAT_HOURS, Channel

SIGNED = frozenset({Kind.FEISHU, Kind.DINGTALK, Kind.WEBHOOK})
MAX_PENDING_MINUTES = 7 * 24 * 60
MAX_REPEAT_HOURS = 7 * 24


class Invalid(Exception):
    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


@dataclass(frozen=True)
class ChannelInput:
    name: str
    kind: Kind
    target: str
    secret: str
    language: Language
    project: Project | None


def channels_for(user: AbstractBaseUser) -> QuerySet[Channel]:
    """Channels a user manages and may subscribe with: theirs, and their projects' (managed by
    the projects' members, issue 32 §Build 4)."""
    projects = projects_for(user, write=True)
    return Channel.objects.filter(
        Q(owner_id=user.pk, project__isnull=True) | Q(project__in=projects)
    ).select_related("project")


def _text(data: Mapping[str, Any], name: str, errors: dict[str, str], required: bool) -> str:
    value = data.get(name)
    if value is None or value == "":
        if required:
            errors[name] = _("This field is required.")
        return ""
    if not isinstance(value, str):
        errors[name] = _("Must be text.")
        return ""
    return value.strip()


def _webhook_secret(secret: str) -> str | None:
    """A Standard Webhooks secret: `whsec_` and base64 of 24 to 64 bytes."""
    try:
        raw = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not secret.startswith("whsec_") or not 24 <= len(raw) <= 64:
        return _("A webhook secret is whsec_ followed by base64 of 24 to 64 bytes.")
    return None


def _target(data: Mapping[str, Any], kind: Kind | None, errors: dict[str, str]) -> str:
    if kind == Kind.EMAIL:
        address = _text(data, "address", errors, True)
        if address:
            try:
                validate_email(address)
            except ValidationError:
                errors["address"] = _("Enter a valid e-mail address.")
        return address
    url = _text(data, "url", errors, kind is not None)
    if url:
        try:
            outbound.resolve(url)
        except outbound.AddressRefused as refused:
            errors["url"] = str(refused)
    return url


def _secret(data: Mapping[str, Any], kind: Kind | None, errors: dict[str, str]) -> str:
    secret = _text(data, "secret", errors, False)
    if secret and kind is not None and kind not in SIGNED:
        errors["secret"] = _("This kind of channel is not signed: leave the secret out.")
    elif secret and kind == Kind.WEBHOOK and (why := _webhook_secret(secret)):
        errors["secret"] = why
    return secret


def _choice[C: (Kind, Language)](
    data: Mapping[str, Any], name: str, choices: type[C], errors: dict[str, str],
    default: C | None = None,
) -> C | None:  # fmt: skip
    value = data.get(name, default)
    if value in choices.values:
        return choices(value)
    errors[name] = _("Choose one of: %(choices)s.") % {"choices": ", ".join(choices.values)}
    return None


def _project(
    data: Mapping[str, Any], user: AbstractBaseUser, errors: dict[str, str]
) -> Project | None:
    name = data.get("project")
    if name in (None, ""):
        return None
    found = projects_for(user, write=True).filter(name=str(name)).first()
    if found is None:
        errors["project"] = _("No project of yours is named %(name)s.") % {"name": name}
    return found


def channel_input(data: Mapping[str, Any], user: AbstractBaseUser) -> ChannelInput:
    errors: dict[str, str] = {}
    name = _text(data, "name", errors, True)[:100]
    kind = _choice(data, "kind", Kind, errors)
    target = _target(data, kind, errors)
    secret = _secret(data, kind, errors)
    language = _choice(data, "language", Language, errors, Language.EN)
    project = _project(data, user, errors)
    if errors or kind is None or language is None:
        raise Invalid(errors)
    return ChannelInput(name, kind, target, secret, language, project)


def mask(channel: Channel) -> str:
    """What a reader sees of a URL or address: enough to recognise it, never its token."""
    text = channel.target
    if channel.kind == Kind.EMAIL:
        local, _at, domain = text.partition("@")
        return f"{local[:1]}…@{domain}"
    scheme, _sep, rest = text.partition("://")
    host = rest.split("/", 1)[0].split("?", 1)[0]
    return (
        f"{scheme}://{host}/…{text[-4:]}" if len(rest) > len(host) + 4 else f"{scheme}://{host}/…"
    )


# --- subscriptions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubscriptionInput:
    channel: Channel
    scope: ScopeKind
    project: Project | None
    job: Job | None
    events: list[str]
    pending_minutes: int
    repeat_hours: int


def _number(
    data: Mapping[str, Any], name: str, default: int, high: int, errors: dict[str, str]
) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        errors[name] = _("A whole number from 0 to %(high)s.") % {"high": high}
        return default
    return value


def _events(data: Mapping[str, Any], errors: dict[str, str]) -> list[str]:
    value = data.get("events")
    if not isinstance(value, list) or not value:
        errors["events"] = _("Choose at least one event.")
        return []
    unknown = [str(v) for v in value if v not in Event.values]
    if unknown:
        errors["events"] = _("Unknown events: %(names)s.") % {"names": ", ".join(unknown)}
    return [event for event in Event.values if event in value]


def _scope(
    data: Mapping[str, Any], user: AbstractBaseUser, errors: dict[str, str]
) -> tuple[ScopeKind | None, Project | None, Job | None]:
    scope = data.get("scope")
    kind = scope.get("kind") if isinstance(scope, dict) else None
    if kind == ScopeKind.MINE:
        return ScopeKind.MINE, None, None
    if kind == ScopeKind.PROJECT:
        project = projects_for(user).filter(name=str(scope.get("project", ""))).first()  # type: ignore[union-attr]
        if project is None:
            errors["scope.project"] = _("No project of yours has this name.")
        return ScopeKind.PROJECT, project, None
    if kind == ScopeKind.JOB:
        job_id = scope.get("job")  # type: ignore[union-attr]
        job = jobs_for(user).filter(pk=job_id).first() if isinstance(job_id, int) else None
        if job is None:
            errors["scope.job"] = _("No Job you can read has this id.")
        return ScopeKind.JOB, None, job
    errors["scope"] = _('One of {"kind": "mine"}, {"kind": "project", "project": NAME} or '
                        '{"kind": "job", "job": ID}.')  # fmt: skip
    return None, None, None


def subscription_input(data: Mapping[str, Any], user: AbstractBaseUser) -> SubscriptionInput:
    errors: dict[str, str] = {}
    channel_id = data.get("channel")
    found = (
        channels_for(user).filter(pk=channel_id).first() if isinstance(channel_id, int) else None
    )
    if found is None:
        errors["channel"] = _("No channel of yours has this id.")
    scope, project, job = _scope(data, user, errors)
    events = _events(data, errors)
    pending = _number(data, "pending_minutes", PENDING_MINUTES, MAX_PENDING_MINUTES, errors)
    repeat = _number(data, "repeat_hours", REPEAT_HOURS, MAX_REPEAT_HOURS, errors)
    if errors or found is None or scope is None:
        raise Invalid(errors)
    return SubscriptionInput(found, scope, project, job, events, max(pending, 1), repeat)


def rotated_secret(channel: Channel, data: Mapping[str, Any]) -> str:
    """A webhook channel's new signing secret (Standard Webhooks); the old one keeps signing
    beside it for 24 hours (notify.senders.webhook)."""
    errors: dict[str, str] = {}
    secret = _text(data, "secret", errors, True)
    if channel.kind != Kind.WEBHOOK:
        errors["secret"] = _("Only a webhook channel's secret is rotated here.")
    elif secret and (why := _webhook_secret(secret)):
        errors["secret"] = why
    if errors:
        raise Invalid(errors)
    return secret
