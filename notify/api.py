"""The notifications' JSON API (issue 32 §Build 5), on the console's API (jobs.api: its
authentication, its JSON errors): channels, their test send and delivery log, subscriptions.
A channel's URL and secret are never answered: `target` is masked."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.http import Http404, HttpRequest, HttpResponse
from ninja import Schema, Status
from pydantic import BaseModel, ConfigDict

from jobs.api.core import ObjectId, TrainyardAPI, api, body_doc, error, json_body, user_of
from jobs.schemas import READ, WRITE, AcceptedOut
from notify.choices import ChannelState, Event, Kind, Language, ScopeKind, SendStatus
from notify.deliver import send_test
from notify.inputs import (
    Invalid,
    channel_input,
    channels_for,
    mask,
    subscription_input,
)
from notify.models import Channel, Delivery, Subscription
from notify.watch import follow

DELIVERIES_SHOWN = 100


class ChannelIn(BaseModel):
    """A channel: `url` (and `secret` for signed kinds) for a webhook kind, `address` for
    e-mail. Checked by notify.inputs, every wrong field named."""

    model_config = ConfigDict(extra="forbid")
    name: str
    kind: Kind
    url: str | None = None
    address: str | None = None
    secret: str | None = None
    language: Language = Language.EN
    project: str | None = None


class ScopeIn(BaseModel):
    kind: ScopeKind
    project: str | None = None
    job: int | None = None


class SubscriptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    channel: int
    scope: ScopeIn
    events: list[Event]
    pending_minutes: int = 30
    repeat_hours: int = 4


TrainyardAPI.REQUEST_MODELS += (ChannelIn, SubscriptionIn)


class ChannelOut(Schema):
    id: int
    name: str
    kind: Kind
    language: Language
    project: str | None
    target: str
    signed: bool
    state: ChannelState
    broken_reason: str
    created_at: datetime


class DeliveryOut(Schema):
    id: int
    event: Event | None
    job: int | None
    status: SendStatus
    attempt: int
    http_status: int | None
    platform_code: str
    message: str
    at: datetime


class ScopeOut(Schema):
    kind: ScopeKind
    project: str | None = None
    job: int | None = None


class SubscriptionOut(Schema):
    id: int
    channel: int
    scope: ScopeOut
    events: list[Event]
    pending_minutes: int
    repeat_hours: int
    created_at: datetime


@api.exception_handler(Invalid)
def _invalid(request: HttpRequest, exc: Invalid) -> HttpResponse:
    return error(request, 422, "Invalid request.", errors=exc.errors)


def channel_out(channel: Channel) -> dict[str, Any]:
    return {
        "id": channel.pk, "name": channel.name, "kind": channel.kind,
        "language": channel.language, "project": channel.project.name if channel.project else None,
        "target": mask(channel), "signed": bool(channel.secret), "state": channel.state,
        "broken_reason": channel.broken_reason, "created_at": channel.created_at,
    }  # fmt: skip


def delivery_out(delivery: Delivery) -> dict[str, Any]:
    return {
        "id": delivery.pk, "event": delivery.event if delivery.event in Event.values else None,
        "job": delivery.job_id, "status": delivery.status, "attempt": delivery.attempt,
        "http_status": delivery.http_status, "platform_code": delivery.platform_code,
        "message": delivery.message, "at": delivery.at,
    }  # fmt: skip


def subscription_out(sub: Subscription) -> dict[str, Any]:
    scope: dict[str, Any] = {"kind": sub.scope}
    if sub.scope == ScopeKind.PROJECT and sub.project is not None:
        scope["project"] = sub.project.name
    if sub.scope == ScopeKind.JOB:
        scope["job"] = sub.job_id
    return {
        "id": sub.pk, "channel": sub.channel_id, "scope": scope, "events": sub.events,
        "pending_minutes": sub.pending_minutes, "repeat_hours": sub.repeat_hours,
        "created_at": sub.created_at,
    }  # fmt: skip


def _channel(user: AbstractBaseUser, channel_id: int) -> Channel:
    found = channels_for(user).filter(pk=channel_id).first()
    if found is None:
        raise Http404("No such channel.")
    return found


def create_channel(user: AbstractBaseUser, data: dict[str, Any]) -> Channel:
    """Also what the Notifications page calls."""
    given = channel_input(data, user)
    return Channel.objects.create(
        owner_id=user.pk, project=given.project, name=given.name, kind=given.kind,
        language=given.language, target=given.target, secret=given.secret,
    )  # fmt: skip


def create_subscription(user: AbstractBaseUser, data: dict[str, Any]) -> Subscription:
    """Also what the Notifications page and the Job page's "Notify me" call."""
    given = subscription_input(data, user)
    subscription = Subscription.objects.create(
        user_id=user.pk, channel=given.channel, scope=given.scope, project=given.project,
        job=given.job, events=given.events, pending_minutes=given.pending_minutes,
        repeat_hours=given.repeat_hours,
    )  # fmt: skip
    follow(subscription)  # what it covers is judged in the next sync cycle
    return subscription


