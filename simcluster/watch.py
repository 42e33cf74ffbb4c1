"""WATCH as kube-apiserver serves it: newline-delimited events after a resourceVersion.

`?watch=1&resourceVersion=RV` streams ADDED, MODIFIED and DELETED events for the changes after RV
that match the namespace and the label and field selectors, in revision order, until
`timeoutSeconds` (or the server's own limit) ends the request. An object that starts to match a
selector arrives as ADDED, one that stops matching as DELETED (with its new state), as the watch
cache does. RV unset or "0" starts with a synthetic ADDED for every current object. An RV older
than the last compaction gets one ERROR event (a 410 Expired Status) with HTTP 200, and the stream
ends. `allowWatchBookmarks=true` adds BOOKMARK events: every `bookmark_seconds` and before the
server closes on timeout (Kubernetes 1.27+).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

from simcluster import errors
from simcluster.resources import ResourceType
from simcluster.selectors import Selector, matches
from simcluster.store import Change, Store, Version

SERVER_TIMEOUT = 1800.0  # kube-apiserver's --min-request-timeout
WAIT_SLICE = 0.25  # how often a quiet watch looks at its deadline and the server's stop flag


@dataclass(frozen=True)
class WatchRequest:
    resource: ResourceType
    namespace: str | None
    labels: Selector
    fields: Selector
    since: int | None  # None: start with the current state
    timeout: float
    bookmarks: bool


def parse_since(text: str) -> int | None:
    """The starting resourceVersion; unset and "0" both mean "the current state first"."""
    if text in ("", "0"):
        return None
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {text!r}") from None
    if value < 0:
        raise errors.bad_request(f"invalid resource version: {text!r}")
    return value


def event_line(kind: str, obj: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + obj + b"}\n"


def expired_line(since: int, oldest: int) -> bytes:
    message = f"too old resource version: {since} ({oldest})"
    return event_line("ERROR", orjson.dumps(errors.ApiError(410, "Expired", message).status()))


def with_kind(resource: ResourceType, raw: bytes) -> bytes:
    head = f'{{"kind":"{resource.kind}","apiVersion":"{resource.api_version}",'.encode()
    return head + raw[1:]


class Watch:
    """One watch request's stream; iterate it outside the store lock, it takes the lock itself."""

    def __init__(
        self, store: Store, request: WatchRequest, stopping: threading.Event,
        bookmark_seconds: float = 60.0,
    ) -> None:  # fmt: skip
        self.store, self.request, self.stopping = store, request, stopping
        self.bookmark_seconds = bookmark_seconds

    def __iter__(self) -> Iterator[bytes]:
        request, store = self.request, self.store
        deadline = time.monotonic() + min(request.timeout or SERVER_TIMEOUT, SERVER_TIMEOUT)
        with store.lock:
            if request.since is not None and request.since < store.compacted:
                yield expired_line(request.since, store.compacted + 1)
                return
            cursor, first = self._start()
        yield from first
        next_bookmark = time.monotonic() + self.bookmark_seconds
        while not self.stopping.is_set() and time.monotonic() < deadline:
            lines, cursor = self._next(cursor, min(deadline, next_bookmark))
            yield from lines
            if cursor < 0:
                return  # expired: the client must relist
            if request.bookmarks and time.monotonic() >= next_bookmark:
                yield self._bookmark(cursor)
                next_bookmark = time.monotonic() + self.bookmark_seconds
        if request.bookmarks and not self.stopping.is_set():
            yield self._bookmark(cursor)

    def _start(self) -> tuple[int, list[bytes]]:
        """Under the lock: the cursor and, for RV unset or 0, a synthetic ADDED per object."""
        request = self.request
        if request.since is not None:
            return request.since, []
        page = self.store.list_page(
            request.resource.plural, request.namespace, request.labels, request.fields
        )
        return page.revision, [event_line("ADDED", with_kind(request.resource, raw)) for raw in
                               page.items]  # fmt: skip

    def _next(self, cursor: int, until: float) -> tuple[list[bytes], int]:
        """The event lines after `cursor`, waiting up to `until` for the first one, and the new
        cursor: -1 when the changes after `cursor` were compacted away (the stream ends)."""
        store, plural = self.store, self.request.resource.plural
        with store.lock:
            changes: list[Change] = []
            while not changes and not self.stopping.is_set():
                if cursor < store.compacted:
                    return [expired_line(cursor, store.compacted + 1)], -1
                changes = store.changes_after(plural, cursor)
                left = until - time.monotonic()
                if changes or left <= 0:
                    break
                store.changed.wait(min(left, WAIT_SLICE))
            if not changes:
                return [], max(cursor, store.revision)
            lines = [line for change in changes if (line := self._line(change)) is not None]
            return lines, max(changes[-1].rev if changes else cursor, cursor)

    def _line(self, change: Change) -> bytes | None:
        namespace = self.request.namespace
        if namespace is not None and change.key[0] != namespace:
            return None
        was, now = self._matches(change.old), self._matches(change.new)
        if change.new is not None and now:
            return event_line("MODIFIED" if was else "ADDED", self._object(change.new))
        if was and change.new is not None:
            return event_line("DELETED", self._object(change.new))
        if was and change.old is not None:
            return event_line("DELETED", self._object(change.old, change.rev))
        return None

    def _matches(self, version: Version | None) -> bool:
        if version is None:
            return False
        request = self.request
        return matches(request.labels, version.labels) and matches(request.fields, version.facts)

    def _object(self, version: Version, deleted_at: int | None = None) -> bytes:
        """The object's bytes; a deletion carries its last state at the deletion's revision."""
        assert version.raw is not None
        raw = version.raw
        if deleted_at is not None:
            obj = orjson.loads(raw)
            obj["metadata"]["resourceVersion"] = str(deleted_at)
            raw = orjson.dumps(obj)
        return with_kind(self.request.resource, raw)

    def _bookmark(self, cursor: int) -> bytes:
        resource = self.request.resource
        obj = {"kind": resource.kind, "apiVersion": resource.api_version,
               "metadata": {"resourceVersion": str(cursor)}}  # fmt: skip
        return event_line("BOOKMARK", orjson.dumps(obj))
