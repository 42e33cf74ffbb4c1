"""The load scenario of bench/load.py, run by locust in its own virtualenv
(requirements-bench.txt): it imports nothing of the console and reads what bench/load.py
prepared from the JSON file named by TRAINYARD_LOAD_PLAN.

- PageUser: a person with a job page open and its worker rows expanded. Each 5 s, as htmx does,
  the status part and the worker rows are asked for again with the version the last answer gave
  (`v`), as htmx requests (`HX-Request`, `X-Trainyard-Poll`): 204 when unchanged, else the new
  fragment, whose own poll URL is taken for the next time. Once a minute the page is reloaded.
- OperatorUser: one operation a second through the API, stopping its Jobs one after the other,
  then resuming them (a Job stopped already is resumed first).
- PodUser: one pod of a running Job posting a signal every 10 s with its Job's signal token:
  heartbeats, and a progress report every third time.

Each user starts at a random moment within its period, so that requests are spread over time
as those of people and pods that started independently are. Every answer other than 200, 202
or 204, and any htmx redirect (a session that ended), is a failure. The answers' status codes
per request kind are written to TRAINYARD_LOAD_CODES at the end.
"""

from __future__ import annotations

import html
import itertools
import json
import os
import random
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from gevent import sleep
from locust import FastHttpUser, events, task

PLAN = json.loads(Path(os.environ["TRAINYARD_LOAD_PLAN"]).read_text())
CODES: Counter[str] = Counter()
STATUS_POLL = re.compile(r'id="job-status" hx-get="([^"]+)"')
WORKERS_POLL = re.compile(r'class="workers" hx-get="([^"]+)"')
HTMX = {"HX-Request": "true"}
POLL = {**HTMX, "X-Trainyard-Poll": "1"}  # console.js marks the requests of data-poll elements
RELOAD_EVERY = 12  # polls: once a minute
OTHER = {"stop": "resume", "resume": "stop"}


def _poll_url(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.search(text)
    return html.unescape(found.group(1)) if found else None


def _start_at_random_within(user: Any, seconds: float) -> None:
    """People opened their pages, and pods started, at unrelated moments: their requests are
    spread over the period, not sent all at once every period as users spawned together
    would send them. The user's first request is due now, after the wait."""
    sleep(random.uniform(0, seconds))
    user.due = time.monotonic()


def every(seconds: float) -> Any:
    """A request every `seconds` from the user's first one (locust's constant_pacing counts
    from the user's creation, so the random start above would be undone: every user would
    send in step with the others, at the moment it was spawned). A request late by more than
    a period is not made up for: the next is due a period after it."""

    def wait_time(user: Any) -> float:
        user.due = max(user.due + seconds, time.monotonic())
        return user.due - time.monotonic()

    return wait_time


def _counted(kind: str, response: Any, ok: tuple[int, ...]) -> None:
    """A failure unless the status is one of `ok` and no htmx redirect was asked for."""
    CODES[f"{kind} {response.status_code}"] += 1
    if response.status_code not in ok or response.headers.get("HX-Redirect"):
        response.failure(f"{response.status_code} {response.headers.get('HX-Redirect', '')}")


class PageUser(FastHttpUser):
    fixed_count = len(PLAN["pages"])
    wait_time = every(PLAN["poll_seconds"])
    pages = itertools.cycle(PLAN["pages"])

    def on_start(self) -> None:
        page = next(self.pages)
        _start_at_random_within(self, PLAN["poll_seconds"])
        self.cookie = {"Cookie": f"{PLAN['session_cookie']}={page['session']}"}
        self.page_url, self.workers_url = page["page"], page["workers"]
        self.polls = 0
        self.open_page()

    def open_page(self) -> None:
        """The page, then its worker rows (the `<details>` toggled open loads them)."""
        self.status_poll = self._get("job page", self.page_url, {}, STATUS_POLL)
        self.workers_poll = self._get("worker rows", self.workers_url, HTMX, WORKERS_POLL)

    def _get(
        self, kind: str, url: str, headers: dict[str, str], pattern: re.Pattern[str]
    ) -> str | None:
        """The answer's next poll URL (the same after a 204); None when a fragment came back
        without one (nothing more to poll)."""
        polled = headers is POLL
        with self.client.get(
            url, headers={**headers, **self.cookie}, name=kind, catch_response=True,
            allow_redirects=False,
        ) as response:  # fmt: skip
            _counted(kind, response, (200, 204) if polled else (200,))
            if response.status_code == 200:
                return _poll_url(pattern, response.text or "")
        return url

    @task
    def poll(self) -> None:
        self.polls += 1
        if self.polls % RELOAD_EVERY == 0 or not (self.status_poll and self.workers_poll):
            self.open_page()
            return
        self.status_poll = self._get("status poll", self.status_poll, POLL, STATUS_POLL)
        self.workers_poll = self._get("worker rows poll", self.workers_poll, POLL, WORKERS_POLL)


class OperatorUser(FastHttpUser):
    fixed_count = len(PLAN["operators"])
    wait_time = every(1)
    operators = itertools.cycle(PLAN["operators"])

    def on_start(self) -> None:
        operator = next(self.operators)
        _start_at_random_within(self, 1)
        self.headers = {"Authorization": f"Bearer {operator['token']}"}
        jobs = operator["jobs"]  # [id, the operation its state allows first]
        self.steps = itertools.cycle(
            [(first, pk) for pk, first in jobs] + [(OTHER[first], pk) for pk, first in jobs]
        )

    @task
    def operate(self) -> None:
        action, pk = next(self.steps)
        with self.client.post(
            f"/api/v1/jobs/{pk}/{action}", headers=self.headers, name=f"operation ({action})",
            catch_response=True,
        ) as response:  # fmt: skip
            _counted(f"operation ({action})", response, (200,))


class PodUser(FastHttpUser):
    fixed_count = len(PLAN["pods"])
    wait_time = every(PLAN["signal_seconds"])
    pods = itertools.cycle(PLAN["pods"])

    def on_start(self) -> None:
        pod = next(self.pods)
        _start_at_random_within(self, PLAN["signal_seconds"])
        self.url = f"/api/v1/jobs/{pod['job']}/signals"
        self.headers = {"Authorization": f"Bearer {pod['token']}"}
        self.pod, self.uid = pod["pod"], pod["uid"]
        self.seq = time.time_ns() // 1_000_000  # from the clock, as docs/api.md advises

    @task
    def post_signal(self) -> None:
        self.seq += 1
        body: dict[str, Any] = {"kind": "heartbeat", "pod": self.pod, "uid": self.uid}
        if self.seq % 3 == 0:
            body = {**body, "kind": "progress", "step": self.seq % 1000, "max_steps": 1000}
        with self.client.post(
            self.url, json={**body, "seq": self.seq}, headers=self.headers, name="signal",
            catch_response=True,
        ) as response:  # fmt: skip
            _counted("signal", response, (202,))


@events.reset_stats.add_listener
def _reset_codes(**_kwargs: Any) -> None:
    """Counted from the end of the spawning on, as locust's own figures (--reset-stats)."""
    CODES.clear()


@events.quitting.add_listener
def _write_codes(environment: Any, **_kwargs: Any) -> None:
    Path(os.environ["TRAINYARD_LOAD_CODES"]).write_text(json.dumps(CODES))
