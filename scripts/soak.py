"""Soak of `make run`: the real processes (simulated cluster, Celery worker with beat, web server)
run for a span of simulated time while a client keeps using the API, and every process must
still be alive at the end.

Time is compressed: simcluster runs SPEED times faster and the beat ticks every second instead of
every ten, so 30 simulated minutes take 30 / SPEED minutes of wall time with as many sync cycles
as 30 real minutes at the default interval. Everything else is `make run` as a newcomer starts
it, on a fresh var dir (its own database, broker file and secret key) and free ports.

    python scripts/soak.py [--minutes 30] [--speed 10]

Run it after `make run` or `make test` has installed the virtualenv (it does not reinstall).
Exit status 0 when every process stayed alive and no request failed with a 5xx or none of the
processes logged a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TASK_DONE = re.compile(r"Task (console\.tasks\.\w+)\[[^]]+\] succeeded")
TROUBLE = ("Traceback", "Unrecoverable error", "CRITICAL")
IMAGE = "rlinf/rlinf:0.2-torch2.6"
COMMAND = ["sim", "ray-head"]  # a simulated process that keeps running


@dataclass
class Soak:
    var_dir: Path
    port: int
    token: str = ""
    statuses: Counter[int] = field(default_factory=Counter)
    operations: Counter[str] = field(default_factory=Counter)
    created: list[int] = field(default_factory=list)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One API request; its status is counted, and a 4xx or 5xx answers None."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/v1{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                self.statuses[response.status] += 1
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            self.statuses[error.code] += 1
            return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def manage(env: dict[str, str], *args: str) -> str:
    command = [str(ROOT / ".venv/bin/python"), "manage.py", *args]
    return subprocess.run(
        command, env=env, cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def follow(stream: Any, log: Path, lines: list[str]) -> None:
    """Copies the processes' output to the log file and keeps it for the figures."""
    with log.open("w") as out:
        for line in stream:
            out.write(line)
            out.flush()
            lines.append(line)


def wait_for_api(soak: Soak, alive: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{soak.port}/accounts/login/", timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the web server did not answer: see " + str(soak.var_dir / "soak.log"))


def act(soak: Soak, step: int) -> None:
    """One step of a user's day: read the jobs every time, and every fifth step create, stop,
    resume, clone or delete a job (in turn)."""
    page = soak.call("GET", "/jobs?limit=200") or {"results": []}
    soak.call("GET", "/clusters")
    if step % 5:
        return
    jobs = {job["id"]: job for job in page["results"]}
    mine = [jobs[pk] for pk in soak.created if pk in jobs]
    action = ("create", "stop", "resume", "clone", "delete")[(step // 5) % 5]
    soak.operations[action] += 1
    if action == "create":
        spec = {
            "name": f"soak-{step}",
            "cluster": "demo",
            "project": "demo",
            "tasks": [{"role": "worker", "replicas": 2, "image": IMAGE, "command": COMMAND}],
        }
        created = soak.call("POST", "/jobs", spec)
        if created:
            soak.created.append(created["id"])
    elif action in ("stop", "resume"):
        wanted = "Stopped" if action == "resume" else "Running"
        for job in (job for job in mine if job["phase"] == wanted):
            soak.call("POST", f"/jobs/{job['id']}/{action}")
            break
    elif action == "clone" and mine:
        clone = soak.call("POST", f"/jobs/{mine[0]['id']}/clone", {"name": f"soak-clone-{step}"})
        if clone:
            soak.created.append(clone["id"])
    elif action == "delete" and len(mine) > 4:
        soak.call("DELETE", f"/jobs/{mine[0]['id']}?confirm={mine[0]['name']}")


def broker_rows(var_dir: Path) -> int:
    with sqlite3.connect(var_dir / "broker.sqlite3") as broker:
        return int(broker.execute("SELECT count(*) FROM kombu_message").fetchone()[0])


def figures(soak: Soak, lines: list[str], wall: float, simulated: float) -> dict[str, Any]:
    tasks = Counter(m.group(1) for line in lines if (m := TASK_DONE.search(line)))
    operations = Counter[str]()
    for pk in soak.created:
        for operation in soak.call("GET", f"/jobs/{pk}/operations") or []:
            operations[operation["result"]] += 1
    page = soak.call("GET", "/jobs?limit=200") or {"results": []}
    return {
        "wall seconds": round(wall),
        "simulated minutes": round(simulated, 1),
        "tasks run by the worker": dict(tasks),
        "API answers by status": dict(soak.statuses),
        "actions asked": dict(soak.operations),
        "operations of the soak's jobs by result": dict(operations),
        "jobs by phase at the end": dict(Counter(job["phase"] for job in page["results"])),
        "log lines with a traceback or unrecoverable error": sum(
            any(word in line for word in TROUBLE) for line in lines
        ),
        "messages left in the broker": broker_rows(soak.var_dir),
    }


def exercise(
    soak: Soak,
    env: dict[str, str],
    make: subprocess.Popen[str],
    lines: list[str],
    minutes: float,
    speed: float,
) -> dict[str, Any]:
    """Uses the console for the span of wall time; the figures, or {} if a process died."""
    wait_for_api(soak, make, timeout=120)
    soak.token = manage(env, "issue_token", "demo", "--name", "soak").strip()
    started = time.monotonic()
    step = 0
    while time.monotonic() - started < minutes * 60 / speed and make.poll() is None:
        act(soak, step)
        step += 1
        time.sleep(2)
    elapsed = time.monotonic() - started
    if make.poll() is not None or any(" stopped (rc=" in line for line in lines):
        return {}
    return figures(soak, lines, elapsed, elapsed * speed / 60)


def run(minutes: float, speed: float, var_dir: Path) -> int:
    soak = Soak(var_dir=var_dir, port=free_port())
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")} | {
        "TRAINYARD_VAR_DIR": str(var_dir),
        "TRAINYARD_PORT": str(soak.port),
        "TRAINYARD_SIM_PORT": str(free_port()),
        "TRAINYARD_SIM_SPEED": str(speed),
        "TRAINYARD_SYNC_INTERVAL": "1",
        "TRAINYARD_LOG_DETAIL": "true",  # a line per task done: the figures count them
    }
    make = subprocess.Popen(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "run"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=follow, args=(make.stdout, var_dir / "soak.log", lines))
    reader.start()
    try:
        results = exercise(soak, env, make, lines, minutes, speed)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGINT)  # as Ctrl-C in the terminal
        make.wait(timeout=60)
        reader.join(timeout=10)
    alive = bool(results)
    results["every process alive at the end"] = alive
    print(json.dumps(results, indent=2))
    if not alive:
        print("".join(lines[-40:]), file=sys.stderr)
    failed = not alive or results.get("log lines with a traceback or unrecoverable error", 1) > 0
    return 1 if failed or any(status >= 500 for status in soak.statuses) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30, help="simulated minutes (30)")
    parser.add_argument("--speed", type=float, default=10, help="simulated time per wall time")
    parser.add_argument("--var-dir", type=Path, help="default: a new temporary directory")
    options = parser.parse_args()
    var_dir = options.var_dir or Path(tempfile.mkdtemp(prefix="trainyard-soak-"))
    var_dir.mkdir(parents=True, exist_ok=True)
    print(f"soak: {options.minutes} simulated minutes at speed {options.speed}; files in {var_dir}")
    return run(options.minutes, options.speed, var_dir)


if __name__ == "__main__":
    sys.exit(main())
