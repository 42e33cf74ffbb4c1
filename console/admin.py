"""Admin for operators: synced fields are read-only, lists filter by phase and cluster."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from console import audit, tokens
from console.kubeconfig import (
    KubeconfigRejected,
    check_plain_http,
    read_kubeconfig_file,
    validate_kubeconfig,
)
from console.models import Addon, ApiToken, AuditEvent, Cluster, Membership, Node, Project
from console.projects import record_clusters
from jobs.admin import WordedMessage


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


def _changed(form: forms.ModelForm) -> str:
    """Which fields changed, by name only: never their values (a kubeconfig is one)."""
    return "changed: " + ", ".join(form.changed_data) if form.changed_data else ""


class AuditedAdmin(admin.ModelAdmin):
    """Creates, changes (which fields, never their values) and deletes made in the admin go to
    the audit trail, as `<noun> <name>`; a bulk delete is recorded object by object."""

    noun = ""
    create_action: audit.Action
    change_action: audit.Action
    delete_action: audit.Action

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        action = self.change_action if change else self.create_action
        target = f"{self.noun} {obj.name}"
        audit.record(action, request=request, target=target, detail=_changed(form))

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        audit.record(self.delete_action, request=request, target=f"{self.noun} {obj.name}")
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(Project)
class ProjectAdmin(AuditedAdmin):
    """Operators also manage projects on the console's projects pages (console.views.projects).
    A project that still has Jobs or Workflows cannot be deleted here: deleting its rows would
    leave their workloads running on the clusters. Delete its Jobs on the console first (each
    delete removes the workloads), then the project."""

    list_display = ["name", "stop_when_idle_minutes", "created_at"]
    search_fields = ["name"]
    filter_horizontal = ["clusters"]
    inlines = [MembershipInline]

    def has_delete_permission(self, request: HttpRequest, obj: Project | None = None) -> bool:
        if obj is not None and (obj.jobs.exists() or obj.workflows.exists()):
            return False
        return super().has_delete_permission(request, obj)

    noun = "project"
    create_action = audit.Action.PROJECT_CREATE
    change_action = audit.Action.PROJECT_CHANGE
    delete_action = audit.Action.PROJECT_DELETE

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        if "clusters" in form.changed_data:
            record_clusters(form.instance, request=request)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        for membership in formset.deleted_objects:
            _membership(request, audit.Action.MEMBERSHIP_REMOVE, membership)
        for membership in formset.new_objects:
            _membership(request, audit.Action.MEMBERSHIP_ADD, membership)
        for membership, _fields in formset.changed_objects:
            _membership(request, audit.Action.MEMBERSHIP_CHANGE, membership)


def _membership(request: HttpRequest, action: audit.Action, membership: Membership) -> None:
    target = f"{membership.user} in project {membership.project}"
    audit.record(action, request=request, target=target, detail=f"role: {membership.role}")


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
        fields = ("name", "kubeconfig_path", "insecure", "context", "namespace", "prometheus_url")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        field, text = self._kubeconfig_text(cleaned)
        if text is not None:
            try:
                context, insecure = cleaned.get("context", ""), cleaned.get("insecure", False)
                validate_kubeconfig(text, context, insecure=insecure)
                check_plain_http(text, context, insecure)
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
class ClusterAdmin(WordedMessage, AuditedAdmin):
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

    noun = "cluster"
    create_action = audit.Action.CLUSTER_CREATE
    change_action = audit.Action.CLUSTER_CHANGE
    delete_action = audit.Action.CLUSTER_DELETE

    def get_fields(self, request: HttpRequest, obj: Cluster | None = None) -> tuple[str, ...]:
        return (
            "name", "kubeconfig", "kubeconfig_path", "insecure", "context", "namespace",
            "prometheus_url", *self.readonly_fields,
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

    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        tokens.revoke(obj, "revoked in the admin", request=request)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for token in queryset.select_related("user"):
            tokens.revoke(token, "revoked in the admin", request=request)


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The audit trail, read-only: nobody adds, changes or deletes an entry."""

    list_display = ["at", "actor_name", "action", "target", "result", "ip"]
    list_filter = ["action", "result"]
    search_fields = ["actor_name", "target", "detail", "ip"]
    date_hierarchy = "at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
