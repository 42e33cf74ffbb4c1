"""API tokens: each logged-in user lists, creates and revokes their own. A new token's secret is
shown once, in the answer to the POST that created it, and never stored: only its SHA-256 is
kept (`ApiToken.issue`), as with `manage.py issue_token`."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from console import tokens
from console.models import TOKEN_DAYS, ApiToken
from console.tokens import LIFETIMES


class TokenForm(forms.Form):
    name = forms.CharField(
        label=gettext_lazy("Name"),
        max_length=100,
        help_text=gettext_lazy("Say where the token is used, e.g. laptop or CI."),
    )
    days = forms.TypedChoiceField(
        label=gettext_lazy("Expires after"),
        choices=[(days, gettext_lazy("%(days)d days") % {"days": days}) for days in LIFETIMES],
        coerce=int,
        required=False,
        empty_value=None,
        initial=TOKEN_DAYS,
        help_text=gettext_lazy("A token also ends when you change your password."),
    )


def _owner(request: HttpRequest) -> AbstractBaseUser:
    """The logged-in user (login_required has turned anonymous visitors away)."""
    if not isinstance(request.user, AbstractBaseUser):
        raise PermissionDenied
    return request.user


@login_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """The user's tokens; a valid POST creates one and shows its secret on this answer only."""
    owner = _owner(request)
    form = TokenForm(request.POST or None)
    secret = ""
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        days = (
            data["days"] or TOKEN_DAYS
        )  # a post without the field (an older page) gets the default
        secret = tokens.issue(owner, data["name"], days, request=request)
        form = TokenForm()
    context = {
        "tokens": ApiToken.objects.filter(user_id=owner.pk).order_by("-created_at"),
        "form": form,
        "secret": secret,
        "now": timezone.now(),
    }
    return render(request, "console/tokens.html", context)


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Another user's token is a 404, as if it did not exist."""
    token = get_object_or_404(
        ApiToken.objects.select_related("user"), pk=pk, user_id=_owner(request).pk
    )
    tokens.revoke(token, "revoked by its owner", request=request)
    messages.success(
        request,
        _("Token %(name)s revoked: it no longer opens the API.") % {"name": token.name or token.pk},
    )
    return redirect("api_tokens")
