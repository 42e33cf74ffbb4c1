"""Admin for operators: synced fields are read-only, lists filter by phase and cluster."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from console.kube.kubeconfig import (
    KubeconfigRejected,
    read_kubeconfig_file,
    validate_kubeconfig,
)
from console.models import Addon, ApiToken, Cluster, Membership, Node, Project
from jobs.admin import WordedMessage


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


class ClusterForm(forms.ModelForm):
    """Refuses, at entry, a kubeconfig that could run code or read files on the console's host,
    skips TLS verification without the insecure flag, or goes through a proxy. The content is
    entered (then stored encrypted) or referenced by a file path; neither is shown back."""

    kubeconfig = forms.CharField(
        label=_("kubeconfig"),
        required=False,
        widget=forms.Textarea,
        help_text=_("Stored encrypted, never shown back. Leave empty to keep the stored one."),
    )

    class Meta:
        model = Cluster
        fields = ("name", "kubeconfig_path", "insecure", "context", "namespace")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        field, text = self._kubeconfig_text(cleaned)
        if text is not None:
            try:
                validate_kubeconfig(
                    text, cleaned.get("context", ""), insecure=cleaned.get("insecure", False)
                )
            except KubeconfigRejected as rejected:
                self.add_error(field, str(rejected))
        return cleaned

    def _kubeconfig_text(self, cleaned: dict[str, Any]) -> tuple[str, str | None]:
        """The field to blame and the text to check: the one pasted, the file named, or (on a
        change of other fields) the one stored; None when an error is already recorded."""
        if cleaned.get("kubeconfig") and cleaned.get("kubeconfig_path"):
            self.add_error("kubeconfig", _("Paste a kubeconfig or give its file, not both."))
            return "kubeconfig", None
        try:
            if cleaned.get("kubeconfig"):
                return "kubeconfig", cleaned["kubeconfig"]
            if cleaned.get("kubeconfig_path"):
                return "kubeconfig_path", read_kubeconfig_file(cleaned["kubeconfig_path"])
            if self.instance.pk:
                stored = Cluster.objects.get(pk=self.instance.pk)
                stored.insecure = True  # the flag is checked against the form's value
                return "insecure", stored.kubeconfig
        except KubeconfigRejected as rejected:
            self.add_error("kubeconfig_path", str(rejected))
            return "kubeconfig_path", None
        self.add_error("kubeconfig", _("Paste a kubeconfig or give the path of its file."))
        return "kubeconfig", None

    def save(self, commit: bool = True) -> Cluster:
        cluster: Cluster = super().save(commit=False)
        if self.cleaned_data.get("kubeconfig"):
            cluster.kubeconfig = self.cleaned_data["kubeconfig"]
        elif self.cleaned_data.get("kubeconfig_path"):
            cluster.kubeconfig = ""  # the file is the one source
        if commit:
            cluster.save()
        return cluster


@admin.register(Cluster)
class ClusterAdmin(WordedMessage, admin.ModelAdmin):
    """The kubeconfig is entered when the cluster is added (or with `add_cluster`, which also
    replaces it), stored encrypted and never shown back; it may instead be a file path."""

    form = ClusterForm
    list_display = [
        "name", "reachable", "insecure", "last_synced_at", "last_attempt_at", "worded_message",
    ]  # fmt: skip
    list_filter = ["reachable", "insecure"]
    search_fields = ["name"]
    readonly_fields = [
        "reachable", "worded_message", "last_synced_at", "last_attempt_at", "created_at",
    ]  # fmt: skip

    def get_fields(self, request: HttpRequest, obj: Cluster | None = None) -> tuple[str, ...]:
        return (
            "name", "kubeconfig", "kubeconfig_path", "insecure", "context", "namespace",
            *self.readonly_fields,
        )  # fmt: skip


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
