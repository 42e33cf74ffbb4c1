"""Admin for operators. Statuses come from the clusters: they are read-only here, and changes
to Jobs go through the console's operations (audited), not through this admin.

Deleting a Job or Workflow row here would leave its workloads running on the cluster, so the
admin's own delete is off: Jobs are deleted with the action "Delete through the console", which
is the console's delete (jobs.operations.delete_job: audited, reconcile removes the workloads,
then the row). A Workflow is a record of its Jobs and has no delete of its own."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from jobs.messages import render_html
from jobs.models import Job, Operation, Task, Workflow, WorkflowEdge
from jobs.operations import OperationRefused, delete_job


class WordedMessage:
    """Shows a stored message worded in the operator's language (jobs.messages), not its
    stored form: list `"worded_message"` where `"message"` was, and exclude `message`. With
    its diagnostics: the admin shows the stored facts (restart counts, exit codes) anyway."""

    @admin.display(description=_("message"))
    def worded_message(self, obj: Any) -> SafeString:
        return render_html(obj.message, diagnostics=True)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.action(description=_("Delete through the console (removes the workloads first)"))
def delete_through_console(modeladmin: Any, request: HttpRequest, queryset: Any) -> None:
    for job in queryset.select_related("project").filter(delete_requested_at__isnull=True):
        try:
            delete_job(request.user, job, job.name)
        except OperationRefused as refused:
            modeladmin.message_user(request, f"{job.name}: {refused.message}", messages.WARNING)


class TaskInline(WordedMessage, admin.TabularInline):
    model = Task
    extra = 0
    fields = readonly_fields = (
        "role",
        "kind",
        "desired_replicas",
        "ready_replicas",
        "phase",
        "worded_message",
        "observed_at",
    )
    can_delete = False


@admin.register(Job)
class JobAdmin(WordedMessage, ReadOnlyAdmin):
    list_display = [
        "name",
        "project",
        "cluster",
        "phase",
        "stopped",
        "owner",
        "created_at",
        "observed_at",
    ]
    list_filter = ["phase", "stopped", "cluster", "project"]
    list_select_related = ["project", "cluster", "owner"]
    search_fields = ["name", "message"]
    date_hierarchy = "created_at"
    inlines = [TaskInline]
    actions = [delete_through_console]
    exclude = ["message"]
    readonly_fields = ["worded_message"]


@admin.register(Task)
class TaskAdmin(WordedMessage, ReadOnlyAdmin):
    list_display = ["__str__", "kind", "phase", "desired_replicas", "ready_replicas", "observed_at"]
    list_filter = ["phase", "kind", "job__cluster"]
    list_select_related = ["job"]
    search_fields = ["job__name", "role"]
    exclude = ["message"]
    readonly_fields = ["worded_message"]


class EdgeInline(admin.TabularInline):
    model = WorkflowEdge
    fk_name = "workflow"
    extra = 0
    readonly_fields = ["upstream", "downstream"]
    can_delete = False


@admin.register(Workflow)
class WorkflowAdmin(WordedMessage, ReadOnlyAdmin):
    list_display = ["name", "project", "phase", "owner", "created_at"]
    list_filter = ["phase", "project"]
    list_select_related = ["project", "owner"]
    search_fields = ["name"]
    inlines = [EdgeInline]
    exclude = ["message"]
    readonly_fields = ["worded_message"]


@admin.register(Operation)
class OperationAdmin(WordedMessage, ReadOnlyAdmin):
    """The audit trail: nobody edits or deletes it here."""

    list_display = ["requested_at", "user", "action", "job_name", "result", "worded_message"]
    list_filter = ["action", "result", "project"]
    list_select_related = ["user"]
    search_fields = ["job_name", "user__username", "message"]
    date_hierarchy = "requested_at"
    exclude = ["message"]
    readonly_fields = ["worded_message"]

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
