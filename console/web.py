"""What every page shares: the htmx request type, live refresh without waste, and ages in words.

A polled fragment carries a version, a digest of what it shows; a poll that sends back the version
of what it would render anyway is answered 204 and htmx swaps nothing (STYLE: polling that idles).
The version holds the reader's language (the same facts read differently in another one) and,
for a fragment whose template words ages from the clock, the age step: those words move with
time, not with the facts. The times every sync confirms (observed at, last sync, last reported
at: a row's time or the cluster's last sync, the later) are not among the facts: they move with
every cycle while nothing else did, and the age step refreshes them with the ages. A view
computes its version before the rest of its context where it can, so that an unchanged poll
costs only the reads its version needs.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.http import HttpRequest, HttpResponse
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext as _
from django_htmx.middleware import HtmxDetails

# How often a live fragment asks for news.
POLL_SECONDS = 5
# A fragment that words ages re-renders at least this often: its ages may be half a minute old.
AGE_STEP_SECONDS = 30


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (for type checking)."""

    htmx: HtmxDetails


def fragment_version(*facts: object) -> str:
    """A short digest of the facts a fragment shows.

    Facts must be plain values (no lazy translations or model instances: their repr is not stable).
    """
    return hashlib.blake2b(repr(facts).encode(), digest_size=8).hexdigest()


def age_step(now: datetime) -> int:
    """The number of the AGE_STEP_SECONDS period `now` falls in."""
    return int(now.timestamp()) // AGE_STEP_SECONDS


def poll_version(request: HtmxHttpRequest, *facts: object, now: datetime | None = None) -> str:
    """The version a polled fragment sends back as `v`: its facts and the reader's language, and
    with `now` the age step, for a fragment that words ages in its template (the `when` tag).
    A fragment whose facts already hold its worded ages (the dashboard) passes no `now`."""
    step = None if now is None else age_step(now)
    return fragment_version(*facts, request.LANGUAGE_CODE, step)


def not_modified(request: HtmxHttpRequest, version: str) -> HttpResponse | None:
    """204 for a poll that already shows this version; None when the view must render.

    A view ends `return not_modified(request, version) or render(...)`.
    """
    if request.htmx and request.GET.get("v") == version:
        return HttpResponse(status=204)
    return None


def age_words(moment: datetime, now: datetime) -> str:
    """ "just now", "under a minute ago", "3 minutes ago": the age beside an absolute time (the
    `when` tag). Coarse on purpose: a refreshed fragment may be an age step old, and the absolute
    time beside the age is the fact. A time to come (a token's expiry) reads "in 3 days"."""
    seconds = (now - moment).total_seconds()
    if seconds <= -60:
        return _("in %(age)s") % {"age": timeuntil(moment, now, depth=1)}
    if seconds < 10:
        return _("just now")
    if seconds < 60:
        return _("under a minute ago")
    return _("%(age)s ago") % {"age": timesince(moment, now, depth=1)}


def age_words_in_steps(moment: datetime | None, now: datetime) -> str:
    """ "under 10 s ago", "40 s ago", "4 min ago", "3 h ago", "2 d ago"; "never" without a moment.

    For an age shown alone, with no absolute time beside it (the dashboard). Seconds go in steps
    of 10 (a sync runs every few seconds): the words change, and a polling fragment whose facts
    hold them re-renders, only when the age has really moved on.
    """
    if moment is None:
        return _("never")
    seconds = max(int((now - moment).total_seconds()), 0)
    if seconds < 10:
        return _("under 10 s ago")
    if seconds < 120:
        return _("%(count)d s ago") % {"count": seconds // 10 * 10}
    if seconds < 7200:
        return _("%(count)d min ago") % {"count": seconds // 60}
    if seconds < 172800:
        return _("%(count)d h ago") % {"count": seconds // 3600}
    return _("%(count)d d ago") % {"count": seconds // 86400}


def duration_words(start: datetime, now: datetime) -> str:
    """ "2 hours" since `start`, for an Age column; under a minute says so ("0 minutes" would
    read as a bug)."""
    if (now - start).total_seconds() < 60:
        return _("under a minute")
    return timesince(start, now, depth=1)
