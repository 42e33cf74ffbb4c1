"""What the database remembers of a cluster between cycles (ObservedObject rows), and the part
of it a cycle needs: the objects of the Jobs, Nodes and add-ons its changes touched.

A cycle with k changes reads the stored objects of the touched Jobs and Nodes only, overlays the
changes in memory, and writes the changes back in the transaction that writes the derived rows:
a cycle killed before that commit leaves the stored objects and the cursors as they were, and
the next one reads the same changes again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from console.bulk import upsert
from console.engine.observe import Change, Stored
from console.engine.stored import thaw
from console.engine.streams import ADDON_STREAMS, BY_NAME, JOB_STREAMS, POD_STREAMS
from console.kube.gateway import ClusterUnreachable
from console.kube.observations import (
    AddonObs,
    BatchJobObs,
    NodeObs,
    PodObs,
    ServiceObs,
    StatefulSetObs,
)
from console.models import ObservedObject
from console.statements import Statement

BATCH = 500
# The columns of an ObservedObject: its key (the one_observation_per_uid constraint), then
# what is stored of it.
KEY = ("cluster_id", "stream", "uid")
STORED = ("resource_version", "job_id", "node_name", "gpus", "data")


@dataclass(frozen=True)
class Snapshot:
    """The observed objects of the touched part of a cluster, parsed."""

    statefulsets: list[StatefulSetObs] = field(default_factory=list)
    batch_jobs: list[BatchJobObs] = field(default_factory=list)
    services: list[ServiceObs] = field(default_factory=list)
    pods: list[PodObs] = field(default_factory=list)
    nodes: list[NodeObs] = field(default_factory=list)
    addons: list[AddonObs] = field(default_factory=list)
    addon_pods: list[PodObs] = field(default_factory=list)


@dataclass
class Touched:
    """What a cycle re-derives: these Jobs (their Tasks, from all their objects), the Workers
    and pod instances of these pods (UIDs), these Nodes, the add-ons. `everything` (a
    cluster's first cycle) stands for every Job, pod, Node and add-on."""

    jobs: set[int] = field(default_factory=set)
    pods: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    addons: bool = False
    everything: bool = False

    def holds(self, change: Change) -> bool:
        """Whether `load` reads the changed object."""
        if self.everything:
            return True
        if change.stream in JOB_STREAMS:
            return change.job_id in self.jobs
        if change.stream == "nodes":
            return change.node_name in self.nodes
        return change.stream in ADDON_STREAMS and self.addons

    def holds_node(self, name: str) -> bool:
        return self.everything or name in self.nodes

    def holds_pod(self, uid: str) -> bool:
        """Whether the pod's Worker and instance are compared with it: a pod that neither
        changed nor stands on a changed Node still matches both."""
        return self.everything or uid in self.pods


def stored(cluster_id: int) -> dict[str, dict[str, Stored]]:
    """Stream -> UID -> what is stored: what a relist compares with."""
    rows = ObservedObject.objects.filter(cluster_id=cluster_id).values_list(
        "stream", "uid", "resource_version", "job_id", "node_name"
    )
    by_stream: dict[str, dict[str, Stored]] = defaultdict(dict)
    for stream, uid, version, job_id, node_name in rows.iterator(chunk_size=2000):
        by_stream[stream][uid] = Stored(version, job_id, node_name)
    return by_stream


def touched(cluster_id: int, changes: Sequence[Change], always: Iterable[int]) -> Touched:
    """The Jobs whose objects changed (and `always`), the pods that changed, the Nodes that
    changed or whose pods did, the add-ons when any of theirs changed; a changed Node also
    touches the pods on it and their Jobs (a pod's message names its node's trouble)."""
    result = Touched(jobs=set(always))
    changed_nodes = set()
    for change in changes:
        if change.stream in JOB_STREAMS and change.job_id is not None:
            result.jobs.add(change.job_id)
            if change.stream == "pods":
                result.pods.add(change.uid)
        if change.stream in POD_STREAMS and change.node_name:
            result.nodes.add(change.node_name)
        if change.stream == "nodes":
            changed_nodes.add(change.node_name)
        result.addons = result.addons or change.stream in ADDON_STREAMS
    if changed_nodes:
        result.nodes |= changed_nodes
        rows = ObservedObject.objects.filter(cluster_id=cluster_id, stream="pods")
        for job_id, uid in rows.filter(node_name__any_of=changed_nodes).values_list(
            "job_id", "uid"
        ):
            result.jobs |= {job_id} if job_id is not None else set()
            result.pods.add(uid)
    return result


def _selection(touched: Touched, changes: Sequence[Change], noted: Q | None) -> Q:
    if touched.everything:
        return Q()
    of_jobs = Q(job_id__any_of=touched.jobs)
    selected = Q(stream__in=[name for name in JOB_STREAMS if name != "pods"]) & of_jobs
    selected |= Q(stream="pods") & of_jobs & _pods(touched, changes, noted)
    selected |= Q(stream="nodes", node_name__any_of=touched.nodes)
    return selected | Q(stream__in=ADDON_STREAMS) if touched.addons else selected


def _pods(touched: Touched, changes: Sequence[Change], noted: Q | None) -> Q:
    """The touched Jobs' stored pods a cycle reads: the noted ones and the touched ones this
    cycle's changes do not carry (on a changed Node); all of them when `noted` is None or the
    touched ones do not fit one statement."""
    unchanged = touched.pods - {change.uid for change in changes}
    if noted is None or len(unchanged) > BATCH:
        return Q()
    return noted | Q(uid__any_of=unchanged)


def gpus_by_node(
    cluster_id: int, touched: Touched, changes: Sequence[Change], allocated: Mapping[str, int],
    incremental: bool,
) -> dict[str, int]:  # fmt: skip
    """GPUs held by the pods on each touched Node. `incremental` (a watch cycle): a Node's
    stored total (`allocated`) moves by what its changed pods hold now minus what was stored of
    them, so only the changed pods are read. A Node without a stored total, every Node on a
    relist (which corrects any drift) or when the changes do not fit one statement, is summed
    by the database over its stored pods, this cycle's changes laid over them."""
    changed = {(c.stream, c.uid): c for c in changes if c.stream in POD_STREAMS}
    moving = incremental and not touched.everything and len(changed) <= BATCH
    moved = touched.nodes & set(allocated) if moving else set()
    totals: dict[str, int] = defaultdict(int, {name: allocated[name] for name in moved})
    for stream, uid, node, gpus in _held(cluster_id, touched, changed, moved):
        if node in moved:
            totals[node] -= gpus  # what was stored of a changed pod
        elif (stream, uid) not in changed:
            totals[node] += gpus
    for change in changed.values():
        if change.data is not None and change.gpus and touched.holds_node(change.node_name):
            totals[change.node_name] += change.gpus
    return dict(totals)


# The stored pods holding GPUs of a watch cycle's Nodes: all of them on the Nodes summed, the
# changed ones on the Nodes moved (compiled once: console.statements).
_HELD = Statement(
    lambda cluster_id, summed, moved, uids: ObservedObject.objects.filter(
        Q(node_name__any_of=summed) | Q(node_name__any_of=moved, uid__any_of=uids),
        cluster_id=cluster_id,
        stream__in=POD_STREAMS,
        gpus__gt=0,
    ).values_list("stream", "uid", "node_name", "gpus"),
    int,
    list[str],
    list[str],
    list[str],
)


def _held(
    cluster_id: int, touched: Touched, changed: Mapping[tuple[str, str], Change], moved: set[str]
) -> list[tuple[str, str, str, int]]:
    """The stored pods that hold GPUs: all of them on the Nodes summed, the changed ones on the
    Nodes moved."""
    if touched.everything:
        rows = ObservedObject.objects.filter(
            cluster_id=cluster_id, stream__in=POD_STREAMS, gpus__gt=0
        )
        return list(rows.values_list("stream", "uid", "node_name", "gpus"))
    summed, uids = list(touched.nodes - moved), [uid for _stream, uid in changed]
    return _HELD.rows(cluster_id, summed, list(moved), uids)


def load(
    cluster_id: int, touched: Touched, changes: Sequence[Change], only: Sequence[str] = (),
    noted: Q | None = None,
) -> Snapshot:  # fmt: skip
    """The touched objects as stored (of the streams named in `only`, when given), with this
    cycle's changes laid over them, parsed. `noted` (a filter on ObservedObject) narrows the
    stored pods of the touched Jobs to those their Tasks' views need (rows.pods_of_note)
    besides the touched ones; None reads them all."""
    if not touched.everything and not (touched.jobs or touched.nodes or touched.addons):
        return Snapshot()
    selection = _selection(touched, changes, noted)
    rows = ObservedObject.objects.filter(selection, cluster_id=cluster_id)
    rows = rows.filter(stream__in=only) if only else rows
    values = rows.values_list("stream", "uid", "data")
    # A cluster's first cycle reads every object: in chunks, not all at once.
    found = values.iterator(2000) if touched.everything else values
    objects: dict[tuple[str, str], str | Change] = {
        (stream, uid): data for stream, uid, data in found
    }
    for change in changes:
        if touched.holds(change) and (not only or change.stream in only):
            objects[(change.stream, change.uid)] = change
    return _parsed(objects)


def _parsed(objects: dict[tuple[str, str], str | Change]) -> Snapshot:
    """Stored objects parsed from their JSON; changed ones as this cycle read them (None once
    deleted)."""
    lists: dict[str, list[Any]] = defaultdict(list)
    try:
        for (stream, _uid), value in objects.items():
            if isinstance(value, str):
                lists[stream].append(thaw(BY_NAME[stream].observation, value))
            elif value.data is not None:
                observation = value.observation
                if observation is None:
                    observation = thaw(BY_NAME[stream].observation, value.data)
                lists[stream].append(observation)
    except (AttributeError, TypeError, ValueError, IndexError, KeyError):
        raise ClusterUnreachable(
            "a stored object has an unexpected shape", "unexpected_shape"
        ) from None
    return Snapshot(
        statefulsets=lists["statefulsets"], batch_jobs=lists["jobs"], services=lists["services"],
        pods=lists["pods"], nodes=lists["nodes"],
        addons=[*lists["daemonsets"], *lists["deployments"]], addon_pods=lists["addon_pods"],
    )  # fmt: skip


def save(cluster_id: int, changes: Sequence[Change]) -> int:
    """Stores the changes (the last one of an object wins); returns the rows written. Applying
    the same changes twice leaves the same rows."""
    final = {(change.stream, change.uid): change for change in changes}
    gone: dict[str, list[str]] = defaultdict(list)
    for change in final.values():
        if change.data is None:
            gone[change.stream].append(change.uid)
    for stream, uids in gone.items():
        for start in range(0, len(uids), BATCH):
            chunk = uids[start : start + BATCH]
            ObservedObject.objects.filter(
                cluster_id=cluster_id, stream=stream, uid__any_of=chunk
            ).delete()
    rows = [
        (cluster_id, c.stream, c.uid, c.version, c.job_id, c.node_name, c.gpus, c.data)
        for c in final.values()
        if c.data is not None
    ]
    upsert(ObservedObject, KEY, STORED, rows)  # one statement (building instances costs more)
    return len(final)
