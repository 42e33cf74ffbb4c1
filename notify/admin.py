"""Notifications for operators: read-only lists. A channel's URL and secret are never shown
(its masked target is)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from notify.inputs import mask
from notify.models import Channel, Delivery, Outbox, Subscription


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Channel)
class ChannelAdmin(ReadOnlyAdmin):
    list_display = ["name", "kind", "owner", "project", "masked_target", "state", "created_at"]
    list_filter = ["kind", "state"]
    list_select_related = ["owner", "project"]
    search_fields = ["name", "owner__username"]
    exclude = ["target", "secret", "previous_secret"]
    readonly_fields = ["masked_target"]

    @admin.display(description="sends to")
    def masked_target(self, channel: Channel) -> str:
        return mask(channel)


@admin.register(Subscription)
class SubscriptionAdmin(ReadOnlyAdmin):
    list_display = ["user", "scope", "project", "job", "channel", "repeat_hours", "created_at"]
    list_filter = ["scope"]
    list_select_related = ["user", "project", "job", "channel"]


@admin.register(Outbox)
class OutboxAdmin(ReadOnlyAdmin):
    list_display = ["event", "part", "subject", "channel", "status", "attempts", "created_at"]
    list_filter = ["status", "event", "part"]
    list_select_related = ["channel"]


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ["at", "channel", "event", "status", "http_status", "platform_code"]
    list_filter = ["status"]
    list_select_related = ["channel"]
