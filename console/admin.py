"""Admin for operators: synced fields are read-only, lists filter by phase and cluster."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from console.models import Addon, ApiToken, Cluster, Membership, Node, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    """The kubeconfig can be replaced here but is never shown back."""

    list_display = ["name", "reachable", "last_synced_at", "last_attempt_at", "message"]
    list_filter = ["reachable"]
    search_fields = ["name"]
    readonly_fields = ["reachable", "message", "last_synced_at", "last_attempt_at", "created_at"]

    def get_fields(self, request: HttpRequest, obj: Cluster | None = None) -> tuple[str, ...]:
        fields = ("name", "context", "namespace", *self.readonly_fields)
        return fields if obj else ("kubeconfig", *fields)


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "phase", "unschedulable", "gpu_capacity", "observed_at"]
    list_filter = ["phase", "unschedulable", "cluster"]
    list_select_related = ["cluster"]
    search_fields = ["name"]
    readonly_fields = [field.name for field in Node._meta.fields]


@admin.register(Addon)
class AddonAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "phase", "desired_version", "current_version", "observed_at"]
    list_filter = ["phase", "cluster"]
    list_select_related = ["cluster"]
    search_fields = ["name"]
    readonly_fields = [
        "cluster",
        "name",
        "namespace",
        "workload_kind",
        "current_version",
        "phase",
        "message",
        "observed_at",
    ]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are issued with `manage.py issue_token`; only their hashes exist here."""

    list_display = ["user", "name", "created_at", "last_used_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "name"]
    fields = readonly_fields = ("user", "name", "created_at", "last_used_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
