"""The audit trail page, for operators: filter by who, action, result and date (UTC), page
through it, or export what the filter selects as CSV."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _

from console.models import AuditEvent
from jobs.access import is_operator

PAGE_SIZE = 50
CSV_FIELDS = ("at", "actor_name", "action", "target", "result", "detail", "ip", "user_agent")
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class AuditFilter(forms.Form):
    who = forms.CharField(label=_("Who"), required=False, max_length=150)
    action = forms.ChoiceField(
        label=_("Action"), required=False, choices=[("", _("any")), *AuditEvent.Action.choices]
    )
    result = forms.ChoiceField(
        label=_("Result"), required=False, choices=[("", _("any")), *AuditEvent.Result.choices]
    )
    since = forms.DateField(label=_("From (UTC)"), required=False)
    until = forms.DateField(label=_("To (UTC, inclusive)"), required=False)

    def events(self) -> QuerySet[AuditEvent]:
        events = AuditEvent.objects.all()
        data = self.cleaned_data if self.is_valid() else {}
        if data.get("who"):
            events = events.filter(actor_name=data["who"])
        for field in ("action", "result"):
            if data.get(field):
                events = events.filter(**{field: data[field]})
        if data.get("since"):
            events = events.filter(at__gte=datetime.combine(data["since"], time(), UTC))
        if data.get("until"):
            end = datetime.combine(data["until"] + timedelta(days=1), time(), UTC)
            events = events.filter(at__lt=end)
        return events


def _cell(value: Any) -> str:
    text = value.isoformat() if isinstance(value, datetime) else str(value or "")
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv(events: QuerySet[AuditEvent]) -> StreamingHttpResponse:
    writer = csv.writer(_Echo())

    def rows() -> Iterator[str]:
        yield writer.writerow(CSV_FIELDS)
        for row in events.values_list(*CSV_FIELDS).iterator(chunk_size=2000):
            yield writer.writerow([_cell(value) for value in row])

    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="trainyard-audit.csv"'
    return response


@login_required
def audit_list(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    if not is_operator(request.user):
        raise PermissionDenied("The audit trail is for operators.")
    form = AuditFilter(request.GET or None)
    events = form.events()
    if request.GET.get("format") == "csv":
        return _csv(events)
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": form, "page": page, "query": query.urlencode()}
    return render(request, "console/audit.html", context)
