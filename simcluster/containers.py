"""One container's life on a simulated node: sandbox, pull, create, run, exit, restart, back-off.

Each stage ends at `until`; the kubelet replays every stage end up to now, so a long jump of the
clock produces the same history (and timestamps) as many small ticks.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from simcluster import images
from simcluster.behaviour import RAY_CHECK_EVERY, RAY_CHECK_FIRST, Instance, Kind
from simcluster.clock import go_duration
from simcluster.nodeinfo import SimNode
from simcluster.runtime import ContainerRuntime, PodRuntime, Stage, crash_backoff_message
from simcluster.trainer import Trainer

SANDBOX_SECONDS = 1.0
TERMINATION_MESSAGE_BYTES = 4096  # what the kubelet keeps of terminationMessagePath
PULL_SECONDS = 3.0
CREATE_SECONDS = 1.0
RESTART_SECONDS = 1.0
INITIAL_BACKOFF = 10.0
MAX_BACKOFF = 300.0
STOP_SECONDS = 1.0

# (pod, container or None, type, reason, message)
Emit = Callable[[PodRuntime, ContainerRuntime | None, str, str, str], None]
HeadCheck = Callable[[PodRuntime, str], bool]


class ContainerDriver:
    def __init__(
        self, emit: Emit, head_reachable: HeadCheck, new_id: Callable[[], str], trainer: Trainer
    ) -> None:
        self.emit = emit
        self.head_reachable = head_reachable
        self.new_id = new_id
        self.trainer = trainer

    def replay(
        self, pod: PodRuntime, container: ContainerRuntime, node: SimNode, now: float
    ) -> None:
        for _ in range(10_000):
            if container.until > now:
                return
            self.step(pod, container, node, container.until)

    def step(self, pod: PodRuntime, c: ContainerRuntime, node: SimNode, at: float) -> None:
        stage = c.stage
        if stage is Stage.SANDBOX:
            if not pod.sandbox_ready:
                pod.sandbox_ready, pod.pod_ip = True, node.allocate_ip()
            self._begin_pull(pod, c, node, at)
        elif stage is Stage.PULLING:
            self._pulled(pod, c, node, at)
        elif stage is Stage.PULL_ERROR:
            self._pull_backoff(pod, c, at)
        elif stage is Stage.PULL_BACKOFF:
            self.emit(pod, c, "Normal", "Pulling", f'Pulling image "{c.image}"')
            c.stage, c.until = Stage.PULLING, at + 1.0
        elif stage in (Stage.CREATING, Stage.EXITED):
            self.start(pod, c, at)
        elif stage is Stage.CRASH_BACKOFF:
            c.backoff = min(c.backoff * 2, MAX_BACKOFF)
            c.backoff_at = c.current.finished_at or at if c.current else at
            self.start(pod, c, at)
        elif stage is Stage.RUNNING:
            self._running_deadline(pod, c, at)
        else:
            c.until = math.inf

    def _begin_pull(self, pod: PodRuntime, c: ContainerRuntime, node: SimNode, at: float) -> None:
        cached = images.normalize(c.image) in node.images
        if cached and c.pull_policy != "Always":
            self.emit(
                pod,
                c,
                "Normal",
                "Pulled",
                f'Container image "{c.image}" already present on machine',
            )
            self._resolve(c)
            c.stage, c.until = Stage.CREATING, at + CREATE_SECONDS
            return
        self.emit(pod, c, "Normal", "Pulling", f'Pulling image "{c.image}"')
        c.stage, c.until = Stage.PULLING, at + (0.5 if cached else PULL_SECONDS)

    def _pulled(self, pod: PodRuntime, c: ContainerRuntime, node: SimNode, at: float) -> None:
        if not images.pullable(c.image):
            c.pull_error = images.pull_error(c.image)
            self.emit(
                pod, c, "Warning", "Failed", f'Failed to pull image "{c.image}": {c.pull_error}'
            )
            self.emit(pod, c, "Warning", "Failed", "Error: ErrImagePull")
            c.pull_backoff = (
                INITIAL_BACKOFF if not c.pull_backoff else min(c.pull_backoff * 2, MAX_BACKOFF)
            )
            c.stage, c.until = Stage.PULL_ERROR, at + 1.0
            return
        node.images.add(images.normalize(c.image))
        self._resolve(c)
        took = go_duration(PULL_SECONDS)
        size = images.image_size(c.image)
        self.emit(
            pod,
            c,
            "Normal",
            "Pulled",
            f'Successfully pulled image "{c.image}" in {took} ({took} including waiting). '
            f"Image size: {size} bytes.",
        )
        c.stage, c.until = Stage.CREATING, at + CREATE_SECONDS

    def _resolve(self, c: ContainerRuntime) -> None:
        c.resolved_image = images.normalize(c.image)
        c.image_id = images.image_id(c.image)

    def _pull_backoff(self, pod: PodRuntime, c: ContainerRuntime, at: float) -> None:
        c.message = f'Back-off pulling image "{c.image}": ErrImagePull: {c.pull_error}'
        self.emit(pod, c, "Normal", "BackOff", f'Back-off pulling image "{c.image}"')
        self.emit(pod, c, "Warning", "Failed", "Error: ImagePullBackOff")
        c.stage, c.until = Stage.PULL_BACKOFF, at + c.pull_backoff

    def start(self, pod: PodRuntime, c: ContainerRuntime, at: float) -> None:
        """A new container instance; restarts count and keep the previous run as lastState."""
        previous = c.current
        if previous is not None:
            c.last_terminated = previous
            c.restart_count += 1
            self.emit(
                pod,
                c,
                "Normal",
                "Pulled",
                f'Container image "{c.image}" already present on machine',
            )
        self.emit(pod, c, "Normal", "Created", f"Created container: {c.name}")
        self.emit(pod, c, "Normal", "Started", f"Started container {c.name}")
        c.instances = [*c.instances[-2:], Instance(f"containerd://{self.new_id()}", at, pod.pod_ip)]
        c.stage = Stage.RUNNING
        c.until = at + (
            RAY_CHECK_FIRST if c.behaviour.kind is Kind.RAY_WORKER else c.behaviour.seconds
        )
        if c.behaviour.kind is Kind.TRAIN:
            self.trainer.begin(c, at)

    def _running_deadline(self, pod: PodRuntime, c: ContainerRuntime, at: float) -> None:
        behaviour = c.behaviour
        if c.stopping:
            if at >= pod.stop_deadline:
                self.exit(pod, c, at, 137, "Error", "killed")
            else:
                code = self.trainer.stop_code(c) if behaviour.kind is Kind.TRAIN else 143
                self.exit(pod, c, at, code, "Completed" if code == 0 else "Error", "sigterm")
        elif behaviour.kind is Kind.RAY_WORKER:
            self._check_head(pod, c, at)
        elif behaviour.kind is Kind.TRAIN:
            if (ended := self.trainer.wake(pod, c, at)) is not None:
                self.exit(pod, c, at, *ended, "natural")
        else:
            cause = "oom" if behaviour.kind is Kind.OOM else "natural"
            if c.current is not None and cause == "natural":
                written = behaviour.termination_message.encode()[:TERMINATION_MESSAGE_BYTES]
                c.current.termination_message = written.decode(errors="ignore")
            self.exit(pod, c, at, behaviour.exit_code, behaviour.exit_reason, cause)

    def _check_head(self, pod: PodRuntime, c: ContainerRuntime, at: float) -> None:
        instance = c.current
        host = c.behaviour.head_host
        if not self.head_reachable(pod, host):
            self.exit(pod, c, at, 1, "Error", "head")
            return
        if instance is not None and not instance.notes:
            instance.notes.append((at, f"Connected to Ray cluster at {host}:6379."))
        c.until = at + RAY_CHECK_EVERY

    def exit(
        self, pod: PodRuntime, c: ContainerRuntime, at: float, code: int, reason: str, cause: str
    ) -> None:
        instance = c.current
        if instance is not None:
            instance.finished_at, instance.exit_code, instance.reason, instance.cause = (
                at,
                code,
                reason,
                cause,
            )
        restart = pod.restart_policy == "Always" or (
            pod.restart_policy == "OnFailure" and code != 0
        )
        if pod.deleting or not restart:
            c.stage, c.until = Stage.DONE, math.inf
            return
        if not c.backoff or at - c.backoff_at > 2 * MAX_BACKOFF:
            c.backoff, c.backoff_at = INITIAL_BACKOFF, at
            c.stage, c.until = Stage.EXITED, at + RESTART_SECONDS
            return
        c.stage, c.until = Stage.CRASH_BACKOFF, at + c.backoff
        c.message = crash_backoff_message(c, pod)
        self.emit(
            pod,
            c,
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {c.name} in pod "
            f"{pod.name}_{pod.namespace}({pod.uid})",
        )

    def begin_stop(self, pod: PodRuntime, at: float) -> None:
        """Graceful termination: SIGTERM now, SIGKILL at the deadline for what ignores it."""
        pod.deleting = True
        for c in pod.containers:
            if c.stage is Stage.RUNNING:
                self.emit(pod, c, "Normal", "Killing", f"Stopping container {c.name}")
                c.stopping = True
                ignores_term = c.behaviour.kind is Kind.HANG
                stop_at = (
                    pod.stop_deadline if ignores_term else min(at + STOP_SECONDS, pod.stop_deadline)
                )
                c.until = min(c.until, max(stop_at, at))
            elif c.stage is not Stage.DONE:
                c.stage, c.until = Stage.DONE, math.inf
