"""Tags every page uses: status badges that carry text and an icon, and times with their age."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from console.web import age_words
from jobs import messages
from jobs.access import is_operator
from jobs.diagnostics import worker_reason as reason_for_reader
from jobs.records import recorded_by

register = template.Library()

# Icon and tone per status value; the text is always shown beside the icon (never colour alone).
BADGES: dict[str, tuple[str, str]] = {
    "Pending": ("◷", "wait"),
    "Running": ("▶", "run"),
    "Succeeded": ("✔", "ok"),
    "Failed": ("✖", "bad"),
    "Stopped": ("■", "off"),
    "Online": ("●", "ok"),
    "Offline": ("○", "bad"),
    "Installing": ("◔", "wait"),
    "Upgrading": ("↻", "wait"),
    "Ready": ("✔", "ok"),
    "Unknown": ("?", "warn"),
    "Reachable": ("●", "ok"),
    "Unreachable": ("○", "bad"),
    # Workload states (jobs.choices.WorkloadState); Succeeded and Failed share the Job's.
    "Silent": ("…", "off"),
    "Starting": ("◔", "wait"),
    "Progressing": ("↗", "run"),
    "Stalled": ("‖", "warn"),
    "Unresponsive": ("⚠", "bad"),
    "Degraded": ("◑", "warn"),
    "Lost": ("?", "bad"),
    # Drains and their pods (jobs.choices.DrainState, DrainPodStatus): API values, lower case.
    "running": ("▶", "run"),
    "drained": ("✔", "ok"),
    "partly_drained": ("◑", "warn"),
    "failed": ("✖", "bad"),
    "stopped": ("■", "off"),
    "pending": ("◷", "wait"),
    "evicting": ("↻", "wait"),
    "blocked": ("⊘", "warn"),
    "evicted": ("✔", "ok"),
    "skipped": ("–", "off"),
}


@register.simple_tag
def badge(value: str, label: str = "") -> str:
    """A status badge: icon + text; the tone colour is decoration only."""
    icon, tone = BADGES.get(str(value), ("•", "off"))
    return format_html(
        '<span class="badge tone-{}" data-status="{}"><span aria-hidden="true">{}</span> {}</span>',
        tone,
        value,
        icon,
        label or _(str(value)),
    )


@register.filter
def parse_time(value: str | None) -> datetime | None:
    """An ISO time kept in a JSON field (a workload message's `at`) as a datetime."""
    return parse_datetime(value) if value else None


@register.filter
def who(user: Any) -> str:
    """The user an Operation names, or the console itself when a policy acted (no user)."""
    return recorded_by(user)


@register.filter
def message(stored: str, diagnostics: bool = False) -> SafeString:
    """A stored message in the reader's language; Kubernetes' own text verbatim and marked.
    `|message:diagnostics` for a reader who may see diagnostics (jobs.diagnostics); without
    it, a message that carries them reads as its meaning."""
    return messages.render_html(stored or "", bool(diagnostics))


@register.filter
def message_text(stored: str, diagnostics: bool = False) -> str:
    """The same as plain text, for attributes and SVG titles."""
    return messages.render_text(stored or "", bool(diagnostics))


@register.simple_tag
def worker_reason(worker: Any, diagnostics: bool) -> str:
    """A Worker row's reason as its reader sees it (jobs.diagnostics.worker_reason)."""
    return reason_for_reader(worker.reason, worker.message, bool(diagnostics))


@register.simple_tag
def when(moment: datetime | None, now: datetime | None = None) -> str:
    """An absolute time in the user's zone with its age, and UTC on hover; "never" if missing."""
    if moment is None:
        return format_html('<span class="muted">{}</span>', _("never"))
    now = now or timezone.now()
    local = timezone.localtime(moment)
    utc = moment.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{} UTC">{} <span class="age">({})</span></time>',
        utc.isoformat(),
        utc.strftime("%Y-%m-%d %H:%M:%S"),
        local.strftime("%Y-%m-%d %H:%M:%S"),
        age_words(moment, now),
    )


@register.filter
def operator(user: Any) -> bool:
    """`{% if user|operator %}`: the one rule of jobs.access, for links only operators follow."""
    return is_operator(user)
