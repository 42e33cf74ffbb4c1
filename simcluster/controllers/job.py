"""batch/v1 Job controller: pods up to parallelism, success and failure counted through the
tracking finalizer, the backoff limit, and the 1.31+ terminal conditions."""

from __future__ import annotations

from typing import Any

from simcluster.clock import parse_rfc3339, rfc3339
from simcluster.controllers.base import Controller, PodView
from simcluster.defaults import admit_pod
from simcluster.deletion import DeleteOptions, delete_object, delete_pod
from simcluster.objects import condition, controller_ref, pod_from_template

Obj = dict[str, Any]
TRACKING = "batch.kubernetes.io/job-tracking"
BACKOFF_BASE = 10.0
BACKOFF_MAX = 360.0
BACKOFF_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
SUCCESS_MESSAGE = "Reached expected number of succeeded pods"
SUCCESS = ("CompletionsReached", SUCCESS_MESSAGE)


def _criteria_met(completions: int | None, succeeded: int, running: bool) -> bool:
    """With completions: that many successes. Without (a work queue): one success, none running."""
    if completions is not None:
        return succeeded >= completions
    return succeeded > 0 and not running


def finished(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )


def _set_condition(status: Obj, type_: str, reason: str, message: str, stamp: str) -> bool:
    conditions = status.setdefault("conditions", [])
    current = condition(conditions, type_)
    if current is not None and current.get("status") == "True":
        return False
    if current is not None:
        conditions.remove(current)
    conditions.append(
        {
            "type": type_,
            "status": "True",
            "lastProbeTime": stamp,
            "lastTransitionTime": stamp,
            "reason": reason,
            "message": message,
        }
    )
    return True


