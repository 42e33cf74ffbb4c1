"""The Notifications page (issue 32 §Build 5): my channels (add, send a test and see the
platform's raw answer, delete, Broken state), my subscriptions, the delivery log; and the Job
page's "Notify me". The page takes what the API takes (notify.inputs), field errors included."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from jobs.access import get_job_for_user, projects_for
from notify.api import create_channel, create_subscription
from notify.choices import JOB_PAGE_EVENTS, ChannelState, Event, Kind, Language, ScopeKind
from notify.deliver import send_test
from notify.inputs import Invalid, channels_for, mask, rotated_secret
from notify.models import Channel, Delivery, Subscription

LOG_SHOWN = 50


def _reader(request: HttpRequest) -> AbstractBaseUser:
    if not isinstance(request.user, AbstractBaseUser):
        raise PermissionDenied
    return request.user


def _page(request: HttpRequest, **extra: Any) -> HttpResponse:
    user = _reader(request)
    channels = list(channels_for(user).order_by("name", "pk"))
    context = {
        "channel_rows": [(channel, mask(channel)) for channel in channels],
        "subscriptions": Subscription.objects.filter(user_id=user.pk)
        .select_related("channel", "project", "job"),
        "deliveries": Delivery.objects.filter(channel__in=channels)
        .select_related("channel", "job")[:LOG_SHOWN],
        "projects": projects_for(user),
        "kinds": Kind.choices, "channel_languages": Language.choices, "events": Event.choices,
        "scopes": ScopeKind.choices, "broken": ChannelState.BROKEN,
        "channel_errors": {}, "subscription_errors": {}, "channel_form": {},
        "subscription_form": {},
    }  # fmt: skip
    return render(request, "notify/notifications.html", context | extra)


@login_required
@require_GET
def notifications(request: HttpRequest) -> HttpResponse:
    return _page(request)


def _channel_data(post: Any) -> dict[str, Any]:
    data = {key: post.get(key, "").strip() for key in ("name", "kind", "secret")}
    data["language"] = post.get("language") or "en"
    data["project"] = post.get("project") or None
    target = post.get("target", "").strip()
    data["address" if data["kind"] == Kind.EMAIL else "url"] = target
    return data


@login_required
@require_POST
def channel_add(request: HttpRequest) -> HttpResponse:
    try:
        channel = create_channel(_reader(request), _channel_data(request.POST))
    except Invalid as invalid:
        errors = {
            ("target" if k in ("url", "address") else k): v for k, v in invalid.errors.items()
        }
        form = {key: request.POST.get(key, "") for key in ("name", "kind", "target", "language")}
        return _page(request, channel_errors=errors, channel_form=form)
    messages.success(request, _("Channel %(name)s added. Send a test to check it.") % {
        "name": channel.name,
    })  # fmt: skip
    return redirect("notifications")


def _own_channel(request: HttpRequest, pk: int) -> Channel:
    return get_object_or_404(channels_for(_reader(request)), pk=pk)


@login_required
@require_POST
def channel_test(request: HttpRequest, pk: int) -> HttpResponse:
    """Sends now and shows what the platform answered, word for word."""
    channel = _own_channel(request, pk)
    delivery = send_test(channel)
    answer = delivery.message or "-"
    if delivery.http_status is not None:
        answer = f"HTTP {delivery.http_status}: {answer}"
    if delivery.status == "sent":
        messages.success(request, _("Test sent to %(name)s. The platform answered: %(answer)s") % {
            "name": channel.name, "answer": answer,
        })  # fmt: skip
    else:
        messages.error(request, _("Test to %(name)s failed. The platform answered: %(answer)s") % {
            "name": channel.name, "answer": answer,
        })  # fmt: skip
    return redirect("notifications")


@login_required
@require_POST
def channel_rotate(request: HttpRequest, pk: int) -> HttpResponse:
    """A new signing secret for a webhook channel; for 24 hours both sign every message."""
    channel = _own_channel(request, pk)
    try:
        secret = rotated_secret(channel, {"secret": request.POST.get("secret", "")})
    except Invalid as invalid:
        messages.error(request, invalid.errors["secret"])
        return redirect("notifications")
    channel.previous_secret, channel.secret = channel.secret, secret
    channel.secret_rotated_at = timezone.now()
    channel.save(update_fields=["previous_secret", "secret", "secret_rotated_at"])
    messages.success(request, _("New secret of %(name)s saved: the old one signs beside it "
                                "for 24 hours.") % {"name": channel.name})  # fmt: skip
    return redirect("notifications")


@login_required
@require_POST
def channel_delete(request: HttpRequest, pk: int) -> HttpResponse:
    channel = _own_channel(request, pk)
    channel.delete()
    messages.success(request, _("Channel %(name)s deleted.") % {"name": channel.name})
    return redirect("notifications")


def _subscription_data(post: Any) -> dict[str, Any]:
    kind = post.get("scope", "")
    scope: dict[str, Any] = {"kind": kind}
    if kind == ScopeKind.PROJECT:
        scope["project"] = post.get("project", "")
    if kind == ScopeKind.JOB:
        scope["job"] = int(post["job"]) if post.get("job", "").isdigit() else None
    data: dict[str, Any] = {"scope": scope, "events": post.getlist("events")}
    for name in ("channel", "pending_minutes", "repeat_hours"):
        value = post.get(name, "").strip()
        data[name] = int(value) if value.isdigit() else (value or None)
    return {key: value for key, value in data.items() if value is not None}


@login_required
@require_POST
def subscription_add(request: HttpRequest) -> HttpResponse:
    try:
        create_subscription(_reader(request), _subscription_data(request.POST))
    except Invalid as invalid:
        names = ("channel", "scope", "project", "job", "pending_minutes", "repeat_hours")
        form: dict[str, Any] = {key: request.POST.get(key, "") for key in names}
        form["events"] = request.POST.getlist("events")
        return _page(request, subscription_errors=invalid.errors, subscription_form=form)
    messages.success(request, _("Subscribed."))
    return redirect("notifications")


@login_required
@require_POST
def subscription_delete(request: HttpRequest, pk: int) -> HttpResponse:
    get_object_or_404(Subscription, pk=pk, user_id=_reader(request).pk).delete()
    messages.success(request, _("Subscription removed."))
    return redirect("notifications")


@login_required
@require_POST
def notify_me(request: HttpRequest, pk: int) -> HttpResponse:
    """The Job page's button: the reader subscribes to this Job with their default channel
    (their first own channel that is not Broken)."""
    user = _reader(request)
    job = get_job_for_user(user, pk)
    default = (
        Channel.objects.filter(owner_id=user.pk, project__isnull=True, state=ChannelState.OK)
        .order_by("created_at", "pk")
        .first()
    )
    if default is None:
        messages.warning(request, _("Add a channel first: then Notify me uses it."))
        return redirect("notifications")
    data = {"channel": default.pk, "scope": {"kind": ScopeKind.JOB, "job": job.pk},
            "events": [str(event) for event in JOB_PAGE_EVENTS]}  # fmt: skip
    known = Subscription.objects.filter(user_id=user.pk, scope=ScopeKind.JOB, job=job)
    if not known.filter(channel=default).exists():
        create_subscription(user, data)
    messages.success(request, _("You will be told about %(job)s on %(channel)s.") % {
        "job": job.name, "channel": default.name,
    })  # fmt: skip
    return redirect("job", pk=job.pk)
