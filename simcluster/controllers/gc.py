"""The garbage collector (dependents of deleted owners, foreground and orphan finalizers) and the
namespace controller (a deleted namespace empties itself before it goes)."""

from __future__ import annotations

from typing import Any

from simcluster.clock import UNLIMITED, Budget
from simcluster.context import Context
from simcluster.deletion import FOREGROUND, ORPHAN, DeleteOptions, delete_object
from simcluster.resources import RESOURCES
from simcluster.store import Key, Version

Obj = dict[str, Any]
JOB_TRACKING = "batch.kubernetes.io/job-tracking"


class GarbageCollector:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.removed_owners: set[str] = set()
        self.finalizing: set[tuple[str, Key]] = set()

    def on_change(self, resource: str, key: Key, old: Version | None, new: Version | None) -> None:
        if new is None and old is not None:
            self.removed_owners.add(old.facts["_uid"])
            for owner in old.facts["_owners"]:
                found = self.ctx.store.find_uid(owner)
                if found is not None:
                    self.finalizing.add(found)
        elif new is not None and new.facts["_deleting"]:
            self.finalizing.add((resource, key))

    def run(self, now: float, budget: Budget = UNLIMITED) -> bool:
        busy = bool(self.removed_owners or self.finalizing)
        owners, self.removed_owners = self.removed_owners, set()
        for uid in sorted(owners):
            self._collect_dependents(uid)
        finalizing, self.finalizing = self.finalizing, set()
        for resource, key in sorted(finalizing):
            self._finalize(resource, key)
        return busy

    def _collect_dependents(self, uid: str) -> None:
        """Dependents whose every owner is gone are deleted (in the background)."""
        for resource, key in self.ctx.store.dependents(uid):
            version = self.ctx.store.get_version(resource, key)
            if version is None:
                continue
            if all(self.ctx.store.find_uid(owner) is None for owner in version.facts["_owners"]):
                self._delete(resource, key)

    def _delete(self, resource: str, key: Key) -> None:
        """Deletes a dependent; a Job pod loses its tracking finalizer, which no Job will remove."""
        obj = self.ctx.store.get(resource, key)
        if obj is None:
            return
        finalizers = obj["metadata"].get("finalizers") or []
        if JOB_TRACKING in finalizers:
            obj["metadata"]["finalizers"] = [f for f in finalizers if f != JOB_TRACKING]
            obj = self.ctx.store.update(resource, obj)
        version = self.ctx.store.get_version(resource, key)
        if version is not None and not version.facts["_deleting"]:
            delete_object(self.ctx, resource, key, DeleteOptions(propagation="Background"))

    def _finalize(self, resource: str, key: Key) -> None:
        obj = self.ctx.store.get(resource, key)
        if obj is None or "deletionTimestamp" not in obj["metadata"]:
            return
        finalizers = list(obj["metadata"].get("finalizers") or [])
        uid = obj["metadata"]["uid"]
        if ORPHAN in finalizers:
            self._orphan(uid)
            finalizers.remove(ORPHAN)
        elif FOREGROUND in finalizers:
            for dependent_resource, dependent_key in self.ctx.store.dependents(uid):
                self._delete(dependent_resource, dependent_key)
            if self.ctx.store.dependents(uid):
                return
            finalizers.remove(FOREGROUND)
        else:
            return
        obj["metadata"]["finalizers"] = finalizers
        self.ctx.store.update(resource, obj)

    def _orphan(self, uid: str) -> None:
        for resource, key in self.ctx.store.dependents(uid):
            dependent = self.ctx.store.get(resource, key)
            if dependent is None:
                continue
            meta = dependent["metadata"]
            references = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != uid]
            if references:
                meta["ownerReferences"] = references
            else:
                meta.pop("ownerReferences", None)
            if JOB_TRACKING in (meta.get("finalizers") or []):
                meta["finalizers"] = [f for f in meta["finalizers"] if f != JOB_TRACKING]
            self.ctx.store.update(resource, dependent)


class NamespaceController:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.terminating: set[str] = set()

    def on_change(self, resource: str, key: Key, old: Version | None, new: Version | None) -> None:
        if resource == "namespaces" and new is not None and new.facts["_deleting"]:
            self.terminating.add(key[1])

    def run(self, now: float, budget: Budget = UNLIMITED) -> bool:
        if not self.terminating:
            return False
        for namespace in sorted(self.terminating):
            if self._empty(namespace):
                self.ctx.store.remove("namespaces", ("", namespace))
                self.terminating.discard(namespace)
        return True

    def _empty(self, namespace: str) -> bool:
        """Deletes what is left (pods gracefully); true once nothing is left at all."""
        empty = True
        for resource in RESOURCES.values():
            if not resource.namespaced:
                continue
            for key, version in list(self.ctx.store.versions(resource.plural, namespace)):
                empty = False
                if not version.facts["_deleting"]:
                    options = DeleteOptions(propagation="Background")
                    delete_object(self.ctx, resource.plural, key, options)
        return empty
