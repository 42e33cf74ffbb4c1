"""What the workload controllers share: a dirty set fed by store changes, delayed requeues, and
reading the pods a controller owns through the store's owner index."""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from simcluster import errors
from simcluster.clock import MIN_BATCH, UNLIMITED, Budget, parse_rfc3339
from simcluster.context import Context, object_reference
from simcluster.facts import is_terminal_phase
from simcluster.resources import RESOURCES
from simcluster.store import Key, Version
from simcluster.writes import Writer

Obj = dict[str, Any]
BACKOFF_BASE, BACKOFF_MAX = 0.005, 1000.0  # client-go's DefaultControllerRateLimiter, seconds


@dataclass
class PodView:
    """What a controller needs to know about one owned pod, read from the store's facts."""

    key: Key
    labels: dict[str, str]
    phase: str
    ready: bool
    ready_since: str
    deleting: bool
    node: str

    @property
    def name(self) -> str:
        return self.key[1]

    @property
    def terminal(self) -> bool:
        return is_terminal_phase(self.phase)

    @property
    def active(self) -> bool:
        return not self.terminal and not self.deleting

    def available(self, min_ready_seconds: int, now: float) -> bool:
        if not self.ready or self.deleting:
            return False
        return not min_ready_seconds or parse_rfc3339(self.ready_since) + min_ready_seconds <= now


def pod_view(key: Key, version: Version) -> PodView:
    facts = version.facts
    return PodView(
        key,
        version.labels,
        facts["status.phase"],
        facts["_ready"],
        facts["_ready_since"],
        facts["_deleting"],
        facts["spec.nodeName"],
    )


class Controller(ABC):
    """Subclasses name the resource they own and the dependents whose changes wake the owner."""

    resource = ""
    dependents: tuple[str, ...] = ("pods",)
    component = ""

    def __init__(self, ctx: Context, writer: Writer) -> None:
        self.ctx = ctx
        self.writer = writer
        self.dirty: set[Key] = set()
        self._timers: list[tuple[float, Key]] = []
        self._failures: dict[Key, int] = {}

    def on_change(self, resource: str, key: Key, old: Version | None, new: Version | None) -> None:
        if resource == self.resource:
            self.dirty.add(key)
        elif resource in self.dependents:
            for version in (old, new):
                if version is not None and version.facts["_controller"]:
                    owner = self.ctx.store.find_uid(version.facts["_controller"])
                    if owner is not None and owner[0] == self.resource:
                        self.dirty.add(owner[1])

    def requeue(self, key: Key, at: float) -> None:
        heapq.heappush(self._timers, (at, key))

    def run(self, now: float, budget: Budget = UNLIMITED) -> bool:
        while self._timers and self._timers[0][0] <= now:
            self.dirty.add(heapq.heappop(self._timers)[1])
        if not self.dirty:
            return False
        keys = sorted(self.dirty)
        self.dirty.clear()
        for index, key in enumerate(keys):
            if index >= MIN_BATCH and budget.exhausted():
                self.dirty.update(keys[index:])
                break
            obj = self.ctx.store.get(self.resource, key)
            if obj is not None:
                self.sync(obj, now)
            else:
                self._failures.pop(key, None)
        return True

    @abstractmethod
    def sync(self, obj: Obj, now: float) -> None:
        """Brings one owned object's world in line with its spec and writes its status."""

    # Helpers ---------------------------------------------------------------------------------

    def owned(self, owner: Obj, resource: str = "pods") -> list[tuple[Key, Version]]:
        uid = owner["metadata"]["uid"]
        found = []
        for kind, key in self.ctx.store.dependents(uid):
            version = self.ctx.store.get_version(kind, key) if kind == resource else None
            if version is not None and version.facts["_controller"] == uid:
                found.append((key, version))
        return found

    def owned_pods(self, owner: Obj) -> list[PodView]:
        return [pod_view(key, version) for key, version in self.owned(owner)]

    def create_pod(self, owner: Obj, pod: Obj) -> bool:
        """Creates through the API path (validation, admission). A refused create is an event and
        a requeue of the owner with client-go's per-item back-off (5 ms doubling, at most 1000 s):
        the change that frees the way (a terminating pod of a deleted owner that held the name)
        may belong to another owner and would never wake this one."""
        meta = owner["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        try:
            self.writer.create(RESOURCES["pods"], meta["namespace"], pod)
        except errors.ApiError as error:
            self.event(owner, "Warning", "FailedCreate", f"Error creating: {error.message}")
            failures = self._failures[key] = self._failures.get(key, 0) + 1
            self.requeue(key, self.ctx.now() + min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (failures - 1)))
            return False
        self._failures.pop(key, None)
        return True

    def event(self, owner: Obj, type_: str, reason: str, message: str) -> None:
        self.ctx.events.record(
            object_reference(self.resource, owner), type_, reason, message, self.component
        )

    def write_status(self, obj: Obj, status: Obj) -> None:
        if obj.get("status") != status:
            obj["status"] = status
            self.ctx.store.update(self.resource, obj)
