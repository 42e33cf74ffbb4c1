"""What changed in a cluster since the last cycle, as a list of `Change`s.

With a cursor for every stream, a cycle issues one bounded WATCH per stream, all at once: it
costs about one watch timeout of wall time and, while nothing changes, next to no CPU. Without
cursors (the first cycle, after a fault, when the periodic relist is due) or when the API server
answers 410 Expired, every stream is LISTed and compared with what is stored, by UID and
resourceVersion: the same `Change`s come out, so one path applies both, and pods deleted while
nobody watched are noticed. A watch that is cut, malformed or answers an ERROR event raises
ClusterUnreachable like a broken LIST: the cycle keeps every phase as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from console.engine.stored import freeze
from console.engine.streams import JOB_STREAMS, POD_STREAMS, STREAMS, Stream
from console.kube.gateway import (
    ClusterUnreachable,
    Gateway,
    Watch,
    WatchBatch,
    WatchEvent,
)
from jobs.status.observed import held_gpus


class Stored(NamedTuple):
    """What the database holds of one observed object, enough to compare and to forget it."""

    version: str
    job_id: int | None
    node_name: str


@dataclass(frozen=True)
class Change:
    """One object's new state; `data` is its observation as JSON (console.engine.stored), None
    once deleted. `observation` is what `data` was frozen from: the cycle that read the object
    uses it as it is instead of parsing `data` back."""

    stream: str
    uid: str
    version: str
    job_id: int | None
    node_name: str
    data: str | None
    gpus: int = 0
    observation: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Reading:
    changes: list[Change]
    cursors: dict[str, str]
    relisted: bool


def change_of(stream: Stream, obj: Any, deleted: bool = False) -> Change:
    """A Change from an object the API server sent; one the parser cannot read makes the whole
    answer unusable (ClusterUnreachable), as for a LIST."""
    try:
        meta = obj["metadata"]
        parsed = stream.parse(obj)
        uid, version = str(meta["uid"]), str(meta["resourceVersion"])
        job_id = parsed.owner.job_id if stream.name in JOB_STREAMS else None
        node = meta["name"] if stream.name == "nodes" else (obj.get("spec") or {}).get("nodeName")
    except (AttributeError, TypeError, ValueError, IndexError, KeyError):
        text = f"the API server answered {stream.name} of an unexpected shape"
        raise ClusterUnreachable(text, "unexpected_shape") from None
    if deleted:  # its last state kept for the GPU-hours ledger's end time (usage.ledger)
        return Change(stream.name, uid, version, job_id, str(node or ""), None, 0, parsed)
    gpus = held_gpus(parsed) if stream.name in POD_STREAMS else 0
    data = freeze(parsed)
    return Change(stream.name, uid, version, job_id, str(node or ""), data, gpus, parsed)


# --- watch -----------------------------------------------------------------------------------


def watch_all(gateway: Gateway, cursors: Mapping[str, str], seconds: int) -> Reading:
    """Every stream watched from its cursor at once. Raises WatchExpired (relist) or
    ClusterUnreachable (a fault: the cycle stops), the fault first."""
    watches = [Watch(s.resource, cursors[s.name], s.selector) for s in STREAMS]
    batches = list(zip(STREAMS, gateway.watches(watches, seconds), strict=True))
    return Reading(_latest(batches), {stream.name: b.cursor for stream, b in batches}, False)


def _latest(batches: list[tuple[Stream, WatchBatch]]) -> list[Change]:
    """One Change per object, from its last event: an object that changed four times in the
    window is parsed once. (The gateway checked that every event's object has metadata.)"""
    last: dict[tuple[str, str], tuple[Stream, WatchEvent]] = {}
    for stream, batch in batches:
        for event in batch.events:
            last[(stream.name, str(event.object["metadata"].get("uid")))] = (stream, event)
    return [
        change_of(stream, event.object, event.type == "DELETED") for stream, event in last.values()
    ]


# --- relist ----------------------------------------------------------------------------------


def relist_all(gateway: Gateway, stored: Mapping[str, Mapping[str, Stored]]) -> Reading:
    """Every stream LISTed and compared with what is stored."""
    changes: list[Change] = []
    cursors: dict[str, str] = {}
    for stream in STREAMS:
        listing = gateway.listing(stream.resource, stream.selector)
        known = stored.get(stream.name, {})
        changes += _differences(stream, listing.items, known)
        cursors[stream.name] = listing.resource_version
    return Reading(changes, cursors, True)


def _differences(stream: Stream, items: list[Any], known: Mapping[str, Stored]) -> list[Change]:
    changes, listed = [], set()
    try:
        for item in items:
            meta = item["metadata"]
            uid = meta["uid"]
            listed.add(uid)
            row = known.get(uid)
            if row is None or row.version != meta["resourceVersion"]:
                changes.append(change_of(stream, item))
    except (TypeError, KeyError):
        text = f"the API server answered {stream.name} of an unexpected shape"
        raise ClusterUnreachable(text, "unexpected_shape") from None
    for uid, row in known.items():
        if uid not in listed:
            changes.append(Change(stream.name, uid, row.version, row.job_id, row.node_name, None))
    return changes
