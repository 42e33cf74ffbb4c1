"""Django's database sessions (SESSION_ENGINE), the session read by a compiled statement: every
page and poll reads its session first (console.statements)."""

from __future__ import annotations

from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from console.statements import Statement

_SESSION = Statement(
    lambda key: Session.objects.filter(session_key=key).values_list("session_data", "expire_date"),
    str,
)


class SessionStore(db.SessionStore):
    def _get_session_from_db(self) -> Session | None:
        """As Django's: the unexpired session of this key, else None, forgetting the key."""
        key = self.session_key
        found = _SESSION.first(key) if key else None
        if key is None or found is None or found[1] <= timezone.now():
            self._session_key = None
            return None
        return Session(session_key=key, session_data=found[0], expire_date=found[1])
