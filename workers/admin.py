from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from jobs.admin import WordedMessage
from workers.models import PodInstance, Worker


class SyncedAdmin(admin.ModelAdmin):
    """Everything here is what a cluster reported: operators read it, nobody edits it."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Worker)
class WorkerAdmin(WordedMessage, SyncedAdmin):
    list_display = [
        "pod_name",
        "task",
        "node_name",
        "ip",
        "phase",
        "restart_count",
        "last_reported_at",
    ]
    list_filter = ["phase", "task__job__cluster"]
    list_select_related = ["task__job"]
    search_fields = ["pod_name", "node_name", "ip"]
    exclude = ["message"]
    readonly_fields = ["worded_message"]


@admin.register(PodInstance)
class PodInstanceAdmin(SyncedAdmin):
    list_display = [
        "pod_name",
        "uid",
        "node_name",
        "ip",
        "phase",
        "restart_count",
        "last_exit_code",
        "termination_reason",
        "first_seen_at",
        "last_seen_at",
    ]
    list_filter = ["phase", "termination_reason", "task__job__cluster"]
    list_select_related = ["task__job"]
    search_fields = ["pod_name", "uid", "node_name", "ip"]
