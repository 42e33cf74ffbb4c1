"""Trainyard workload signals: one file, Python 3.8+ standard library only.

    import trainyard_signal as signal
    signal.phase("training")
    signal.progress(step=3, max_steps=10, metrics={"loss": 0.4})
    signal.completion("succeeded", exit_code=0)

Messages are queued and sent in batches by a background thread; a failure is printed to
stderr, never raised into training. Without TRAINYARD_SIGNAL_URL every call does nothing.
From a shell: python trainyard_signal.py progress --step 3 --max-steps 10 --metric loss=0.4
(always exits 0). See docs/workload-signals.md.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import itertools
import json
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

BATCH = 100  # the console takes at most 100 messages per request
MAX_BYTES = 60_000  # and at most 64 KiB
MAX_METRICS = 32
DROPPABLE = ("progress", "heartbeat")  # dropped first when the queue is full
FINAL = (401, 403, 404, 413, 422)  # a resend cannot succeed
# The retries' jitter, from a generator of its own: the training program's `random` (often
# seeded for reproducible runs) is never drawn from by this background thread.
JITTER = random.Random()


class Signals:
    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        pod: str | None = None,
        uid: str | None = None,
        max_queue: int = 1000,
        interval: float = 0.5,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        timeout: float = 10.0,
    ) -> None:
        env = os.environ
        self.url = url if url is not None else env.get("TRAINYARD_SIGNAL_URL", "")
        self.token = token if token is not None else env.get("TRAINYARD_SIGNAL_TOKEN", "")
        self.pod = pod if pod is not None else env.get("TRAINYARD_POD", "")
        self.uid = uid if uid is not None else env.get("TRAINYARD_POD_UID", "")
        self.enabled = bool(self.url)
        self.max_queue, self.interval, self.timeout = max_queue, interval, timeout
        self.backoff, self.max_backoff = backoff, max_backoff
        self.requests = 0  # requests answered 202
        self._seq = itertools.count(time.time_ns())  # a restarted container goes on above
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._in_flight: list[dict[str, Any]] = []  # the batch being sent
        self._cond = threading.Condition()
        self._warned: set[str] = set()
        self._sender: threading.Thread | None = None
        self._heartbeat: threading.Thread | None = None
        if self.enabled:
            atexit.register(self.flush, 5.0)

    # -- the kinds of docs/api.md "Signals" --------------------------------------------------
    def heartbeat(self) -> None:
        self._put("heartbeat")

    def phase(self, name: str) -> None:
        self._put("phase", phase=name)

    def progress(
        self,
        step: int,
        max_steps: int | None = None,
        step_seconds: float | None = None,
        metrics: dict[str, float] | None = None,
    ) -> None:
        self._put(
            "progress", step=step, max_steps=max_steps, step_seconds=step_seconds, metrics=metrics
        )

    def checkpoint(self, step: int, path: str) -> None:
        self._put("checkpoint", step=step, path=path)

    def ray(self, expected_nodes: int, alive_nodes: int, gpus: int | None = None) -> None:
        self._put("ray", expected_nodes=expected_nodes, alive_nodes=alive_nodes, gpus=gpus)

    def completion(
        self,
        outcome: str,
        exit_code: int | None = None,
        reason: str | None = None,
        message: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        """Queued, then waited for up to `timeout` seconds: the process may exit right after."""
        reason = None if reason is None else reason[:128]
        message = None if message is None else message[-1024:]
        fields = {"exit_code": exit_code, "reason": reason, "message": message}
        self._put("completion", outcome=outcome, **fields)
        self.flush(timeout)

    def start_heartbeat(self, seconds: float | None = None) -> None:
        """A daemon thread sending a heartbeat every `seconds`: by default as often as the
        Job's policy asks (TRAINYARD_HEARTBEAT_SECONDS, which the console sets), else 30."""
        if not self.enabled or self._heartbeat is not None:
            return
        if seconds is None:
            seconds = _seconds(os.environ.get("TRAINYARD_HEARTBEAT_SECONDS", "")) or 30.0

        def beat() -> None:
            while True:
                self.heartbeat()
                time.sleep(seconds)

        self._heartbeat = threading.Thread(target=beat, name="trainyard-heartbeat", daemon=True)
        self._heartbeat.start()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued before this call is sent or dropped; False when
        `timeout` ran out. Later messages (a heartbeat thread's) do not keep it waiting."""
        if not self.enabled:
            return True
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            last = max(self._unsent(), default=-1)
            while min(self._unsent(), default=last + 1) <= last:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    # -- queue and sender -------------------------------------------------------------------
    def _unsent(self) -> list[int]:
        """The seq of every message queued or being sent (under the lock)."""
        return [message["seq"] for message in itertools.chain(self._queue, self._in_flight)]

    def _put(self, kind: str, **fields: Any) -> None:
        if not self.enabled:
            return
        try:
            message: dict[str, Any] = {
                "kind": kind,
                "pod": self.pod,
                "uid": self.uid,
                "seq": next(self._seq),
            }
            message.update({name: value for name, value in fields.items() if value is not None})
            if "metrics" in message:  # numbers (numpy's and torch's too), 32 at most
                pairs = list(message["metrics"].items())[:MAX_METRICS]
                message["metrics"] = {str(name): float(value) for name, value in pairs}
            json.dumps(message)  # what cannot be sent is refused here, not in the sender
            with self._cond:
                if len(self._queue) >= self.max_queue:
                    self._drop_one()
                self._queue.append(message)
                self._cond.notify_all()
                if self._sender is None or not self._sender.is_alive():
                    self._sender = threading.Thread(
                        target=self._run, name="trainyard-signals", daemon=True
                    )
                    self._sender.start()
        except Exception as error:  # never into training
            self._warn("queue", f"signal {kind} not queued: {error!r}")

    def _drop_one(self) -> None:
        for message in self._queue:
            if message["kind"] in DROPPABLE:
                self._queue.remove(message)
                break
        else:
            self._queue.popleft()
        self._warn("full", "trainyard signals: queue full, dropping the oldest messages")

    def _run(self) -> None:
        delay = self.backoff
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                batch = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
                body = json.dumps(batch).encode()
                while len(body) > MAX_BYTES and len(batch) > 1:  # the rest goes next time
                    half = len(batch) // 2
                    self._queue.extendleft(reversed(batch[half:]))
                    batch = batch[:half]
                    body = json.dumps(batch).encode()
                self._in_flight = batch
            try:
                retry = self._send(body)
            except Exception as error:
                self._warn("send", f"trainyard signals: {error!r}")
                retry = False
            with self._cond:
                if retry:  # back in front, in order; the console counts resent ones once
                    self._queue.extendleft(reversed(batch))
                    while len(self._queue) > self.max_queue:
                        self._drop_one()
                self._in_flight = []
                self._cond.notify_all()
            if retry:
                time.sleep(delay * (0.5 + JITTER.random() / 2))
                delay = min(delay * 2, self.max_backoff)
            else:
                delay = self.backoff
                time.sleep(self.interval)  # a few requests a second at most, far below the cap

    def _send(self, body: bytes) -> bool:
        """POST one batch; True when it should be sent again later."""
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={
                "Authorization": "Bearer " + self.token,
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                answer.read()
            self.requests += 1
            return False
        except urllib.error.HTTPError as error:
            answer = error.read().decode(errors="replace")[:300]
            if error.code in FINAL:
                self._warn(str(error.code), f"trainyard signals dropped: {error.code} {answer}")
                return False
            self._warn("retry", f"trainyard signals: {error.code}, will retry")
            return True
        except OSError as error:  # connection refused, timeout, DNS
            self._warn("retry", f"trainyard signals: console unreachable ({error}), will retry")
            return True

    def _warn(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            print(text, file=sys.stderr)


_default: Signals | None = None


def default() -> Signals:
    global _default
    if _default is None:
        _default = Signals()
    return _default


def heartbeat() -> None:
    default().heartbeat()


def phase(name: str) -> None:
    default().phase(name)


def progress(
    step: int,
    max_steps: int | None = None,
    step_seconds: float | None = None,
    metrics: dict[str, float] | None = None,
) -> None:
    default().progress(step, max_steps, step_seconds, metrics)


def checkpoint(step: int, path: str) -> None:
    default().checkpoint(step, path)


def ray(expected_nodes: int, alive_nodes: int, gpus: int | None = None) -> None:
    default().ray(expected_nodes, alive_nodes, gpus)


def completion(
    outcome: str,
    exit_code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
    timeout: float = 10.0,
) -> None:
    default().completion(outcome, exit_code, reason, message, timeout)


def start_heartbeat(seconds: float | None = None) -> None:
    default().start_heartbeat(seconds)


def _seconds(text: str) -> float | None:
    """A positive number of seconds from the environment, or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.1 <= value < float("inf") else None


def flush(timeout: float = 10.0) -> bool:
    return default().flush(timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trainyard_signal.py")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to try sending")
    kinds = parser.add_subparsers(dest="kind", required=True)
    kinds.add_parser("heartbeat")
    kinds.add_parser("phase").add_argument("name")
    p = kinds.add_parser("progress")
    p.add_argument("--step", type=int, required=True)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--step-seconds", type=float)
    p.add_argument("--metric", action="append", default=[], help="name=number, repeatable")
    c = kinds.add_parser("checkpoint")
    c.add_argument("--step", type=int, required=True)
    c.add_argument("--path", required=True)
    r = kinds.add_parser("ray")
    r.add_argument("--expected", type=int, required=True)
    r.add_argument("--alive", type=int, required=True)
    r.add_argument("--gpus", type=int)
    d = kinds.add_parser("completion")
    d.add_argument("outcome", choices=["succeeded", "failed"])
    d.add_argument("--exit-code", type=int)
    d.add_argument("--reason")
    d.add_argument("--message")
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # a wrong command line is printed; the entrypoint still goes on
        return 0
    try:
        signals = Signals(backoff=0.5, max_backoff=2.0, timeout=min(args.timeout, 10.0))
        if not signals.enabled:
            print("trainyard signals: no TRAINYARD_SIGNAL_URL, nothing sent", file=sys.stderr)
            return 0
        if args.kind == "heartbeat":
            signals.heartbeat()
        elif args.kind == "phase":
            signals.phase(args.name)
        elif args.kind == "progress":
            metrics = {k: float(v) for k, _, v in (m.partition("=") for m in args.metric)}
            signals.progress(args.step, args.max_steps, args.step_seconds, metrics or None)
        elif args.kind == "checkpoint":
            signals.checkpoint(args.step, args.path)
        elif args.kind == "ray":
            signals.ray(args.expected, args.alive, args.gpus)
        else:
            signals.completion(args.outcome, args.exit_code, args.reason, args.message, 0)
        if not signals.flush(args.timeout):
            print(f"trainyard signals: {args.kind} not sent in {args.timeout}s", file=sys.stderr)
        atexit.unregister(signals.flush)  # waited for already: exit now
    except Exception as error:
        print(f"trainyard signals: {error!r}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
