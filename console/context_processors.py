"""What every page may ask about its reader, computed only if the page asks."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from console import web
from jobs.access import is_operator


def roles(request: HttpRequest) -> dict[str, object]:
    """`is_operator`: the reader holds the global operator role (jobs.access.is_operator)."""
    return {"is_operator": SimpleLazyObject(lambda: is_operator(request.user))}


def poll(request: HttpRequest) -> dict[str, object]:
    """`poll_seconds`: how often every live fragment asks for news (console.web.POLL_SECONDS),
    the one interval of every `hx-trigger="every ..."` and of the words that tell it."""
    return {"poll_seconds": web.POLL_SECONDS}
