"""Workload signals of simulated containers, posted to the console through its real client.

The kubelet decides what a `sim train` process says while it holds the store lock; sending must
never happen there, and a slow or absent console must never slow the API server. So the kubelet
only drops a message into a bounded queue (full: the message is counted and dropped), and one
daemon thread per cluster hands each message to the `client/trainyard_signal.py` instance of its
pod (one per pod UID, as each container process would have its own), whose own thread batches,
sends and retries with back-off.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from client.trainyard_signal import Signals

CAPACITY = 10_000
logger = logging.getLogger("simcluster")


@dataclass(frozen=True)
class Sender:
    """Who posts: the signal URL and token of the container's environment, and its pod."""

    url: str
    token: str
    pod: str
    uid: str


@dataclass(frozen=True)
class Outgoing:
    sender: Sender
    kind: str
    fields: dict[str, Any] = field(default_factory=dict)


class SignalPoster:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self._queue: queue.Queue[Outgoing] = queue.Queue(capacity)
        self._clients: dict[Sender, Signals] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def post(self, sender: Sender, kind: str, **fields: Any) -> None:
        """Never blocks: called under the store lock."""
        try:
            self._queue.put_nowait(Outgoing(sender, kind, fields))
        except queue.Full:
            self.dropped += 1

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="simcluster-signals", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def flush(self, timeout: float = 10.0) -> bool:
        """Waits until every message queued so far was sent (or dropped by its client); False
        when `timeout` ran out first. For tests and a clean stop; nothing else waits."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                if not self._queue.all_tasks_done.wait(deadline - time.monotonic()):
                    return False
        clients = list(self._clients.values())
        return all(client.flush(max(0.0, deadline - time.monotonic())) for client in clients)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                message = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            try:
                self._hand_over(message)
            except Exception:  # a bad message must not silence the others
                logger.exception("simcluster could not hand over a %s signal", message.kind)
            finally:
                self._queue.task_done()

    def _hand_over(self, message: Outgoing) -> None:
        client = self._clients.get(message.sender)
        if client is None:
            sender = message.sender
            client = Signals(sender.url, sender.token, sender.pod, sender.uid)
            atexit.unregister(client.flush)  # simcluster is not the process that exits
            self._clients[sender] = client
        if message.kind == "completion":  # queued only: this thread waits for no one
            client.completion(**message.fields, timeout=0)
        else:
            getattr(client, message.kind)(**message.fields)
