"""A database that does not answer (a restart, a fail-over) is not a bug in the request: the
answer is 503 with Retry-After, saying so. Pages get it from Django's handler for an uncaught
exception (`server_error`, built without the database: no session, no user, no base template's
menus, since that is what failed); the API from its own handler, in its error shape."""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.template.loader import render_to_string
from django.utils.translation import gettext as _

RETRY_SECONDS = 5
MESSAGE_CODE = "database.unavailable"


def database_unavailable(error: BaseException | None) -> bool:
    return isinstance(error, (OperationalError, InterfaceError))


def unavailable_message() -> str:
    return _("The database is not answering (restarting, or out of reach). Nothing was "
             "changed; try again in a few seconds.")  # fmt: skip


def retry_later(response: HttpResponse) -> HttpResponse:
    response.status_code = 503
    response["Retry-After"] = str(RETRY_SECONDS)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    if not database_unavailable(sys.exc_info()[1]):
        return HttpResponseServerError(render_to_string("500.html"))
    page = render_to_string("503.html", {"message": unavailable_message()})
    return retry_later(HttpResponse(page))
