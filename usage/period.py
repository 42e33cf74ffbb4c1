"""The period and grouping of a usage report, read from a request's parameters (the API's
`from`/`to`, the page's `period`), with a message naming each bad field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from django.db import models
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from usage.report import GroupBy


class Period(models.TextChoices):
    DAY = "day", gettext_lazy("Last 24 hours")
    WEEK = "week", gettext_lazy("Last 7 days")
    MONTH = "month", gettext_lazy("Last 30 days")
    CUSTOM = "custom", gettext_lazy("Custom")


LENGTHS = {Period.DAY: timedelta(days=1), Period.WEEK: timedelta(days=7),
           Period.MONTH: timedelta(days=30)}  # fmt: skip


class ReportInvalid(Exception):
    """Bad parameters: {field: message}."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__(errors)
        self.errors = errors


@dataclass(frozen=True)
class Asked:
    start: datetime
    end: datetime
    group_by: GroupBy
    project: str
    cluster: str
    period: Period


def moment(text: str, name: str, errors: dict[str, str]) -> datetime | None:
    """ISO 8601: a date-time (UTC when it names no offset) or a date (its midnight, UTC)."""
    try:
        value = parse_datetime(text)
        if value is None and (day := parse_date(text)) is not None:
            value = datetime.combine(day, time.min)
    except ValueError:
        value = None
    if value is None:
        errors[name] = _("%(value)r is not an ISO 8601 date or time.") % {"value": text}
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def asked(params: Mapping[str, str], now: datetime, default: Period = Period.WEEK) -> Asked:
    """The report a request asks for. `from`/`to` make the period custom; without them the
    named `period` (default a week) ends now."""
    errors: dict[str, str] = {}
    period = params.get("period") or (Period.CUSTOM if params.get("from") else default)
    if period not in Period.values:
        errors["period"] = _("Choose one of: %(choices)s.") % {"choices": ", ".join(Period.values)}
        period = default
    group_by = params.get("group_by") or GroupBy.PROJECT
    if group_by not in GroupBy.values:
        errors["group_by"] = _("Choose one of: %(choices)s.") % {
            "choices": ", ".join(GroupBy.values)
        }
        group_by = GroupBy.PROJECT
    end = moment(params["to"], "to", errors) if params.get("to") else now
    if Period(period) == Period.CUSTOM:
        start = moment(params.get("from", ""), "from", errors) if params.get("from") else None
        if start is None and "from" not in errors:
            errors["from"] = _("Give the start of the period.")
    else:
        start = (end or now) - LENGTHS[Period(period)]
    if start and end and start >= end:
        errors["to"] = _("The end must come after the start.")
    if errors or start is None or end is None:
        raise ReportInvalid(errors)
    return Asked(start, end, GroupBy(group_by), params.get("project", ""),
                 params.get("cluster", ""), Period(period))  # fmt: skip