# --- endpoints -----------------------------------------------------------------------------------


@api.get("/channels", response={200: list[ChannelOut], **READ}, tags=["notifications"])
def list_channels(request: HttpRequest) -> list[dict[str, Any]]:
    """Your channels and your projects' (their URL and secret masked)."""
    return [channel_out(c) for c in channels_for(user_of(request)).order_by("name", "pk")]


@api.post(
    "/channels",
    response={201: ChannelOut, **WRITE},
    openapi_extra=body_doc(ChannelIn),
    tags=["notifications"],
)
def add_channel(request: HttpRequest) -> Status[dict[str, Any]]:
    """`{name, kind, url, secret?, language, project?}`, or `{name, kind: "email", address,
    language}`; 422 naming each wrong field (a URL the address guard refuses included)."""
    channel = create_channel(user_of(request), json_body(request))
    return Status(201, channel_out(channel))


@api.get("/channels/{channel_id}", response={200: ChannelOut, **READ}, tags=["notifications"])
def channel_detail(request: HttpRequest, channel_id: ObjectId) -> dict[str, Any]:
    return channel_out(_channel(user_of(request), channel_id))


@api.delete("/channels/{channel_id}", response={200: AcceptedOut, **WRITE}, tags=["notifications"])
def delete_channel(request: HttpRequest, channel_id: ObjectId) -> dict[str, str]:
    """The channel, its subscriptions and its messages."""
    _channel(user_of(request), channel_id).delete()
    return {"message": "Channel deleted."}


@api.post(
    "/channels/{channel_id}/test", response={200: DeliveryOut, **WRITE}, tags=["notifications"]
)
def test_channel(request: HttpRequest, channel_id: ObjectId) -> dict[str, Any]:
    """Sends a test message now; answers once the platform answered, with its answer."""
    return delivery_out(send_test(_channel(user_of(request), channel_id)))


@api.get(
    "/channels/{channel_id}/deliveries",
    response={200: list[DeliveryOut], **READ},
    tags=["notifications"],
)
def channel_deliveries(request: HttpRequest, channel_id: ObjectId) -> list[dict[str, Any]]:
    """Every attempt, newest first (the last 100)."""
    channel = _channel(user_of(request), channel_id)
    rows = channel.deliveries.order_by("-at", "-pk")[:DELIVERIES_SHOWN]
    return [delivery_out(d) for d in rows]


@api.get(
    "/subscriptions",
    response={200: list[SubscriptionOut], **READ},
    tags=["notifications"],
    exclude_none=True,  # a scope is {"kind": "mine"}, not {"kind": "mine", "project": null}
)
def list_subscriptions(request: HttpRequest) -> list[dict[str, Any]]:
    mine = Subscription.objects.filter(user_id=user_of(request).pk).select_related("project")
    return [subscription_out(s) for s in mine]


@api.post(
    "/subscriptions",
    response={201: SubscriptionOut, **WRITE},
    openapi_extra=body_doc(SubscriptionIn),
    tags=["notifications"],
    exclude_none=True,
)
def add_subscription(request: HttpRequest) -> Status[dict[str, Any]]:
    """`{channel, scope, events, pending_minutes?, repeat_hours?}`: only Jobs you can read."""
    sub = create_subscription(user_of(request), json_body(request))
    return Status(201, subscription_out(sub))


@api.delete(
    "/subscriptions/{subscription_id}", response={200: AcceptedOut, **WRITE}, tags=["notifications"]
)
def delete_subscription(request: HttpRequest, subscription_id: ObjectId) -> dict[str, str]:
    deleted, _ = Subscription.objects.filter(
        pk=subscription_id, user_id=user_of(request).pk
    ).delete()
    if not deleted:
        raise Http404("No such subscription.")
    return {"message": "Subscription deleted."}
