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
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from simcluster import training
from simcluster.runtime import ContainerRuntime, PodRuntime
from simcluster.signals import Sender, SignalPoster
from simcluster.training import EPSILON, TrainOptions, TrainRun, logger_line
from simcluster.workload import Instance

NODE_CHECK_SECONDS = 1.0
MAX_TERMINATION_MESSAGE = 4096  # the kubelet reads at most this much of the file

Exit = tuple[int, str]  # exit code and reason
AliveNodes = Callable[[PodRuntime], int]


class Trainer:
    def __init__(self, poster: SignalPoster, alive_nodes: AliveNodes) -> None:
        self.poster = poster
        self.alive_nodes = alive_nodes

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
            say("phase", name="starting")
        if at >= run.next_beat - EPSILON:
            say("heartbeat")
            run.next_beat = at + options.heartbeat_seconds
        outcome = None
        if run.training_from is None:
            self._wait_for_nodes(pod, instance, options, at, say)
        else:
            self._watch_nodes(pod, run, options, at, say)
            if at >= training.step_at(options, run.training_from, run.step + 1) - EPSILON:
                outcome = self._step(container, instance, options, at, say)
        container.until = math.inf if run.over else self._next_wake(run, options)
        return outcome

    def _next_wake(self, run: TrainRun, options: TrainOptions) -> float:
        wake = run.next_beat
        if run.training_from is not None:
            wake = min(wake, training.step_at(options, run.training_from, run.step + 1))
        return min(wake, run.next_check) if options.nodes > 1 else wake

    def _wait_for_nodes(
        self, pod: PodRuntime, instance: Instance, options: TrainOptions, at: float, say: Say
    ) -> None:
        run = instance.run
        assert run is not None
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
        run.training_from, run.alive = at, alive
        say("ray", expected_nodes=options.nodes, alive_nodes=alive)
        plural = "s" if options.nodes > 1 else ""
        text = f"RLinf is running on a cluster with {options.nodes} node{plural}."
        instance.notes.append((at, logger_line(at, text)))
        say("phase", name="training")

    def _watch_nodes(
        self, pod: PodRuntime, run: TrainRun, options: TrainOptions, at: float, say: Say
    ) -> None:
        if options.nodes == 1 or at < run.next_check - EPSILON:
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
        step = run.step + 1
        if step == options.fail_at:
            return self._fail(instance, options, step, at, say)
        run.step = step
        measured = training.metrics(container.behaviour.command, step)
        say(
            "progress",
            step=step,
            max_steps=options.steps,
            step_seconds=options.step_seconds,
            metrics=measured,
        )
        if options.saves_at(step):
            say("phase", name="checkpointing")
            say("checkpoint", step=step, path=training.checkpoint_path(step))
            say("phase", name="training")
        if step == options.hang_at:
            run.over = True  # deadlocked: no step, no heartbeat, no line ever again
        elif step == options.steps:
            return self._finish(instance, options, at, say)
        return None

    def _fail(
        self, instance: Instance, options: TrainOptions, step: int, at: float, say: Say
    ) -> Exit:
        assert instance.run is not None
        instance.run.over = True
        lines = training.failure_lines(options, step)
        instance.notes.extend((at, line) for line in lines)
        fields = {"exit_code": options.exit_code, "reason": "Error", "message": lines[-1]}
        say("completion", outcome="failed", **fields)
        instance.termination_message = completion_json("failed", **fields)
        return options.exit_code, "Error"

    def _finish(
        self, instance: Instance, options: TrainOptions, at: float, say: Say
    ) -> Exit | None:
        assert instance.run is not None
        instance.run.over = True
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


Say = Callable[..., None]


def _silent(kind: str, **fields: Any) -> None:
    return None


def completion_json(outcome: str, **fields: Any) -> str:
    """What the process writes to /dev/termination-log: the console's fallback (docs/api.md)."""
    message = {"trainyard": "completion", "outcome": outcome, **fields}
    return json.dumps(message)[:MAX_TERMINATION_MESSAGE]
