"""The object store: an in-memory etcd with revisions, history, compaction and paginated ranges.

Objects are kept as JSON bytes (without kind/apiVersion, the way list items are written), so a LIST
is a join of stored bytes and no object can be changed behind the store's back. Every write gets the
next global revision; older versions stay until a compaction so a paginated LIST can continue from
the snapshot its first page saw, exactly like an etcd range read at a revision.
"""

from __future__ import annotations

import base64
import bisect
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from simcluster import errors
from simcluster.facts import facts_of
from simcluster.resources import RESOURCES, ResourceType
from simcluster.selectors import Selector, matches

Obj = dict[str, Any]
Key = tuple[str, str]
Listener = Callable[[str, Key, "Version | None", "Version | None"], None]


@dataclass(slots=True)
class Version:
    """One revision of one key; `raw` None is a deletion (tombstone)."""

    rev: int
    raw: bytes | None
    labels: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Change:
    """One write as a watch sees it: the versions before and after (None: absent)."""

    rev: int
    key: Key
    old: Version | None
    new: Version | None


@dataclass
class ListPage:
    revision: int
    items: list[bytes]
    continue_token: str | None
    remaining: int | None


class Collection:
    """One resource's keys in etcd order (namespace, then name) and each key's versions."""

    def __init__(self, resource: ResourceType) -> None:
        self.resource = resource
        self.keys: list[Key] = []
        self.versions: dict[Key, list[Version]] = {}
        self.history: set[Key] = set()
        self.live = 0
        self.last_write = 0
        # The watch window: every change since the last compaction, oldest first.
        self.changes: list[Change] = []
        self.change_revs: list[int] = []

    def latest(self, key: Key) -> Version | None:
        versions = self.versions.get(key)
        if not versions or versions[-1].raw is None:
            return None
        return versions[-1]

    def span(self, namespace: str | None) -> tuple[int, int]:
        if namespace is None:
            return 0, len(self.keys)
        low = bisect.bisect_left(self.keys, (namespace, ""))
        return low, bisect.bisect_left(self.keys, (namespace + "\x00", ""), low)


def version_at(versions: list[Version], revision: int) -> Version | None:
    newest = versions[-1]
    if newest.rev <= revision:
        return newest if newest.raw is not None else None
    for version in reversed(versions):
        if version.rev <= revision:
            return version if version.raw is not None else None
    return None


