"""The kubelets of every simulated node: they run bound pods and write their status.

Work is driven by pod changes (bound, marked for deletion) and by per-pod timers for the next
container stage, so pods that are simply running cost nothing per tick.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from simcluster import errors
from simcluster.behaviour import Instance, Kind, behaviour_of, log_lines
from simcluster.clock import MIN_BATCH, UNLIMITED, Budget, parse_rfc3339, rfc3339, rfc3339_nano
from simcluster.containers import ContainerDriver
from simcluster.context import Context, object_reference
from simcluster.downward import environment
from simcluster.nodeinfo import NodeRegistry, SimNode
from simcluster.runtime import ContainerRuntime, PodRuntime, Stage, build_status
from simcluster.signal_poster import SignalPoster
from simcluster.store import Key, Version
from simcluster.trainer import Trainer
from simcluster.volumes import Files, mounts_of

Obj = dict[str, Any]
JOB_LABEL = "trainyard.io/job"  # the console's label on every pod of a Job (console/kube)


# The stages of a container waiting on its image.
PULL_WAITING = frozenset({Stage.PULLING, Stage.PULL_ERROR, Stage.PULL_BACKOFF})


class Kubelet:
    def __init__(self, ctx: Context, nodes: NodeRegistry, signals: SignalPoster) -> None:
        self.ctx = ctx
        self.nodes = nodes
        self.pods: dict[str, PodRuntime] = {}
        self.dirty: set[Key] = set()
        self._timers: list[tuple[float, int, str]] = []
        self._sequence = 0
        self._writing = False
        self.files = Files()
        trainer = Trainer(signals, self._alive_ray_nodes, self.files)
        self.driver = ContainerDriver(self._emit, self._head_reachable, self.ctx.hex_id, trainer)

    # Feeds -----------------------------------------------------------------------------------

    def on_change(self, resource: str, key: Key, old: Version | None, new: Version | None) -> None:
        if resource != "pods" or self._writing:
            return
        if new is None and old is not None:
            self._forget(old.facts["_uid"])
        elif new is not None and new.facts["spec.nodeName"]:
            self.dirty.add(key)

    @contextmanager
    def ignoring_changes(self) -> Iterator[None]:
        """For bulk loads of pods that already carry a kubelet-written status."""
        self._writing = True
        try:
            yield
        finally:
            self._writing = False

    def resync_node(self, node: str) -> None:
        self.dirty.update(self.ctx.store.pods_on_node(node))

    def run(self, now: float, budget: Budget = UNLIMITED) -> bool:
        keys = set(self.dirty)
        self.dirty.clear()
        while self._timers and self._timers[0][0] <= now:
            _, _, uid = heapq.heappop(self._timers)
            runtime = self.pods.get(uid)
            if runtime is not None:
                runtime.queued_at = math.inf
                keys.add(runtime.key)
        ordered = sorted(keys)
        for index, key in enumerate(ordered):
            if index >= MIN_BATCH and budget.exhausted():
                self.dirty.update(ordered[index:])
                break
            self.sync(key, now)
        return bool(keys)

    # Sync ------------------------------------------------------------------------------------

    def sync(self, key: Key, now: float) -> None:
        pod = self.ctx.store.get("pods", key)
        if pod is None:
            return
        node = self.nodes.get(pod["spec"].get("nodeName", ""))
        if node is None or not node.online:
            return
        runtime = self._runtime_for(pod, node, now)
        self._new_images(runtime, pod, now)
        if "deletionTimestamp" in pod["metadata"] and not runtime.deleting:
            runtime.stop_deadline = parse_rfc3339(pod["metadata"]["deletionTimestamp"])
            self.driver.begin_stop(runtime, now)
        for container in runtime.containers:
            self.driver.replay(runtime, container, node, now)
        self._settle_phase(runtime, node)
        self._publish(runtime, pod, node, now)

    def _new_images(self, runtime: PodRuntime, pod: Obj, now: float) -> None:
        """A pod's image changed (the one update a pod allows) on a container still waiting on
        its pull: the next pull, at once, is of the new image, outside the old image's back-off
        (the kubelet's back-off is per image). A container already running keeps its image
        here."""
        wanted = {c["name"]: c["image"] for c in pod["spec"]["containers"]}
        for container in runtime.containers:
            image = wanted.get(container.name, container.image)
            if image != container.image and container.stage in PULL_WAITING:
                container.image, container.pull_backoff = image, 0.0
                container.stage, container.until = Stage.PULL_BACKOFF, now

    def _runtime_for(self, pod: Obj, node: SimNode, now: float) -> PodRuntime:
        uid = pod["metadata"]["uid"]
        runtime = self.pods.get(uid)
        if runtime is None:
            runtime = self._admit(pod, node, now)
            self.pods[uid] = runtime
        return runtime

    def _admit(self, pod: Obj, node: SimNode, now: float) -> PodRuntime:
        meta, spec = pod["metadata"], pod["spec"]
        containers = []
        for c in spec["containers"]:
            env = environment(pod, c)
            containers.append(
                ContainerRuntime(
                    c["name"],
                    c["image"],
                    c.get("imagePullPolicy", "IfNotPresent"),
                    behaviour_of(c, env),
                    until=now + 1.0,
                    env=env,
                    mounts=mounts_of(pod, c, self._claim_volume),
                )
            )
        runtime = PodRuntime(
            meta["uid"],
            meta["namespace"],
            meta["name"],
            node.name,
            spec.get("restartPolicy", "Always"),
            containers,
            now,
            node.internal_ip,
        )
        status = pod.get("status") or {}
        if status.get("containerStatuses"):
            self._adopt(runtime, status, node)
        return runtime

    def _adopt(self, runtime: PodRuntime, status: Obj, node: SimNode) -> None:
        """Takes over a pod whose status was written elsewhere (bulk-loaded pods)."""
        runtime.started_at = parse_rfc3339(status.get("startTime") or "1970-01-01T00:00:00Z")
        runtime.pod_ip = status.get("podIP", "")
        runtime.sandbox_ready = bool(runtime.pod_ip)
        if runtime.pod_ip:
            node.used_ips.add(runtime.pod_ip)
        if status.get("phase") in ("Succeeded", "Failed"):
            runtime.terminal_phase = status["phase"]
        by_name = {s["name"]: s for s in status["containerStatuses"]}
        for container in runtime.containers:
            reported = by_name.get(container.name) or {}
            running = (reported.get("state") or {}).get("running")
            container.restart_count = reported.get("restartCount", 0)
            container.image_id, container.resolved_image = (
                reported.get("imageID", ""),
                reported.get("image", ""),
            )
            if running:
                started = parse_rfc3339(running["startedAt"])
                container.instances = [
                    Instance(reported.get("containerID", ""), started, runtime.pod_ip)
                ]
                container.stage, container.until = (
                    Stage.RUNNING,
                    started + container.behaviour.seconds,
                )
            elif runtime.terminal_phase:
                container.stage, container.until = Stage.DONE, math.inf

    def _settle_phase(self, runtime: PodRuntime, node: SimNode) -> None:
        """Once a pod that will not restart has finished, its phase is final and its IP freed."""
        if runtime.terminal_phase or runtime.restart_policy == "Always" or not runtime.finished():
            return
        codes = [c.current.exit_code if c.current else 1 for c in runtime.containers]
        runtime.terminal_phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
        node.release_ip(runtime.pod_ip)

    def _publish(self, runtime: PodRuntime, pod: Obj, node: SimNode, now: float) -> None:
        if runtime.deleting and runtime.finished():
            if not runtime.terminal_phase:
                codes = [c.current.exit_code if c.current else 137 for c in runtime.containers]
                runtime.terminal_phase = (
                    "Succeeded" if all(code == 0 for code in codes) else "Failed"
                )
            pod["status"] = build_status(runtime, pod.get("status") or {}, now)
            pod["metadata"]["deletionGracePeriodSeconds"] = 0
            self._write(pod)
            node.release_ip(runtime.pod_ip)
            self._forget(runtime.uid)
            return
        status = build_status(runtime, pod.get("status") or {}, now)
        if status != pod.get("status"):
            pod["status"] = status
            self._write(pod)
        self._schedule(runtime)

    def _write(self, pod: Obj) -> None:
        self._writing = True
        try:
            self.ctx.store.update("pods", pod)
        finally:
            self._writing = False

    def _schedule(self, runtime: PodRuntime) -> None:
        wake = runtime.next_event()
        if wake < runtime.queued_at:
            runtime.queued_at = wake
            self._sequence += 1
            heapq.heappush(self._timers, (wake, self._sequence, runtime.uid))

    def _forget(self, uid: str) -> None:
        self.files.forget_pod(uid)
        runtime = self.pods.pop(uid, None)
        node = self.nodes.get(runtime.node) if runtime else None
        if runtime is not None and node is not None and not runtime.terminal_phase:
            node.release_ip(runtime.pod_ip)

    # Collaborators ---------------------------------------------------------------------------

    def _emit(
        self,
        runtime: PodRuntime,
        container: ContainerRuntime | None,
        type_: str,
        reason: str,
        message: str,
    ) -> None:
        pod = {
            "metadata": {"name": runtime.name, "namespace": runtime.namespace, "uid": runtime.uid}
        }
        field_path = f"spec.containers{{{container.name}}}" if container else ""
        involved = object_reference("pods", pod, field_path)
        self.ctx.events.record(involved, type_, reason, message, "kubelet", runtime.node)

    def _claim_volume(self, namespace: str, claim: str) -> str | None:
        """The volume a claim is bound to (the scheduler placed the pod only once it was)."""
        found = self.ctx.store.get("persistentvolumeclaims", (namespace, claim))
        return (found or {}).get("spec", {}).get("volumeName") or None

    def _head_reachable(self, runtime: PodRuntime, host: str) -> bool:
        """A Ray head is reachable when a Running, Ready pod answers to the host name."""
        labels = host.split(".")
        namespace = (
            labels[2]
            if len(labels) > 2 and self.ctx.store.get_version("namespaces", ("", labels[2]))
            else runtime.namespace
        )
        for key, version in self.ctx.store.versions("pods", namespace):
            facts = version.facts
            named = facts["_hostname"] == labels[0] and (
                len(labels) < 2 or facts["_subdomain"] == labels[1]
            )
            matched = named or key[1].startswith(labels[0]) or facts["status.podIP"] == host
            if (
                matched
                and key != runtime.key
                and facts["status.phase"] == "Running"
                and facts["_ready"]
            ):
                return True
        return False

    def _alive_ray_nodes(self, runtime: PodRuntime) -> int:
        """A `sim train` head's Ray cluster: itself, and the Running, Ready pods of the same Job
        (its trainyard.io/job label) whose `sim ray-worker` container has joined it."""
        own = self.ctx.store.get_version("pods", runtime.key)
        job = own.labels.get(JOB_LABEL) if own is not None else None
        if not job:
            return 1
        alive = 1
        for key, version in self.ctx.store.versions("pods", runtime.namespace):
            facts = version.facts
            if key == runtime.key or version.labels.get(JOB_LABEL) != job or facts["_deleting"]:
                continue
            worker = self.pods.get(facts["_uid"])
            if worker is not None and facts["status.phase"] == "Running" and facts["_ready"]:
                alive += any(_joined_ray(c) for c in worker.containers)
        return alive

    # Control surface -------------------------------------------------------------------------

    def _placed(
        self, key: Key, now: float
    ) -> tuple[dict[str, Any], PodRuntime | None, SimNode | None]:
        """A pod brought up to `now`, its runtime here and its node (None where there is none);
        404 for a pod that does not exist."""
        pod = self.ctx.store.get("pods", key)
        if pod is None:
            raise errors.not_found("pods", "", key[1])
        self.sync(key, now)
        return (
            pod,
            self.pods.get(pod["metadata"]["uid"]),
            self.nodes.get(pod["spec"].get("nodeName", "")),
        )

    def kill(self, key: Key, container_name: str | None, now: float) -> list[str]:
        """Kills running containers as an outside SIGKILL would: exit 137, reason Error."""
        _pod, runtime, node = self._placed(key, now)
        if runtime is None or node is None or not node.online:
            return []
        killed = []
        for container in runtime.containers:
            if container.stage is Stage.RUNNING and container_name in (None, container.name):
                self.driver.exit(runtime, container, now, 137, "Error", "killed")
                killed.append(container.name)
        fresh = self.ctx.store.get("pods", key)
        if fresh is not None:
            self._settle_phase(runtime, node)
            self._publish(runtime, fresh, node, now)
        return killed

    def evict(self, key: Key, now: float) -> bool:
        """The kubelet's node-pressure eviction, as KUBERNETES-FACTS has it: the containers are
        killed and not restarted (terminated, reason Error), the pod turns Failed with
        `status.reason: Evicted` and the node's words in `status.message`, a DisruptionTarget
        condition (TerminationByKubelet), and a Warning event Evicted. False when the pod has
        no running runtime here."""
        pod, runtime, node = self._placed(key, now)
        if runtime is None or node is None or runtime.terminal_phase:
            return False
        for container in runtime.containers:
            instance = container.current
            if container.stage is Stage.RUNNING and instance is not None:
                instance.finished_at, instance.exit_code = now, 137
                instance.reason, instance.cause = "Error", "evicted"
            container.stage, container.until = Stage.DONE, math.inf
        runtime.terminal_phase = "Failed"
        node.release_ip(runtime.pod_ip)
        name = runtime.containers[0].name if runtime.containers else "main"
        message = (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
            f"87364Ki. Container {name} was using 1200Mi, request is 1Gi, has larger "
            "consumption of memory. "
        )
        fresh = self.ctx.store.get("pods", key) or pod
        status = fresh.setdefault("status", {})
        status["reason"], status["message"] = "Evicted", message
        conditions = status.setdefault("conditions", [])
        conditions[:] = [c for c in conditions if c.get("type") != "DisruptionTarget"]
        conditions.append({
            "type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
            "lastTransitionTime": rfc3339(now), "reason": "TerminationByKubelet",
            "message": message,
        })  # fmt: skip
        self._emit(runtime, None, "Warning", "Evicted", message)
        self._publish(runtime, fresh, node, now)
        return True

    def read_log(self, pod: Obj, query: Mapping[str, str]) -> str:
        """The `log` subresource, with the kubelet's refusals for containers that never ran."""
        name, spec = pod["metadata"]["name"], pod["spec"]
        container_name = self._log_container(name, spec, query.get("container", ""))
        node = self.nodes.get(spec.get("nodeName", ""))
        if node is None:
            return ""
        if not node.online:
            url = f"https://{node.internal_ip}:10250/containerLogs/{pod['metadata']['namespace']}/{name}/{container_name}"
            raise errors.ApiError(
                500,
                "InternalError",
                f'Get "{url}": dial tcp {node.internal_ip}:10250: connect: no route to host',
            )
        now = self.ctx.now()
        runtime = self._runtime_for(pod, node, now)
        container = next(c for c in runtime.containers if c.name == container_name)
        instance = self._log_instance(name, container, query.get("previous") in ("true", "1"))
        return _format_log(container, instance, now, query)

    def _log_container(self, pod_name: str, spec: Obj, wanted: str) -> str:
        names = [c["name"] for c in spec.get("containers") or []]
        if wanted:
            if wanted not in names:
                raise errors.bad_request(f"container {wanted} is not valid for pod {pod_name}")
            return wanted
        if len(names) != 1:
            raise errors.bad_request(
                f"a container name must be specified for pod {pod_name}, "
                f"choose one of: [{' '.join(names)}]"
            )
        return names[0]

    def _log_instance(self, pod_name: str, container: ContainerRuntime, previous: bool) -> Instance:
        if previous:
            earlier = (
                container.current
                if container.stage is Stage.CRASH_BACKOFF
                else container.last_terminated
            )
            if earlier is None:
                raise errors.bad_request(
                    f'previous terminated container "{container.name}" '
                    f'in pod "{pod_name}" not found'
                )
            return earlier
        if container.current is not None:
            return container.current
        waiting = {
            Stage.PULL_ERROR: "image can't be pulled",
            Stage.PULL_BACKOFF: "trying and failing to pull image",
        }.get(container.stage, "ContainerCreating")
        raise errors.bad_request(
            f'container "{container.name}" in pod "{pod_name}" is waiting to start: {waiting}'
        )


def _joined_ray(container: ContainerRuntime) -> bool:
    """A `sim ray-worker` is a Ray node once its first check found the head (3 s after it starts,
    when it prints "Connected to Ray cluster"), until its container stops."""
    instance = container.current
    return (
        container.behaviour.kind is Kind.RAY_WORKER
        and container.stage is Stage.RUNNING
        and instance is not None
        and bool(instance.notes)
    )


def _format_log(
    container: ContainerRuntime, instance: Instance, now: float, query: Mapping[str, str]
) -> str:
    tail = int(query["tailLines"]) if query.get("tailLines") else None
    lines = log_lines(container.behaviour, instance, now, tail)
    if query.get("sinceSeconds"):
        since = now - int(query["sinceSeconds"])
        lines = [line for line in lines if line[0] >= since]
    elif query.get("sinceTime"):
        since = parse_rfc3339(query["sinceTime"])
        lines = [line for line in lines if line[0] >= since]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    stamp = query.get("timestamps") in ("true", "1")
    text = "".join(f"{rfc3339_nano(at)} {line}\n" if stamp else f"{line}\n" for at, line in lines)
    if query.get("limitBytes"):
        text = text.encode()[: int(query["limitBytes"])].decode(errors="ignore")
    return text
