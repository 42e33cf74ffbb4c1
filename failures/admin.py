"""Admin for operators (issue 34): their own failure signatures, each RE2 pattern checked when it
is saved and tried on a pasted log (the test box: the lines it matches are shown after saving;
a new signature starts disabled, so a pattern is tried before it judges any run, then enabled);
the kept logs and the findings read-only, as the engine wrote them. Kept logs are diagnostics,
so each page here is for operators (jobs.access.is_operator) who are also staff. A kept log
is read here too, shown or downloaded (audited): the only way to one whose Job was deleted
(TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS keeps it without a Job page)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from console import audit
from failures import store
from failures.models import Finding, KeptLog, Signature
from jobs.access import is_operator
from jobs.admin import ReadOnlyAdmin
from jobs.status.failure import compile_pattern, matching_lines


class OperatorsOnly:
    """For operators (the role, not model permissions: jobs.access.is_operator), on the admin
    site that is for staff; hidden from staff who are not operators."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_operator(request.user)

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return is_operator(request.user)


class SignatureForm(forms.ModelForm):  # type: ignore[type-arg]
    sample = forms.CharField(
        label=_("Test on a log"), required=False, widget=forms.Textarea(attrs={"rows": 8}),
        help_text=_("Paste log lines: after saving, the lines the pattern matches are shown "
                    "(at most 20). Nothing pasted here is stored. Save it disabled to try a "
                    "pattern before it judges any run."),
    )  # fmt: skip

    class Meta:
        model = Signature
        fields = [
            "code", "label", "label_zh", "failure_class", "pattern", "advice", "advice_zh",
            "consequence", "enabled",
        ]  # fmt: skip

    def clean_pattern(self) -> str:
        return checked_pattern(self.cleaned_data["pattern"])


def checked_pattern(pattern: str) -> str:
    """The pattern, or a ValidationError saying why RE2 refuses it."""
    try:
        compile_pattern(pattern)
    except ValueError as error:
        raise forms.ValidationError(
            _("Not a valid RE2 pattern (no backreferences or lookaround): %(error)s"),
            params={"error": error},
        ) from None
    return pattern


class TryForm(forms.Form):
    """A pattern tried on a pasted log, nothing saved (the admin's "Try a pattern" page)."""

    pattern = forms.CharField(label=_("pattern"), widget=forms.Textarea(attrs={"rows": 2}))
    sample = forms.CharField(label=_("Test on a log"), widget=forms.Textarea(attrs={"rows": 12}))

    def clean_pattern(self) -> str:
        return checked_pattern(self.cleaned_data["pattern"])


@admin.register(Signature)
class SignatureAdmin(OperatorsOnly, admin.ModelAdmin):  # type: ignore[type-arg]
    form = SignatureForm
    list_display = [
        "code", "label", "failure_class", "consequence", "enabled", "valid", "created_by",
    ]  # fmt: skip
    list_filter = ["failure_class", "enabled", "consequence"]
    search_fields = ["code", "label", "pattern"]
    list_select_related = ["created_by"]
    readonly_fields = ["created_by", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return is_operator(request.user)

    def get_urls(self) -> list[URLPattern]:
        tried = path("try/", self.admin_site.admin_view(self.try_pattern),
                     name="failures_signature_try")  # fmt: skip
        return [tried, *super().get_urls()]

    def try_pattern(self, request: HttpRequest) -> TemplateResponse:
        """A pattern tried on a pasted log before any signature is saved: nothing is stored."""
        if not is_operator(request.user):
            raise PermissionDenied
        form = TryForm(request.POST or None)
        lines = None
        if form.is_valid():
            lines = matching_lines(form.cleaned_data["pattern"], form.cleaned_data["sample"])
        context = {
            **self.admin_site.each_context(request), "title": gettext("Try a pattern"),
            "opts": self.model._meta, "form": form, "lines": lines,
        }  # fmt: skip
        return TemplateResponse(request, "admin/failures/signature/try.html", context)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """A new signature starts disabled: tried on a pasted log first, enabled after."""
        return {**super().get_changeform_initial_data(request), "enabled": False}

    @admin.display(description=_("valid"), boolean=True)
    def valid(self, obj: Signature) -> bool:
        """False for a pattern RE2 refuses now (stored before a check): judgements leave it out
        (jobs.status.failure.Judge)."""
        try:
            compile_pattern(obj.pattern)
        except ValueError:
            return False
        return True

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return is_operator(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return is_operator(request.user)

    def save_model(self, request: HttpRequest, obj: Signature, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user  # type: ignore[assignment]
        super().save_model(request, obj, form, change)
        sample = form.cleaned_data.get("sample", "")
        if sample:
            self._show_matches(request, obj.pattern, sample)

    def _show_matches(self, request: HttpRequest, pattern: str, sample: str) -> None:
        lines = matching_lines(pattern, sample)
        if not lines:
            self.message_user(request, gettext("The pattern matches no line of the log pasted."),
                              messages.WARNING)  # fmt: skip
            return
        words = gettext("The pattern matches these lines of the log pasted:")
        shown = format_html("{}<pre>{}</pre>", words, "\n".join(lines))
        self.message_user(request, shown, messages.INFO)


@admin.register(KeptLog)
class KeptLogAdmin(OperatorsOnly, ReadOnlyAdmin):
    list_display = [
        "pod_name", "container", "attempt", "job_name", "run", "why", "kept_at", "lines",
        "stored_bytes", "cut", "delete_after",
    ]  # fmt: skip
    list_filter = ["why", "cut", "project"]
    search_fields = ["job_name", "pod_name", "pod_uid"]
    list_select_related = ["project", "job"]
    date_hierarchy = "kept_at"
    readonly_fields = ["text"]

    @admin.display(description=_("log"))
    def text(self, kept: KeptLog) -> str:
        where = reverse("admin:failures_keptlog_text", args=[kept.pk])
        return format_html('<a href="{}">{}</a> · <a href="{}?download=1">{}</a>', where,
                           gettext("Read"), where, gettext("Download"))  # fmt: skip

    def get_urls(self) -> list[URLPattern]:
        read = self.admin_site.admin_view(self.read_text)
        mine = [path("<int:pk>/text/", read, name="failures_keptlog_text")]
        return mine + super().get_urls()

    def read_text(self, request: HttpRequest, pk: int) -> HttpResponse:
        """The kept text as stored, shown or (`download=1`) as an attachment, for operators
        only; each read is in the audit trail, naming the log."""
        if not is_operator(request.user):
            raise Http404
        kept = get_object_or_404(KeptLog, pk=pk)
        download = request.GET.get("download") == "1"
        target = f"{kept.job_name}/{kept.pod_name}/{kept.container}#{kept.attempt}"
        audit.record(audit.Action.KEPT_LOG_READ, request=request, target=target,
                     detail=f"kept log {kept.pk}{', downloaded' if download else ''}")  # fmt: skip
        response = HttpResponse(store.read(kept), content_type="text/plain; charset=utf-8")
        response["X-Content-Type-Options"] = "nosniff"
        if download:
            name = f"{kept.job_name}-{kept.pod_name}-{kept.container}-{kept.attempt}.log"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


@admin.register(Finding)
class FindingAdmin(OperatorsOnly, ReadOnlyAdmin):
    list_display = ["job", "run", "label", "failure_class", "pod_name", "attempt", "at",
                    "consequence", "judged_at"]  # fmt: skip
    list_filter = ["failure_class", "consequence", "job__project", "job__cluster"]
    search_fields = ["job__name", "label", "first_error", "pod_name"]
    list_select_related = ["job", "kept_log"]
