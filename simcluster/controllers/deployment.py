"""Deployment controller: a ReplicaSet per template, rolling (or recreate) updates between them,
and the Available / Progressing conditions with the progress deadline."""

from __future__ import annotations

from typing import Any

from simcluster import errors
from simcluster.clock import parse_rfc3339, rfc3339
from simcluster.controllers.base import Controller
from simcluster.deletion import DeleteOptions, delete_object
from simcluster.objects import condition, controller_ref, deep_copy, percent_or_int, template_hash
from simcluster.resources import RESOURCES

Obj = dict[str, Any]
REVISION = "deployment.kubernetes.io/revision"
COMPLETE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
AVAILABLE = (
    "Available",
    "True",
    "MinimumReplicasAvailable",
    "Deployment has minimum availability.",
)
UNAVAILABLE = (
    "Available",
    "False",
    "MinimumReplicasUnavailable",
    "Deployment does not have minimum availability.",
)


def rolling_limits(d: Obj) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) against spec.replicas; both zero would mean one unavailable."""
    replicas = d["spec"].get("replicas", 1)
    strategy = d["spec"].get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0, replicas
    rolling = strategy.get("rollingUpdate") or {}
    surge = percent_or_int(rolling.get("maxSurge", "25%"), replicas, True)
    unavailable = percent_or_int(rolling.get("maxUnavailable", "25%"), replicas, False)
    return surge, 1 if surge == 0 and unavailable == 0 else unavailable


def set_condition(status: Obj, wanted: tuple[str, str, str, str], stamp: str) -> None:
    """SetDeploymentCondition: unchanged status+reason is left alone; a changed one moves last."""
    type_, state, reason, message = wanted
    conditions = status.setdefault("conditions", [])
    current = condition(conditions, type_)
    if current is not None and current["status"] == state and current.get("reason") == reason:
        return
    same_status = current is not None and current["status"] == state
    transition = current["lastTransitionTime"] if current is not None and same_status else stamp
    conditions[:] = [c for c in conditions if c["type"] != type_]
    entry = {
        "type": type_,
        "status": state,
        "lastUpdateTime": stamp,
        "lastTransitionTime": transition,
    }
    conditions.append({**entry, "reason": reason, "message": message})


def _replicas(rs: Obj) -> int:
    return int(rs["spec"].get("replicas", 0))


def _status_count(rs: Obj, field: str) -> int:
    return int((rs.get("status") or {}).get(field, 0))


class DeploymentController(Controller):
    resource = "deployments"
    dependents = ("replicasets",)
    component = "deployment-controller"

    def sync(self, d: Obj, now: float) -> None:
        if "deletionTimestamp" in d["metadata"]:
            return
        replica_sets = [
            self.ctx.store.get("replicasets", key) for key, _ in self.owned(d, "replicasets")
        ]
        owned = sorted(
            (rs for rs in replica_sets if rs is not None),
            key=lambda rs: rs["metadata"]["creationTimestamp"],
        )
        hash_ = template_hash(d["spec"]["template"])
        new = next(
            (
                rs
                for rs in owned
                if rs["metadata"].get("labels", {}).get("pod-template-hash") == hash_
            ),
            None,
        )
        old = [rs for rs in owned if rs is not new]
        status = deep_copy(d.get("status") or {})
        if new is None:
            new = self._create_replica_set(d, hash_, old, status, now)
            if new is None:
                return
        self._annotate_revision(d, new)
        if (d["spec"].get("strategy") or {}).get("type") == "Recreate":
            self._recreate(d, new, old)
        else:
            self._rolling(d, new, old)
        self._clean_history(d, old)
        self._write(d, new, old, status, now)

    # Replica sets ----------------------------------------------------------------------------

    def _create_replica_set(
        self, d: Obj, hash_: str, old: list[Obj], status: Obj, now: float
    ) -> Obj | None:
        manifest = replica_set_manifest(d, hash_, old)
        name = manifest["metadata"]["name"]
        try:
            created = self.writer.create(
                RESOURCES["replicasets"], d["metadata"]["namespace"], manifest
            )
        except errors.ApiError as error:
            message = f"Failed to create new replica set {name!r}: {error.message}"
            self.event(d, "Warning", "FailedCreate", message)
            return None
        created_condition = (
            "Progressing",
            "True",
            "NewReplicaSetCreated",
            f'Created new replica set "{name}"',
        )
        set_condition(status, created_condition, rfc3339(now))
        return created

    def _annotate_revision(self, d: Obj, new: Obj) -> None:
        revision = new["metadata"].get("annotations", {}).get(REVISION, "1")
        annotations = d["metadata"].setdefault("annotations", {})
        if annotations.get(REVISION) != revision:
            annotations[REVISION] = revision
            self.ctx.store.update("deployments", d)

    def _scale(self, d: Obj, rs: Obj, replicas: int) -> None:
        before = _replicas(rs)
        if before == replicas:
            return
        rs["spec"]["replicas"] = replicas
        rs["metadata"].setdefault("annotations", {})[
            "deployment.kubernetes.io/desired-replicas"
        ] = str(d["spec"].get("replicas", 1))
        self.ctx.store.update("replicasets", rs)
        direction = "up" if replicas > before else "down"
        self.event(
            d,
            "Normal",
            "ScalingReplicaSet",
            f"Scaled {direction} replica set {rs['metadata']['name']} from {before} to {replicas}",
        )

    def _rolling(self, d: Obj, new: Obj, old: list[Obj]) -> None:
        """reconcileNewReplicaSet then reconcileOldReplicaSets, within maxSurge/maxUnavailable."""
        replicas = d["spec"].get("replicas", 1)
        surge, unavailable = rolling_limits(d)
        if _replicas(new) > replicas:
            self._scale(d, new, replicas)
        elif _replicas(new) < replicas:
            room = replicas + surge - sum(_replicas(rs) for rs in [new, *old])
            if room > 0:
                self._scale(d, new, _replicas(new) + min(room, replicas - _replicas(new)))
        if not any(_replicas(rs) for rs in old):
            return
        min_available = replicas - unavailable
        new_unavailable = max(0, _replicas(new) - _status_count(new, "availableReplicas"))
        budget = sum(_replicas(rs) for rs in [new, *old]) - min_available - new_unavailable
        for rs in old:
            unhealthy = _replicas(rs) - _status_count(rs, "availableReplicas")
            if budget <= 0 or unhealthy <= 0:
                continue
            down = min(budget, unhealthy)
            self._scale(d, rs, _replicas(rs) - down)
            budget -= down
        available = sum(_status_count(rs, "availableReplicas") for rs in [new, *old])
        surplus = available - min_available
        for rs in old:
            if surplus <= 0:
                break
            down = min(_replicas(rs), surplus)
            if down:
                self._scale(d, rs, _replicas(rs) - down)
                surplus -= down

    def _recreate(self, d: Obj, new: Obj, old: list[Obj]) -> None:
        for rs in old:
            self._scale(d, rs, 0)
        if any(self.owned_pods(rs) for rs in old):
            return
        self._scale(d, new, d["spec"].get("replicas", 1))

    def _clean_history(self, d: Obj, old: list[Obj]) -> None:
        limit = d["spec"].get("revisionHistoryLimit", 10)
        idle = [rs for rs in old if not _replicas(rs) and not _status_count(rs, "replicas")]
        for rs in idle[: max(0, len(idle) - limit)]:
            key = (rs["metadata"]["namespace"], rs["metadata"]["name"])
            delete_object(self.ctx, "replicasets", key, DeleteOptions(propagation="Background"))

    # Status ----------------------------------------------------------------------------------

    def _write(self, d: Obj, new: Obj, old: list[Obj], status: Obj, now: float) -> None:
        """calculateStatus and syncRolloutStatus, written only when something changed."""
        previous = d.get("status") or {}
        fresh: Obj = {"observedGeneration": d["metadata"].get("generation", 1)}
        fresh.update({k: v for k, v in _counts(new, old).items() if v})
        fresh["conditions"] = status.get("conditions") or []
        _, unavailable_allowed = rolling_limits(d)
        enough = (
            fresh.get("availableReplicas", 0) >= d["spec"].get("replicas", 1) - unavailable_allowed
        )
        set_condition(fresh, AVAILABLE if enough else UNAVAILABLE, rfc3339(now))
        self._progress(d, new["metadata"]["name"], previous, fresh, now)
        d["status"] = previous
        self.write_status(d, fresh)

    def _progress(self, d: Obj, rs_name: str, previous: Obj, fresh: Obj, now: float) -> None:
        """Complete, progressing (lastUpdateTime refreshed) or timed out past the deadline."""
        deadline = d["spec"].get("progressDeadlineSeconds")
        if deadline is None:
            fresh["conditions"] = [c for c in fresh["conditions"] if c["type"] != "Progressing"]
            return
        current = condition(fresh["conditions"], "Progressing")
        reason = current.get("reason") if current is not None else None
        stamp = rfc3339(now)
        if fresh.get("replicas", 0) == fresh.get("updatedReplicas", 0) and reason == COMPLETE:
            return
        replicas = d["spec"].get("replicas", 1)
        if all(
            fresh.get(f, 0) == replicas
            for f in ("updatedReplicas", "replicas", "availableReplicas")
        ):
            set_condition(
                fresh,
                (
                    "Progressing",
                    "True",
                    COMPLETE,
                    f'ReplicaSet "{rs_name}" has successfully progressed.',
                ),
                stamp,
            )
        elif _progressed(previous, fresh):
            _refresh_progressing(fresh, current, rs_name, stamp)
        elif _timed_out(current, deadline, now):
            set_condition(
                fresh,
                (
                    "Progressing",
                    "False",
                    TIMED_OUT,
                    f'ReplicaSet "{rs_name}" has timed out progressing.',
                ),
                stamp,
            )
        self._requeue_deadline(d, condition(fresh["conditions"], "Progressing"), deadline)

    def _requeue_deadline(self, d: Obj, progressing: Obj | None, deadline: int) -> None:
        """Wakes the deployment just after its deadline, in case nothing else does."""
        if progressing is not None and progressing.get("reason") in (
            "ReplicaSetUpdated",
            "NewReplicaSetCreated",
        ):
            due = parse_rfc3339(progressing["lastUpdateTime"]) + deadline + 1
            self.requeue((d["metadata"]["namespace"], d["metadata"]["name"]), due)


def replica_set_manifest(d: Obj, hash_: str, old: list[Obj]) -> Obj:
    """The ReplicaSet for the deployment's current template, labelled with its hash."""
    spec = d["spec"]
    surge, _ = rolling_limits(d)
    revision = 1 + max(
        (int(rs["metadata"].get("annotations", {}).get(REVISION, "0")) for rs in old), default=0
    )
    template = deep_copy(spec["template"])
    template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = hash_
    selector = deep_copy(spec["selector"])
    selector.setdefault("matchLabels", {})["pod-template-hash"] = hash_
    annotations = {
        "deployment.kubernetes.io/desired-replicas": str(spec.get("replicas", 1)),
        "deployment.kubernetes.io/max-replicas": str(spec.get("replicas", 1) + surge),
        REVISION: str(revision),
    }
    rs_spec: Obj = {"replicas": 0, "selector": selector, "template": template}
    if spec.get("minReadySeconds"):
        rs_spec["minReadySeconds"] = spec["minReadySeconds"]
    metadata = {
        "name": f"{d['metadata']['name']}-{hash_}",
        "labels": dict(template["metadata"]["labels"]),
        "annotations": annotations,
        "ownerReferences": [controller_ref("deployments", d)],
    }
    return {"metadata": metadata, "spec": rs_spec}


