"""The process of a `sim train` container, woken by the kubelet at each of its events.

Timeline of one container instance started at t0 (simulated seconds; S the step time):

    t0                phase starting, heartbeat (then every H s)
    t0 ...            with --nodes N > 1: phase waiting_for_nodes, until N Ray nodes are alive
    t1                ray {expected N, alive}, phase training
    t1 + k*S          progress k; every --checkpoint-every steps: checkpointing, checkpoint,
                      training; at --hang-at K: nothing ever again; at --fail-at K: completion
                      failed, termination message, exit C; after STEPS: finalizing, completion
                      succeeded, then idle (or, with --exit, termination message and exit 0)

Ray membership is checked every second while N > 1 and posted when it changes. What it prints
is derived from the same times (simcluster/training.py); what it posts goes to the SignalPoster,
which never blocks.

Behind the driver wrapper (a template head, `options.driver`), the wrapper's own story instead
(client/trainyard_driver.py): at t0 a done marker of this run is reported again and nothing
else happens; otherwise phase starting, waiting_for_nodes, `ray` at every look (every
--poll-seconds) until the expected nodes are alive (t1, phase initializing) or --nodes-timeout
has passed (a failed completion, RayNodesTimeout); the first step sends phase training; `ray`
goes with every heartbeat while the entry runs; a checkpoint is only `checkpoint` (the entry's
hook, docs/workload-signals.md); the end, success or --fail-at, is a completion, the termination
message and the done marker, and then it idles, beating, until SIGTERM (exit 0).
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Callable
from typing import Any

from client.trainyard_driver import Completion, exit_completion, marked, marker_text
from simcluster import training
from simcluster.behaviour import Instance
from simcluster.runtime import ContainerRuntime, PodRuntime
from simcluster.signal_poster import Sender, SignalPoster
from simcluster.training import EPSILON, DriverOptions, TrainOptions, TrainRun, logger_line
from simcluster.volumes import Files

NODE_CHECK_SECONDS = 1.0
MAX_TERMINATION_MESSAGE = 4096  # the kubelet reads at most this much of the file

Exit = tuple[int, str]  # exit code and reason
AliveNodes = Callable[[PodRuntime], int]


class Trainer:
    def __init__(self, poster: SignalPoster, alive_nodes: AliveNodes, files: Files) -> None:
        self.poster = poster
        self.alive_nodes = alive_nodes
        self.files = files

    def begin(self, container: ContainerRuntime, at: float) -> None:
        """A new instance: it wakes at once to say it is starting."""
        assert container.current is not None
        container.current.run = TrainRun(next_beat=at, next_check=at)
        container.until = at

    def wake(self, pod: PodRuntime, container: ContainerRuntime, at: float) -> Exit | None:
        instance, options = container.current, container.behaviour.train
        assert instance is not None and instance.run is not None and options is not None
        run, say = instance.run, self._say(pod, container)
        if at == instance.started_at:
            self._start(container, instance, options, at, say)
        if at >= run.next_beat - EPSILON and (options.driver or not run.over):
            say("heartbeat")
            run.next_beat = at + options.heartbeat_seconds
        outcome = None
        if run.completed:
            pass
        elif run.training_from is None:
            self._wait_for_nodes(pod, container, options, at, say)
        else:
            self._watch_nodes(pod, run, options, at, say)
            if at >= training.step_at(options, run.training_from, run.step + 1) - EPSILON:
                outcome = self._step(container, instance, options, at, say)
        container.until = self._next_wake(run, options)
        return outcome

    def stop_code(self, container: ContainerRuntime) -> int:
        """The exit code SIGTERM gives: the driver exits 0 unless its entry runs (the entry
        dies of it, 128 + 15, and the driver exits as it did)."""
        run = container.current.run if container.current else None
        options = container.behaviour.train
        idle = run is None or run.training_from is None or run.completed
        return 0 if options is not None and options.driver and idle else 143

    def _start(
        self,
        container: ContainerRuntime,
        instance: Instance,
        options: TrainOptions,
        at: float,
        say: Say,
    ) -> None:
        driver = options.driver
        if driver is not None and driver.done_marker:
            marker = driver.done_marker
            text = self.files.read(container.mounts, marker)
            completion, note = (
                marked(text, container.env.get("TRAINYARD_RUN"), marker)
                if text is not None
                else (None, "")
            )
            if note:
                instance.notes.append((at, driver_line(note)))
            if completion is not None:
                done = f"{marker}: this run is complete already, not training again"
                instance.notes.append((at, driver_line(done)))
                self._complete(container, completion, at, say, mark=False)
                return
        say("phase", name="starting")
        if driver is not None and driver.expected_nodes > 0:
            say("phase", name="waiting_for_nodes")

    def _next_wake(self, run: TrainRun, options: TrainOptions) -> float:
        driver = options.driver
        beating = driver is not None or not run.over
        stepping = run.training_from is not None and not run.over
        if driver is not None:
            watching = driver.expected_nodes > 0 and not run.completed
        else:
            watching = options.nodes > 1 and not run.over
        wakes = [run.next_beat] if beating else []
        if stepping:
            assert run.training_from is not None
            wakes.append(training.step_at(options, run.training_from, run.step + 1))
        if watching or (run.training_from is None and not run.completed):
            wakes.append(run.next_check)
        return min(wakes, default=math.inf)

    def _wait_for_nodes(
        self,
        pod: PodRuntime,
        container: ContainerRuntime,
        options: TrainOptions,
        at: float,
        say: Say,
    ) -> None:
        if at < container_run(container).next_check - EPSILON:
            return
        if options.driver is not None:
            self._driver_waits(pod, container, options.driver, at, say)
            return
        instance = container.current
        assert instance is not None and instance.run is not None
        run = instance.run
        alive = self.alive_nodes(pod) if options.nodes > 1 else 1
        run.next_check = at + NODE_CHECK_SECONDS
        if alive < options.nodes:
            if alive != run.alive:
                if not run.alive:
                    say("phase", name="waiting_for_nodes")
                text = (
                    f"Waiting for {options.nodes} nodes to be ready, "
                    f"currently {alive} nodes available."
                )
                instance.notes.append((at, logger_line(at, text, "WARNING")))
                run.alive = alive
            return
        say("ray", expected_nodes=options.nodes, alive_nodes=alive)
        self._begin_training(instance, options, at, alive)
        say("phase", name="training")

    def _driver_waits(
        self,
        pod: PodRuntime,
        container: ContainerRuntime,
        driver: DriverOptions,
        at: float,
        say: Say,
    ) -> None:
        """One look at Ray, as the wrapper's wait_for_nodes takes them."""
        instance, options = container.current, container.behaviour.train
        assert instance is not None and instance.run is not None and options is not None
        expected, deadline = driver.expected_nodes, instance.started_at + driver.nodes_timeout
        alive = 1
        if expected > 0:
            alive = self.alive_nodes(pod) if expected > 1 else 1
            say("ray", expected_nodes=expected, alive_nodes=alive)
            instance.run.next_check = min(at + driver.poll_seconds, deadline)
        if alive >= expected:
            if expected > 0:
                text = f"Ray has {alive} of {expected} nodes alive"
                instance.notes.append((at, driver_line(text)))
            say("phase", name="initializing")
            self._begin_training(instance, options, at, alive)
        elif at >= deadline - EPSILON:
            text = f"Ray has {alive} of {expected} expected nodes alive after "
            text += f"{driver.nodes_timeout:g} s"
            instance.notes.append((at, driver_line(text)))  # the wrapper says it, then completes
            timeout = Completion("failed", None, "RayNodesTimeout", text)
            self._complete(container, timeout, at, say)

    def _begin_training(
        self, instance: Instance, options: TrainOptions, at: float, alive: int
    ) -> None:
        run = instance.run
        assert run is not None
        run.training_from, run.alive = at, alive
        if options.driver is not None:
            run.next_check = at + options.heartbeat_seconds  # the wrapper's _watch_ray
        nodes = options.driver.expected_nodes if options.driver else options.nodes
        plural = "s" if nodes != 1 else ""
        text = f"RLinf is running on a cluster with {max(nodes, 1)} node{plural}."
        instance.notes.append((at, logger_line(at, text)))

    def _watch_nodes(
        self, pod: PodRuntime, run: TrainRun, options: TrainOptions, at: float, say: Say
    ) -> None:
        """`sim train` checks every second and posts a change; the wrapper posts what it sees
        with every heartbeat while the entry runs (a hung entry too)."""
        driver = options.driver
        if driver is not None:
            if driver.expected_nodes == 0 or at < run.next_check - EPSILON:
                return
            run.next_check = at + options.heartbeat_seconds
            run.alive = self.alive_nodes(pod) if driver.expected_nodes > 1 else 1
            say("ray", expected_nodes=driver.expected_nodes, alive_nodes=run.alive)
            return
        if options.nodes == 1 or run.over or at < run.next_check - EPSILON:
            return
        run.next_check = at + NODE_CHECK_SECONDS
        alive = self.alive_nodes(pod)
        if alive != run.alive:
            run.alive = alive
            say("ray", expected_nodes=options.nodes, alive_nodes=alive)

    def _step(
        self,
        container: ContainerRuntime,
        instance: Instance,
        options: TrainOptions,
        at: float,
        say: Say,
    ) -> Exit | None:
        run = instance.run
        assert run is not None
        if run.over:
            return None
        step = run.step + 1
        if step == options.fail_at:
            return self._fail(container, instance, options, step, at, say)
        run.step = step
        if options.driver is not None and step == 1:
            say("phase", name="training")  # the wrapper's, at the first progress line
        measured = training.metrics(container.behaviour.command, step)
        say(
            "progress",
            step=step,
            max_steps=options.steps,
            step_seconds=options.step_seconds,
            metrics=measured,
        )
        if options.saves_at(step):
            path = training.checkpoint_path(options, step)
            if options.driver is not None:  # the entry's checkpoint hook
                say("checkpoint", step=step, path=path)
            else:
                say("phase", name="checkpointing")
                say("checkpoint", step=step, path=path)
                say("phase", name="training")
        if step == options.hang_at:
            run.over = True  # deadlocked: no step, no line ever again (nor a `sim train` beat)
        elif step == options.steps:
            return self._finish(container, instance, options, at, say)
        return None

    def _fail(
        self,
        container: ContainerRuntime,
        instance: Instance,
        options: TrainOptions,
        step: int,
        at: float,
        say: Say,
    ) -> Exit | None:
        assert instance.run is not None
        instance.run.over = instance.run.completed = True
        lines = training.failure_lines(options, step)
        instance.notes.extend((at, line) for line in lines)
        if options.driver is not None:  # the entry failed; the wrapper reports it and idles
            failed = exit_completion(options.exit_code, collections.deque(lines))
            self._complete(container, failed, at, say)
            return None
        fields = {"exit_code": options.exit_code, "reason": "Error", "message": lines[-1]}
        say("completion", outcome="failed", **fields)
        instance.termination_message = completion_json("failed", **fields)
        return options.exit_code, "Error"

    def _finish(
        self,
        container: ContainerRuntime,
        instance: Instance,
        options: TrainOptions,
        at: float,
        say: Say,
    ) -> Exit | None:
        assert instance.run is not None
        instance.run.over = instance.run.completed = True
        if options.driver is not None:
            self._complete(container, Completion("succeeded", 0, None, None), at, say)
            return None
        say("phase", name="finalizing")
        say("completion", outcome="succeeded", exit_code=0)
        if options.exit:
            instance.notes.append(
                (at, f"[sim] training finished at step {options.steps}, exiting 0")
            )
            instance.termination_message = completion_json("succeeded", exit_code=0)
            return 0, "Completed"
        idle = f"[sim] training finished at step {options.steps}; idling (no --exit)"
        instance.notes.append((at, idle))
        return None

    def _complete(
        self,
        container: ContainerRuntime,
        completion: Completion,
        at: float,
        say: Say,
        mark: bool = True,
    ) -> None:
        """The wrapper's `complete` and `idle`: report it, write it to /dev/termination-log (the
        kubelet reads it when the container ends) and to the done marker."""
        instance, options = container.current, container.behaviour.train
        assert instance is not None and instance.run is not None and options is not None
        instance.run.over = instance.run.completed = True
        notes = [f"completion: {completion.outcome}, exit code {completion.exit_code}"]
        say("completion", **completion._asdict())
        instance.termination_message = completion.document()
        marker = options.driver.done_marker if options.driver else None
        if mark and marker:
            text = marker_text(completion, container.env.get("TRAINYARD_RUN"))
            if error := self.files.write(container.mounts, marker, text):
                notes.append(f"cannot write {marker}: {error}")
        notes.append("idle: SIGTERM ends this container")
        instance.notes.extend((at, driver_line(note)) for note in notes)

    def _say(self, pod: PodRuntime, container: ContainerRuntime) -> Say:
        """Posts for this container, or does nothing: --no-signals, or no signal environment."""
        env, options = container.env, container.behaviour.train
        url, token = env.get("TRAINYARD_SIGNAL_URL", ""), env.get("TRAINYARD_SIGNAL_TOKEN", "")
        if not (url and token and options is not None and options.signals):
            return _silent
        pod_name, uid = (
            env.get("TRAINYARD_POD") or pod.name,
            env.get("TRAINYARD_POD_UID") or pod.uid,
        )
        sender = Sender(url, token, pod_name, uid)
        return lambda kind, **fields: self.poster.post(sender, kind, **fields)


def container_run(container: ContainerRuntime) -> TrainRun:
    assert container.current is not None and container.current.run is not None
    return container.current.run


def driver_line(text: str) -> str:
    """What the wrapper prints (its `say`, on stderr)."""
    return f"trainyard driver: {text}"


Say = Callable[..., None]


def _silent(kind: str, **fields: Any) -> None:
    return None


def completion_json(outcome: str, **fields: Any) -> str:
    """What the process writes to /dev/termination-log: the console's fallback (docs/api.md)."""
    message = {"trainyard": "completion", "outcome": outcome, **fields}
    return json.dumps(message)[:MAX_TERMINATION_MESSAGE]
