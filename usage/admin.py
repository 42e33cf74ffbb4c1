"""The ledger for operators: read-only, as the engine and signal intake write it."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from usage.models import GpuInterval, UsageHour


class ReadOnly(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(GpuInterval)
class GpuIntervalAdmin(ReadOnly):
    list_display = ["pod_name", "job", "run", "usage_class", "gpus", "started_at", "ended_at"]
    list_filter = ["usage_class", "cluster"]
    list_select_related = ["job"]
    search_fields = ["pod_name", "pod_uid", "job__name"]


@admin.register(UsageHour)
class UsageHourAdmin(ReadOnly):
    list_display = ["hour", "job_name", "run", "usage_class", "gpu_seconds", "wasted_gpu_seconds"]
    list_filter = ["usage_class", "cluster_name"]
    search_fields = ["job_name", "project_name", "username"]
