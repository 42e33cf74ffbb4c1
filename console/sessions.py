"""Session timeouts: idle (TRAINYARD_SESSION_IDLE_TIMEOUT, 8 h by default) and absolute
(TRAINYARD_SESSION_MAX_AGE, 7 days). A request a person makes renews the idle timer; background
polling does not (console.js marks the requests of `data-poll` elements with POLL_HEADER), or an
open dashboard would keep a session alive forever.

An htmx request whose session has ended gets HX-Redirect to the login page, so that the whole
page goes there instead of a fragment swapping the login form in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import user_logged_in
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django_htmx.http import HttpResponseClientRedirect

from console import audit

POLL_HEADER = "X-Trainyard-Poll"
STARTED, ACTIVE = "trainyard_started_at", "trainyard_active_at"
# Activity is written to the session at most this often (seconds): not one write per click.
RENEW_EVERY = 60


def is_poll(request: HttpRequest) -> bool:
    return request.headers.get(POLL_HEADER) == "1"


def _expired(request: HttpRequest, now: float) -> bool:
    """A session from before these rules starts being counted now."""
    session = request.session
    if STARTED not in session or ACTIVE not in session:
        session[STARTED] = session[ACTIVE] = now
        return False
    too_old = now - session[STARTED] > settings.TRAINYARD_SESSION_MAX_AGE
    return too_old or now - session[ACTIVE] > settings.TRAINYARD_SESSION_IDLE_TIMEOUT


def _note_activity(request: HttpRequest, now: float) -> None:
    if not is_poll(request) and now - request.session[ACTIVE] >= RENEW_EVERY:
        request.session[ACTIVE] = now


def _logged_in(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    """Both clocks start at login (so the first page does not write the session again)."""
    if hasattr(request, "session"):
        request.session[STARTED] = request.session[ACTIVE] = timezone.now().timestamp()


def connect_signals() -> None:
    user_logged_in.connect(_logged_in, dispatch_uid="session_clocks")


def _login_redirect(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """A redirect to the login page answering an htmx request becomes HX-Redirect to it, back to
    the page the browser shows (HX-Current-URL) rather than to the fragment's URL."""
    login = resolve_url(settings.LOGIN_URL)
    location = response.get("Location", "")
    if not request.headers.get("HX-Request") or urlsplit(location).path != login:
        return response
    page = request.headers.get("HX-Current-URL", "")
    parts = urlsplit(page)
    if not parts.path or not url_has_allowed_host_and_scheme(page, {request.get_host()}):
        return HttpResponseClientRedirect(location)
    back = parts.path + (f"?{parts.query}" if parts.query else "")
    return HttpResponseClientRedirect(f"{login}?{urlencode({'next': back})}")


def session_timeout_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        if request.user.is_authenticated:
            now = timezone.now().timestamp()
            if _expired(request, now):
                audit.record(audit.Action.SESSION_EXPIRED, request=request)
                request.session.flush()  # logout() would also record a logout: this is not one
                request.user = AnonymousUser()
            else:
                _note_activity(request, now)
        return _login_redirect(request, get_response(request))

    return middleware
