"""Live refresh without waste: a fragment carries a digest of the facts it shows, and a poll that
sends back the digest of what it would render anyway is answered 204 (htmx swaps nothing)."""

from __future__ import annotations

import hashlib

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (for type checking)."""

    htmx: HtmxDetails


def fragment_version(*facts: object) -> str:
    """A short digest of what a refreshed fragment would show; the fragment sends it back as `v`.

    Facts must be plain values (no lazy translations or model instances: their repr is not stable).
    """
    return hashlib.blake2b(repr(facts).encode(), digest_size=8).hexdigest()


def unchanged(request: HtmxHttpRequest, version: str) -> bool:
    """True for a polling request whose fragment would render exactly what the page has."""
    return bool(request.htmx) and request.GET.get("v") == version
