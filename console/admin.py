"""Admin for operators: synced fields are read-only, lists filter by phase and cluster."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from console.kube.kubeconfig import KubeconfigRejected, validate_kubeconfig
from console.models import Addon, ApiToken, Cluster, Membership, Node, Project
from jobs.admin import WordedMessage


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    """Operators also manage projects on the console's projects pages (console.views.projects)."""

    list_display = ["name", "created_at"]
    search_fields = ["name"]
    filter_horizontal = ["clusters"]
    inlines = [MembershipInline]


class ClusterForm(forms.ModelForm):
    """Refuses, at entry, a kubeconfig that could run code or read files on the console's host."""

    class Meta:
        model = Cluster
        fields = ("name", "kubeconfig", "context", "namespace")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if "kubeconfig" in self.fields and cleaned.get("kubeconfig"):
            try:
                validate_kubeconfig(cleaned["kubeconfig"], cleaned.get("context", ""))
            except KubeconfigRejected as rejected:
                self.add_error("kubeconfig", str(rejected))
        return cleaned


@admin.register(Cluster)
class ClusterAdmin(WordedMessage, admin.ModelAdmin):
    """The kubeconfig is entered when the cluster is added (or with `add_cluster`, which also
    replaces it) and is never shown back."""

    form = ClusterForm
    list_display = ["name", "reachable", "last_synced_at", "last_attempt_at", "worded_message"]
    list_filter = ["reachable"]
    search_fields = ["name"]
    readonly_fields = [
        "reachable", "worded_message", "last_synced_at", "last_attempt_at", "created_at",
    ]  # fmt: skip

    def get_fields(self, request: HttpRequest, obj: Cluster | None = None) -> tuple[str, ...]:
        fields = ("name", "context", "namespace", *self.readonly_fields)
        return fields if obj else ("kubeconfig", *fields)


@admin.register(Node)
class NodeAdmin(WordedMessage, admin.ModelAdmin):
    list_display = ["name", "cluster", "phase", "unschedulable", "gpu_capacity", "observed_at"]
    list_filter = ["phase", "unschedulable", "cluster"]
    list_select_related = ["cluster"]
    search_fields = ["name"]
    exclude = ["message"]
    readonly_fields = [
        *(field.name for field in Node._meta.fields if field.name != "message"),
        "worded_message",
    ]


@admin.register(Addon)
class AddonAdmin(WordedMessage, admin.ModelAdmin):
    list_display = ["name", "cluster", "phase", "desired_version", "current_version", "observed_at"]
    list_filter = ["phase", "cluster"]
    list_select_related = ["cluster"]
    search_fields = ["name"]
    exclude = ["message"]
    readonly_fields = [
        "cluster",
        "name",
        "namespace",
        "workload_kind",
        "current_version",
        "phase",
        "worded_message",
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
