"""The login page, rate limited (console/ratelimit.py): past the limit of failures for the
account or from the address, the page says how long to wait and answers 429."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.translation import gettext_lazy as _

from console import audit, ratelimit


class LimitedAuthenticationForm(AuthenticationForm):
    locked = False

    def clean(self) -> dict[str, Any]:
        username = str(self.cleaned_data.get("username") or "")
        ip = audit.client_ip(self.request) if self.request is not None else None
        limits = ratelimit.login_limits(username, ip)
        minutes = ratelimit.minutes_to_wait(limits)
        if minutes:
            self.locked = True
            audit.record(audit.Action.LOGIN_FAILED, request=self.request,
                         result=audit.Result.REFUSED, detail="too many failed logins")  # fmt: skip
            raise ValidationError(
                _(
                    "Too many failed logins for this account or from this address. "
                    "Try again in %(minutes)d minutes, or ask an administrator to reset your "
                    "password."
                ),
                code="locked",
                params={"minutes": minutes},
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            ratelimit.note_failure(limits)
            raise
        ratelimit.forget(limits[0])
        return cleaned


_login_view = LoginView.as_view(authentication_form=LimitedAuthenticationForm)


def login(request: HttpRequest) -> HttpResponseBase:
    response = _login_view(request)
    form = getattr(response, "context_data", {}).get("form")
    if isinstance(form, LimitedAuthenticationForm) and form.locked:
        response.status_code = 429
    return response
