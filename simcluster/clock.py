"""Simulated time: the clock every controller reads, and the Kubernetes ways of writing it down."""

from __future__ import annotations

import threading
import time


class SimClock:
    """Seconds since the epoch on a simulated timeline.

    The timeline starts at the real wall-clock time of creation and then runs `speed` simulated
    seconds per real second, plus whatever `advance()` added. Speed 0 freezes the clock so tests can
    move it only with `advance()`.
    """

    def __init__(self, speed: float = 1.0, start: float | None = None) -> None:
        self.speed = speed
        self._start_sim = time.time() if start is None else start
        self._start_real = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            elapsed = time.monotonic() - self._start_real
            return self._start_sim + elapsed * self.speed + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    def real_seconds(self, simulated: float) -> float:
        """How long a real wait lasts for `simulated` seconds; frozen clocks never get there."""
        return simulated / self.speed if self.speed > 0 else float("inf")


class Budget:
    """How long one tick may hold the store lock (real seconds), so API requests interleave.

    `advance()` ticks without a budget: simulated time must not move on with work left over.
    """

    def __init__(self, seconds: float | None) -> None:
        self.deadline = time.monotonic() + seconds if seconds is not None else float("inf")

    def exhausted(self) -> bool:
        return time.monotonic() > self.deadline

    def share(self, takers: int) -> Budget:
        """An equal part of what is left for one of `takers` loops, so none starves the rest;
        a loop with nothing to do hands its part on to the ones after it."""
        if self.deadline == float("inf"):
            return self
        left = max(0.0, self.deadline - time.monotonic())
        return Budget(left / max(1, takers))


UNLIMITED = Budget(None)
# Items a loop handles per tick even with its budget spent: a loop whose set-up alone outlasts
# its share must still make progress.
MIN_BATCH = 20


def rfc3339(moment: float) -> str:
    """metav1.Time: whole seconds, UTC, `Z` suffix (what the API server serialises)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def rfc3339_micro(moment: float) -> str:
    """metav1.MicroTime, as in `eventTime` and lease renew times."""
    micros = round((moment % 1) * 1_000_000) % 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{micros:06d}Z"


def rfc3339_nano(moment: float) -> str:
    """The prefix `kubectl logs --timestamps` shows: nanosecond precision."""
    nanos = round((moment % 1) * 1_000_000_000) % 1_000_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{nanos:09d}Z"


def parse_rfc3339(text: str) -> float:
    """Inverse of `rfc3339` (fractions accepted and dropped, as metav1.Time does)."""
    import calendar

    base = text[:19]
    return float(calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")))


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String() for whole and fractional seconds: 10s, 1m20s, 5m0s, 1h0m0s."""
    if seconds < 60:
        text = f"{seconds:.3f}".rstrip("0").rstrip(".")
        return f"{text}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s"
