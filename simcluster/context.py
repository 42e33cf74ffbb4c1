"""What every controller shares: the store, the simulated clock, randomness, the event recorder."""

from __future__ import annotations

import heapq
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from simcluster.clock import SimClock, rfc3339
from simcluster.resources import RESOURCES
from simcluster.store import Key, Store

Obj = dict[str, Any]

# The alphabet of apimachinery's rand.String and SafeEncodeString: no vowels, no look-alikes.
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
EVENT_TTL = 3600.0


@dataclass
class Context:
    store: Store
    clock: SimClock
    rng: random.Random
    events: EventRecorder = field(init=False)
    _uid_salt: int = field(init=False)

    def __post_init__(self) -> None:
        self.events = EventRecorder(self)
        self.store.new_uid = self.uid
        # UIDs are unique across clusters and time in Kubernetes; a seeded cluster must not hand
        # out the UIDs of another instance with the same seed (a client caching by UID would take
        # one cluster's pod for another's). The salt leaves the seeded random sequence unchanged.
        self._uid_salt = uuid.uuid4().int

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128) ^ self._uid_salt, version=4))

    def now(self) -> float:
        return self.clock.now()

    def stamp(self, moment: float | None = None) -> str:
        return rfc3339(self.now() if moment is None else moment)

    def suffix(self, length: int = 5) -> str:
        return "".join(self.rng.choice(ALPHANUMS) for _ in range(length))

    def hex_id(self, length: int = 64) -> str:
        return f"{self.rng.getrandbits(4 * length):0{length}x}"


def object_reference(resource: str, obj: Obj, field_path: str = "") -> Obj:
    """An event's involvedObject for a stored object (which carries no kind of its own)."""
    rt = RESOURCES[resource]
    meta = obj["metadata"]
    reference: Obj = {"kind": rt.kind, "name": meta["name"]}
    if meta.get("namespace"):
        reference["namespace"] = meta["namespace"]
    reference.update({"uid": meta.get("uid", ""), "apiVersion": rt.api_version})
    reference["resourceVersion"] = meta.get("resourceVersion", "")
    if field_path:
        reference["fieldPath"] = field_path
    return reference


class EventRecorder:
    """core/v1 Events as the client-go recorder writes them, repeats folded into `count`.

    Events expire after an hour of simulated time, like the API server's event TTL, so a crash loop
    running all day does not grow the store without bound.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._folded: dict[tuple[str, ...], Key] = {}
        self._expiry: list[tuple[float, Key]] = []

    def record(
        self,
        involved: Obj,
        type_: str,
        reason: str,
        message: str,
        component: str,
        host: str = "",
    ) -> None:
        fold = (
            involved.get("uid", ""),
            involved.get("fieldPath", ""),
            type_,
            reason,
            message,
            component,
        )
        key = self._folded.get(fold)
        if key is not None and self._bump(key):
            return
        self._create(fold, involved, type_, reason, message, component, host)

    def _bump(self, key: Key) -> bool:
        event = self.ctx.store.get("events", key)
        if event is None:
            return False
        event["count"] = event.get("count", 1) + 1
        event["lastTimestamp"] = self.ctx.stamp()
        self.ctx.store.update("events", event)
        return True

    def _create(
        self,
        fold: tuple[str, ...],
        involved: Obj,
        type_: str,
        reason: str,
        message: str,
        component: str,
        host: str,
    ) -> None:
        namespace = involved.get("namespace") or "default"
        name = f"{involved['name']}.{self.ctx.hex_id(16)}"
        stamp = self.ctx.stamp()
        source = {"component": component, **({"host": host} if host else {})}
        event: Obj = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": type_,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host,
        }
        self.ctx.store.create("events", event, stamp)
        self._folded[fold] = (namespace, name)
        heapq.heappush(self._expiry, (self.ctx.now() + EVENT_TTL, (namespace, name)))

    def expire(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] <= now:
            _, key = heapq.heappop(self._expiry)
            self.ctx.store.remove("events", key)
        if len(self._folded) > 4 * max(1, self.ctx.store.count("events")):
            live = set(self.ctx.store.keys("events"))
            self._folded = {k: v for k, v in self._folded.items() if v in live}