class JobController(Controller):
    resource = "jobs"
    component = "job-controller"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last_failure: dict[str, float] = {}

    def sync(self, job: Obj, now: float) -> None:
        if "deletionTimestamp" in job["metadata"]:
            return
        if finished(job):
            self._expire(job, now)
            return
        status: Obj = dict(job.get("status") or {})
        status.setdefault("startTime", rfc3339(now))
        pods = self.owned_pods(job)
        self._count_finished(job, status, pods, now)
        active = [p for p in pods if p.active]
        self._decide(job, status, active, now)
        conditions = status.get("conditions") or []
        if not condition(conditions, "FailureTarget") and not condition(
            conditions, "SuccessCriteriaMet"
        ):
            self._start_pods(job, status, len(active), now)
        self.write_status(job, self._status(job, status, self.owned_pods(job)))

    def _count_finished(self, job: Obj, status: Obj, pods: list[PodView], now: float) -> None:
        """Counts each finished pod once, the moment its tracking finalizer comes off."""
        for view in pods:
            if not view.terminal:
                continue
            pod = self.ctx.store.get("pods", view.key)
            if pod is None or TRACKING not in (pod["metadata"].get("finalizers") or []):
                continue
            field = "succeeded" if view.phase == "Succeeded" else "failed"
            status[field] = status.get(field, 0) + 1
            if field == "failed":
                self._last_failure[job["metadata"]["uid"]] = now
            pod["metadata"]["finalizers"] = [
                f for f in pod["metadata"]["finalizers"] if f != TRACKING
            ]
            self.ctx.store.update("pods", pod)

    def _decide(self, job: Obj, status: Obj, active: list[PodView], now: float) -> None:
        """Suspension first, then failure (backoff limit, deadline), then success."""
        if self._suspension(job, status, active, rfc3339(now)):
            return
        spec, stamp = job["spec"], rfc3339(now)
        completions, succeeded = spec.get("completions"), status.get("succeeded", 0)
        deadline = spec.get("activeDeadlineSeconds")
        ends_at = parse_rfc3339(status["startTime"]) + deadline if deadline is not None else None
        if status.get("failed", 0) + self._restarts(job, active) > spec.get("backoffLimit", 6):
            self._fail(job, status, active, "BackoffLimitExceeded", BACKOFF_MESSAGE, stamp)
        elif ends_at is not None and ends_at <= now:
            self._fail(job, status, active, "DeadlineExceeded", DEADLINE_MESSAGE, stamp)
        elif _criteria_met(completions, succeeded, bool(active)):
            if _set_condition(status, "SuccessCriteriaMet", *SUCCESS, stamp):
                for pod in active:
                    delete_pod(self.ctx, pod.key)
        elif ends_at is not None:
            self.requeue((job["metadata"]["namespace"], job["metadata"]["name"]), ends_at)

    def _suspension(self, job: Obj, status: Obj, active: list[PodView], stamp: str) -> bool:
        """spec.suspend: active pods go and the Suspended condition says so; resuming flips it."""
        if job["spec"].get("suspend"):
            if _set_condition(status, "Suspended", "JobSuspended", "Job suspended", stamp):
                for pod in active:
                    delete_pod(self.ctx, pod.key)
                self.event(job, "Normal", "Suspended", "Job suspended")
            return True
        suspended = condition(status.get("conditions") or [], "Suspended")
        if suspended is not None and suspended.get("status") == "True":
            resumed = {"status": "False", "reason": "JobResumed", "message": "Job resumed"}
            suspended.update({**resumed, "lastTransitionTime": stamp, "lastProbeTime": stamp})
            self.event(job, "Normal", "Resumed", "Job resumed")
        return False

    def _restarts(self, job: Obj, active: list[PodView]) -> int:
        """With restartPolicy OnFailure the kubelet restarts in place; restarts are failures."""
        if job["spec"]["template"]["spec"].get("restartPolicy") != "OnFailure":
            return 0
        total = 0
        for view in active:
            pod = self.ctx.store.get("pods", view.key)
            for container in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
                total += container.get("restartCount", 0)
        return total

    def _fail(
        self, job: Obj, status: Obj, active: list[PodView], reason: str, message: str, stamp: str
    ) -> None:
        if _set_condition(status, "FailureTarget", reason, message, stamp):
            for pod in active:
                delete_pod(self.ctx, pod.key)
            self.event(job, "Warning", reason, message)

    def _start_pods(self, job: Obj, status: Obj, active: int, now: float) -> None:
        spec = job["spec"]
        if spec.get("suspend"):
            return
        completions = spec.get("completions")
        wanted = spec.get("parallelism", 1)
        if completions is not None:
            wanted = min(wanted, completions - status.get("succeeded", 0))
        elif status.get("succeeded"):
            wanted = 0
        missing = wanted - active
        if missing <= 0:
            return
        ready_at = self._backoff_until(job, status)
        if ready_at > now:
            self.requeue((job["metadata"]["namespace"], job["metadata"]["name"]), ready_at)
            return
        for _ in range(missing):
            self._create(job)

    def _backoff_until(self, job: Obj, status: Obj) -> float:
        """Pod-creation back-off after failures: 10 s, 20 s, 40 s ... up to 6 min."""
        failed = status.get("failed", 0)
        last = self._last_failure.get(job["metadata"]["uid"])
        if not failed or last is None:
            return 0.0
        return last + min(BACKOFF_BASE * 2 ** (failed - 1), BACKOFF_MAX)

    def _create(self, job: Obj) -> None:
        meta = job["metadata"]
        name = f"{meta['name']}-{self.ctx.suffix()}"
        pod = pod_from_template(
            job["spec"]["template"], meta["namespace"], name, controller_ref("jobs", job), {}
        )
        pod["metadata"]["generateName"] = f"{meta['name']}-"
        pod["metadata"]["finalizers"] = [TRACKING]
        admit_pod(pod)
        if self.create_pod(job, pod):
            self.event(job, "Normal", "SuccessfulCreate", f"Created pod: {name}")

    def _status(self, job: Obj, status: Obj, pods: list[PodView]) -> Obj:
        """Counts from the pods, terminal conditions once nothing is left running."""
        active = [p for p in pods if p.active]
        terminating = sum(1 for p in pods if p.deleting and not p.terminal)
        stamp = self.ctx.stamp()
        conditions = status.get("conditions") or []
        if not active and not terminating:
            target = condition(conditions, "FailureTarget")
            if target is not None and _set_condition(
                status, "Failed", target["reason"], target["message"], stamp
            ):
                self._last_failure.pop(job["metadata"]["uid"], None)
            elif condition(conditions, "SuccessCriteriaMet") and _set_condition(
                status, "Complete", "CompletionsReached", SUCCESS_MESSAGE, stamp
            ):
                status["completionTime"] = stamp
                self.event(job, "Normal", "Completed", "Job completed")
        ordered: Obj = {
            k: status[k] for k in ("conditions", "startTime", "completionTime") if status.get(k)
        }
        if active:
            ordered["active"] = len(active)
        for field in ("succeeded", "failed"):
            if status.get(field):
                ordered[field] = status[field]
        ordered["terminating"] = terminating
        ordered["uncountedTerminatedPods"] = {}
        ordered["ready"] = sum(1 for p in active if p.ready)
        return ordered

    def _expire(self, job: Obj, now: float) -> None:
        """ttlSecondsAfterFinished: the finished Job (and, in the background, its pods) goes."""
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        status = job.get("status") or {}
        finished_at = status.get("completionTime") or next(
            (
                c["lastTransitionTime"]
                for c in status.get("conditions") or []
                if c["type"] == "Failed"
            ),
            None,
        )
        if ttl is None or finished_at is None:
            return
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        due = parse_rfc3339(finished_at) + ttl
        if due > now:
            self.requeue(key, due)
            return
        delete_object(self.ctx, "jobs", key, DeleteOptions(propagation="Background"))