class Store:
    """Thread-safe behind `lock`, which HTTP threads and the controller loop share."""

    def __init__(
        self, compaction_window: int = 10_000, new_uid: Callable[[], str] | None = None
    ) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # notified after every write, for watches
        self.new_uid = new_uid or (lambda: str(uuid.uuid4()))
        self.revision = 1
        self.compacted = 0
        self.compaction_window = compaction_window
        self._compaction_mark = 0
        self.collections = {name: Collection(rt) for name, rt in RESOURCES.items()}
        self.listeners: list[Listener] = []
        self._by_uid: dict[str, tuple[str, Key]] = {}
        self._dependents: dict[str, set[tuple[str, Key]]] = {}
        self._pods_by_node: dict[str, set[Key]] = {}

    # Reads -----------------------------------------------------------------------------------

    def get(self, resource: str, key: Key) -> Obj | None:
        """A private parsed copy: callers may change it and write it back."""
        version = self.collections[resource].latest(key)
        return orjson.loads(version.raw) if version and version.raw else None

    def get_version(self, resource: str, key: Key) -> Version | None:
        return self.collections[resource].latest(key)

    def raw(self, resource: str, key: Key) -> bytes | None:
        version = self.collections[resource].latest(key)
        return version.raw if version else None

    def keys(self, resource: str, namespace: str | None = None) -> list[Key]:
        collection = self.collections[resource]
        low, high = collection.span(namespace)
        return [k for k in collection.keys[low:high] if collection.latest(k) is not None]

    def versions(
        self, resource: str, namespace: str | None = None
    ) -> Iterator[tuple[Key, Version]]:
        collection = self.collections[resource]
        low, high = collection.span(namespace)
        for key in collection.keys[low:high]:
            version = collection.latest(key)
            if version is not None:
                yield key, version

    def objects(self, resource: str, namespace: str | None = None) -> list[Obj]:
        return [orjson.loads(v.raw) for _, v in self.versions(resource, namespace) if v.raw]

    def find_uid(self, uid: str) -> tuple[str, Key] | None:
        return self._by_uid.get(uid)

    def dependents(self, uid: str) -> list[tuple[str, Key]]:
        return sorted(self._dependents.get(uid, ()))

    def pods_on_node(self, node: str) -> list[Key]:
        return sorted(self._pods_by_node.get(node, ()))

    def count(self, resource: str) -> int:
        return self.collections[resource].live

    # Writes ----------------------------------------------------------------------------------

    def create(self, resource: str, obj: Obj, now: str) -> Obj:
        """Stores a new object, filling uid, resourceVersion, creationTimestamp and generation."""
        collection = self.collections[resource]
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if collection.latest(key) is not None:
            raise errors.already_exists(resource, collection.resource.group, meta["name"])
        meta.setdefault("uid", self.new_uid())
        meta["creationTimestamp"] = meta.get("creationTimestamp") or now
        if collection.resource.has_generation:
            meta["generation"] = 1
        self._commit(collection, key, obj)
        return obj

    def update(self, resource: str, obj: Obj, expect_rv: str | None = None) -> Obj:
        """Replaces the stored object; a stale `expect_rv` is a 409 Conflict.

        An object marked for deletion whose finalizers are gone (and, for a pod, whose kubelet
        has given up its grace period) is removed instead, as the registry's update does.
        """
        collection = self.collections[resource]
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        current = collection.latest(key)
        if current is None:
            raise errors.not_found(resource, collection.resource.group, meta["name"])
        if expect_rv is not None and expect_rv != str(current.rev):
            raise errors.conflict(resource, collection.resource.group, meta["name"])
        if _ready_to_remove(resource, meta):
            self._commit(collection, key, None)
            meta["resourceVersion"] = str(self.revision)
            return obj
        self._commit(collection, key, obj)
        return obj

    def remove(self, resource: str, key: Key) -> Obj | None:
        collection = self.collections[resource]
        current = collection.latest(key)
        if current is None or current.raw is None:
            return None
        obj: Obj = orjson.loads(current.raw)
        self._commit(collection, key, None)
        obj["metadata"]["resourceVersion"] = str(self.revision)
        return obj

    def _commit(self, collection: Collection, key: Key, obj: Obj | None) -> None:
        self.revision += 1
        new = (
            self._version(collection.resource, obj)
            if obj is not None
            else Version(self.revision, None)
        )
        versions = collection.versions.get(key)
        old = versions[-1] if versions else None
        if versions is None:
            bisect.insort(collection.keys, key)
            collection.versions[key] = [new]
        else:
            versions.append(new)
            collection.history.add(key)
        collection.live += (new.raw is not None) - (old is not None and old.raw is not None)
        collection.last_write = self.revision
        old_live = old if old is not None and old.raw is not None else None
        new_live = new if new.raw is not None else None
        self._reindex(collection.resource.plural, key, old_live, new_live)
        collection.changes.append(Change(self.revision, key, old_live, new_live))
        collection.change_revs.append(self.revision)
        self.changed.notify_all()
        for listener in self.listeners:
            listener(collection.resource.plural, key, old_live, new_live)
        if self.revision - self._compaction_mark > self.compaction_window:
            self.compact(self._compaction_mark)
            self._compaction_mark = self.revision

    def _version(self, resource: ResourceType, obj: Obj) -> Version:
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        obj["metadata"]["resourceVersion"] = str(self.revision)
        labels = dict(obj["metadata"].get("labels") or {})
        # orjson's buffer is over-allocated about threefold; an exact copy keeps 10,000 pods lean.
        raw = memoryview(orjson.dumps(obj)).tobytes()
        return Version(self.revision, raw, labels, facts_of(resource, obj))

    def _reindex(self, resource: str, key: Key, old: Version | None, new: Version | None) -> None:
        if old is not None:
            self._by_uid.pop(old.facts["_uid"], None)
            for owner in old.facts["_owners"]:
                _discard(self._dependents, owner, (resource, key))
            if resource == "pods":
                _discard(self._pods_by_node, old.facts["spec.nodeName"], key)
        if new is not None:
            self._by_uid[new.facts["_uid"]] = (resource, key)
            for owner in new.facts["_owners"]:
                self._dependents.setdefault(owner, set()).add((resource, key))
            if resource == "pods" and new.facts["spec.nodeName"]:
                self._pods_by_node.setdefault(new.facts["spec.nodeName"], set()).add(key)

    # Lists -----------------------------------------------------------------------------------

    def list_page(
        self,
        resource: str,
        namespace: str | None,
        labels: Selector = (),
        fields: Selector = (),
        limit: int = 0,
        token: str = "",
    ) -> ListPage:
        """One page of a range read; the continue token pins the revision of the first page."""
        collection = self.collections[resource]
        revision, start = (
            self._decode_continue(token, namespace) if token else (self.revision, None)
        )
        low, high = collection.span(namespace)
        position = bisect.bisect_right(collection.keys, start, low, high) if start else low
        items: list[bytes] = []
        last: Key | None = None
        keys, versions, selective = collection.keys, collection.versions, bool(labels or fields)
        while position < high and (limit <= 0 or len(items) < limit):
            key = keys[position]
            position += 1
            version = version_at(versions[key], revision)
            if version is None or version.raw is None:
                continue
            if not selective or (
                matches(labels, version.labels) and matches(fields, version.facts)
            ):
                items.append(version.raw)
                last = key
        more = limit > 0 and position < high and last is not None
        next_token = _encode_continue(revision, last, namespace) if more and last else None
        remaining = None
        if next_token and not labels and not fields:
            remaining = self._count_live(collection, position, high, revision)
        return ListPage(revision, items, next_token, remaining)

    def _count_live(self, collection: Collection, low: int, high: int, revision: int) -> int:
        """Keys alive at `revision` in [low, high); O(1) when nothing changed since then."""
        if collection.last_write <= revision and collection.live == len(collection.keys):
            return high - low
        count = 0
        for key in collection.keys[low:high]:
            versions = collection.versions[key]
            newest = versions[-1]
            if newest.rev <= revision:
                count += newest.raw is not None
            else:
                count += version_at(versions, revision) is not None
        return count

    def _decode_continue(self, token: str, namespace: str | None) -> tuple[int, Key]:
        try:
            padded = token + "=" * (-len(token) % 4)
            decoded = orjson.loads(base64.urlsafe_b64decode(padded))
            revision, start = int(decoded["rv"]), str(decoded["start"]).rstrip("\x00")
            if decoded.get("v") != "meta.k8s.io/v1":
                raise ValueError("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        except (ValueError, KeyError, TypeError) as error:
            raise errors.bad_request(f"continue key is not valid: {error}") from None
        key = (namespace, start) if namespace is not None else _split_start(start)
        if revision < 0:
            return self.revision, key
        if revision < self.compacted:
            raise errors.expired(_encode_continue(-1, key, namespace))
        return revision, key

    # Watch -----------------------------------------------------------------------------------

    def changes_after(self, resource: str, revision: int) -> list[Change]:
        """The changes of one resource after `revision`, in revision order (caller holds lock)."""
        collection = self.collections[resource]
        start = bisect.bisect_right(collection.change_revs, revision)
        return collection.changes[start:]

    # Compaction ------------------------------------------------------------------------------

    def compact(self, revision: int) -> None:
        """Forgets every version older than `revision` that a newer one (or deletion) replaced."""
        revision = min(revision, self.revision)
        if revision <= self.compacted:
            return
        for collection in self.collections.values():
            kept = bisect.bisect_right(collection.change_revs, revision)
            del collection.changes[:kept], collection.change_revs[:kept]
            removed = 0
            for key in list(collection.history):
                removed += self._compact_key(collection, key, revision)
            if removed:
                collection.keys = [k for k in collection.keys if k in collection.versions]
        self.compacted = revision

    def _compact_key(self, collection: Collection, key: Key, revision: int) -> int:
        versions = collection.versions[key]
        older = [v for v in versions if v.rev <= revision]
        kept = [v for v in versions if v.rev > revision]
        if older and older[-1].raw is not None:
            kept.insert(0, older[-1])
        if not kept:
            del collection.versions[key]
            collection.history.discard(key)
            return 1
        collection.versions[key] = kept
        if len(kept) == 1 and kept[0].raw is not None:
            collection.history.discard(key)
        return 0

    def compact_now(self) -> int:
        with self.lock:
            self.compact(self.revision)
            self._compaction_mark = self.revision
            return self.revision


def _discard(index: dict[str, set[Any]], name: str, member: Any) -> None:
    members = index.get(name)
    if members is not None:
        members.discard(member)
        if not members:
            del index[name]


def _ready_to_remove(resource: str, meta: Obj) -> bool:
    """Namespaces wait for the namespace controller (their finalizer lives in spec)."""
    if "deletionTimestamp" not in meta or meta.get("finalizers") or resource == "namespaces":
        return False
    return resource != "pods" or meta.get("deletionGracePeriodSeconds") == 0


def _encode_continue(revision: int, key: Key | None, namespace: str | None) -> str:
    assert key is not None
    start = key[1] if namespace is not None or not key[0] else f"{key[0]}/{key[1]}"
    payload = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start + "\x00"})
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def _split_start(start: str) -> Key:
    namespace, _, name = start.partition("/")
    return (namespace, name) if name else ("", namespace)
