"""Injected API failures: error statuses, hung connections, truncated bodies (a watch: cut after
its first event), bodies that are not JSON (a watch: a garbage line first) and added latency.

They apply to the Kubernetes API paths only, never to the /_sim/ control surface, and expire on
their own after the given number of real seconds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

Obj = dict[str, Any]
STATUSES = (429, 500, 502, 503, 504)


class FaultError(ValueError):
    """A fault description the control surface refuses."""


@dataclass
class Fault:
    kind: str
    seconds: float
    until: float
    status: int = 0
    latency_ms: int = 0

    def describe(self) -> Obj:
        described = asdict(self)
        described["remaining_seconds"] = round(max(0.0, self.until - time.monotonic()), 3)
        del described["until"]
        return described


def parse_fault(spec: Obj) -> Fault:
    seconds = spec.get("seconds", 5)
    if not isinstance(seconds, (int, float)) or seconds <= 0:
        raise FaultError("seconds must be a positive number")
    until = time.monotonic() + float(seconds)
    if "status" in spec:
        if spec["status"] not in STATUSES:
            raise FaultError(f"status must be one of {', '.join(map(str, STATUSES))}")
        return Fault("status", float(seconds), until, status=int(spec["status"]))
    if spec.get("timeout"):
        return Fault("timeout", float(seconds), until)
    if spec.get("truncate"):
        return Fault("truncate", float(seconds), until)
    if spec.get("garbage"):
        return Fault("garbage", float(seconds), until)
    if "latency_ms" in spec:
        latency = spec["latency_ms"]
        if not isinstance(latency, int) or latency < 0:
            raise FaultError("latency_ms must be a non-negative whole number")
        return Fault("latency", float(seconds), until, latency_ms=latency)
    raise FaultError(
        'a fault needs one of "status", "timeout", "truncate", "garbage" or "latency_ms"'
    )


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self.stopping = threading.Event()
        self.cleared = threading.Condition(self._lock)

    def add(self, spec: Obj) -> Fault:
        fault = parse_fault(spec)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> int:
        with self._lock:
            count = len(self._faults)
            self._faults.clear()
            self.cleared.notify_all()
        return count

    def active(self) -> list[Fault]:
        now = time.monotonic()
        with self._lock:
            self._faults = [f for f in self._faults if f.until > now]
            return list(self._faults)

    def hold(self, fault: Fault) -> None:
        """Keeps a request hanging until the fault ends, is cleared, or the server stops."""
        with self._lock:
            while fault in self._faults and not self.stopping.is_set():
                remaining = fault.until - time.monotonic()
                if remaining <= 0:
                    return
                self.cleared.wait(min(remaining, 0.1))
