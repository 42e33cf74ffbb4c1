"""What every page may ask about its reader, computed only if the page asks."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from jobs.access import is_operator


def roles(request: HttpRequest) -> dict[str, object]:
    """`is_operator`: the reader holds the global operator role (jobs.access.is_operator)."""
    return {"is_operator": SimpleLazyObject(lambda: is_operator(request.user))}