def _counts(new: Obj, old: list[Obj]) -> dict[str, int]:
    every = [new, *old]
    available = sum(_status_count(rs, "availableReplicas") for rs in every)
    return {
        "replicas": sum(_status_count(rs, "replicas") for rs in every),
        "updatedReplicas": _status_count(new, "replicas"),
        "readyReplicas": sum(_status_count(rs, "readyReplicas") for rs in every),
        "availableReplicas": available,
        "unavailableReplicas": max(0, sum(_replicas(rs) for rs in every) - available),
    }


def _refresh_progressing(fresh: Obj, current: Obj | None, rs_name: str, stamp: str) -> None:
    """Progress seen: a new lastUpdateTime even with an unchanged reason (unlike set_condition)."""
    kept = current is not None and current["status"] == "True"
    transition = current["lastTransitionTime"] if current is not None and kept else stamp
    fresh["conditions"] = [c for c in fresh["conditions"] if c["type"] != "Progressing"]
    message = f'ReplicaSet "{rs_name}" is progressing.'
    fresh["conditions"].append(
        {
            "type": "Progressing",
            "status": "True",
            "lastUpdateTime": stamp,
            "lastTransitionTime": transition,
            "reason": "ReplicaSetUpdated",
            "message": message,
        }
    )


def _timed_out(current: Obj | None, deadline: int, now: float) -> bool:
    """DeploymentTimedOut: a rollout that has not moved for progressDeadlineSeconds."""
    if current is None or current.get("reason") in (COMPLETE, TIMED_OUT):
        return False
    return parse_rfc3339(current["lastUpdateTime"]) + deadline < now


def _progressed(previous: Obj, fresh: Obj) -> bool:
    def old_replicas(status: Obj) -> int:
        return int(status.get("replicas", 0)) - int(status.get("updatedReplicas", 0))

    return (
        fresh.get("updatedReplicas", 0) > previous.get("updatedReplicas", 0)
        or old_replicas(fresh) < old_replicas(previous)
        or fresh.get("readyReplicas", 0) > previous.get("readyReplicas", 0)
        or fresh.get("availableReplicas", 0) > previous.get("availableReplicas", 0)
    )
