"""client/trainyard_signal.py against a live console: the kinds arrive as rows, many calls make
few requests, and nothing is ever raised into training or fails a shell entrypoint."""

from __future__ import annotations

import atexit
import http.server
import importlib.util
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from jobs.models import Job, Signal

CLIENT = Path(__file__).resolve().parents[2] / "client" / "trainyard_signal.py"


def client() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trainyard_signal", CLIENT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def job(signalling_job: Job) -> Job:
    return signalling_job


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.django_db(transaction=True)
def test_every_kind_arrives_with_its_fields(job: Job) -> None:
    signals = client().Signals(interval=0.01)
    signals.heartbeat()
    signals.phase("training")
    signals.progress(3, max_steps=10, step_seconds=1.5, metrics={"loss": 0.4})
    signals.progress(4, metrics={"loss": "not a number"})  # printed, not raised, not sent
    signals.checkpoint(3, "/out/ckpt")
    signals.ray(4, 3, gpus=32)
    signals.completion("failed", exit_code=1, reason="NCCLTimeout", message="rank 3")
    rows = {row.kind: row for row in Signal.objects.filter(job=job)}
    assert list(Signal.objects.filter(job=job).order_by("seq").values_list("kind", flat=True)) == [
        "heartbeat", "phase", "progress", "checkpoint", "ray", "completion",
    ]  # fmt: skip
    assert {row.pod for row in rows.values()} == {"ppo-head-0"}
    assert rows["phase"].data["phase"] == "training"
    assert rows["progress"].data["step"] == 3
    assert rows["progress"].data["max_steps"] == 10
    assert rows["progress"].data["metrics"] == {"loss": 0.4}
    assert Signal.objects.filter(job=job, kind="progress").count() == 1
    assert rows["checkpoint"].data["path"] == "/out/ckpt"
    assert rows["ray"].data["alive_nodes"] == 3
    assert rows["completion"].data["exit_code"] == 1
    assert rows["completion"].data["reason"] == "NCCLTimeout"


@pytest.mark.django_db(transaction=True)
def test_many_calls_are_sent_in_few_requests(job: Job) -> None:
    module = client()
    signals = module.Signals()
    for step in range(250):
        signals.progress(step, max_steps=250, metrics={"loss": 1 / (step + 1)})
    assert signals.flush(10)
    assert Signal.objects.filter(job=job, kind="progress").count() == 250
    assert signals.requests <= 4  # 100 per request; the first may leave alone


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_beats_as_often_as_the_policy_in_the_environment(
    job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRAINYARD_HEARTBEAT_SECONDS (the Job's policy, set by the console) paces the thread:
    three heartbeats arrive where the 30 s default would have sent one."""
    monkeypatch.setenv("TRAINYARD_HEARTBEAT_SECONDS", "0.2")
    signals = client().Signals(interval=0.01)
    signals.start_heartbeat()
    beats = Signal.objects.filter(job=job, kind="heartbeat")
    deadline = time.monotonic() + 30
    while beats.count() < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    signals.enabled = False  # the daemon thread beats into nothing from here on
    assert beats.count() >= 3


@pytest.mark.django_db(transaction=True)
def test_a_batch_above_the_size_limit_is_split(job: Job) -> None:
    signals = client().Signals(interval=0.01)
    for step in range(100):  # 100 messages with 32 long metric names: above 64 KiB together
        signals.progress(step, metrics={f"actor/{'x' * 40}_{n}": n for n in range(40)})
    assert signals.flush(10)
    assert Signal.objects.filter(job=job, kind="progress").count() == 100
    assert {len(row.data["metrics"]) for row in Signal.objects.filter(job=job)} == {32}


@pytest.mark.django_db(transaction=True)
def test_the_module_functions_use_the_environment(job: Job) -> None:
    signal = client()
    signal.progress(step=3, max_steps=10)
    signal.completion("succeeded", exit_code=0)
    assert sorted(Signal.objects.filter(job=job).values_list("kind", flat=True)) == [
        "completion", "progress",
    ]  # fmt: skip


def test_an_unreachable_console_is_printed_never_raised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    signals = client().Signals(
        url=f"http://127.0.0.1:{closed_port()}/s", token="t", pod="p", uid="u", backoff=0.01
    )
    signals.progress(1)
    signals.completion("succeeded", timeout=0.3)  # gives up waiting, does not raise
    atexit.unregister(signals.flush)
    assert "unreachable" in capsys.readouterr().err


def test_its_retries_leave_the_programs_random_numbers_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A training program seeds `random` for a reproducible run: the sender's retries draw their
    jitter from a generator of their own, so the program's sequence is the one it seeded."""
    signals = client().Signals(
        url=f"http://127.0.0.1:{closed_port()}/s", token="t", pod="p", uid="u", backoff=0.01
    )
    random.seed(7)
    state = random.getstate()
    signals.progress(1)
    assert not signals.flush(0.3)  # retried (the backoff doubles from 10 ms), never sent
    atexit.unregister(signals.flush)
    assert random.getstate() == state
    assert "unreachable" in capsys.readouterr().err


@pytest.mark.django_db(transaction=True)
def test_a_refused_batch_is_dropped_with_one_warning(
    job: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    signals = client().Signals(token="not-a-token", interval=0.01)
    signals.phase("training")
    signals.phase("evaluating")
    assert signals.flush(5)
    assert not Signal.objects.filter(job=job).exists()
    assert capsys.readouterr().err.count("dropped: 401") == 1


def test_disabled_without_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRAINYARD_SIGNAL_URL", raising=False)
    signal = client()
    signal.progress(step=1)
    signal.completion("succeeded")
    assert not signal.default().enabled
    assert signal.default()._sender is None


def test_429_and_503_are_retried() -> None:
    answers = [429, 503, 202]
    bodies: list[bytes] = []

    class Stub(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(answers.pop(0))
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/s"
        signals = client().Signals(url=url, token="t", pod="p", uid="u", backoff=0.01)
        signals.progress(1)
        assert signals.flush(5)
    finally:
        server.shutdown()
        server.server_close()
    assert answers == []
    assert len(bodies) == 3 and bodies[0] == bodies[2]  # the same batch, same seq, resent


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CLIENT), "--timeout", "5", *args],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_the_command_line_stores_the_signal(job: Job) -> None:
    args = ["progress", "--step", "3", "--max-steps", "10", "--metric", "loss=0.4"]
    done = cli(*args, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    done = cli("completion", "succeeded", "--exit-code", "0", env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    progress = Signal.objects.get(job=job, kind="progress")
    assert progress.data["metrics"] == {"loss": 0.4}
    assert Signal.objects.get(job=job, kind="completion").data["outcome"] == "succeeded"


def test_the_command_line_exits_0_when_the_console_is_unreachable() -> None:
    env = {
        **os.environ,
        "TRAINYARD_SIGNAL_URL": f"http://127.0.0.1:{closed_port()}/s",
        "TRAINYARD_SIGNAL_TOKEN": "t", "TRAINYARD_POD": "p", "TRAINYARD_POD_UID": "u",
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(CLIENT), "--timeout", "1", "phase", "training"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0
    assert "unreachable" in done.stderr


def test_flush_waits_only_for_what_was_queued_before_it() -> None:
    """A heartbeat thread keeps the queue from ever being empty: flush (and completion, which
    flushes) still returns once the earlier messages are sent."""
    kinds: list[str] = []

    class Stub(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            kinds.extend(message["kind"] for message in body)
            time.sleep(0.02)  # a few heartbeats are queued while each batch is sent
            self.send_response(202)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/s"
    signals = client().Signals(url=url, token="t", pod="p", uid="u", interval=0.05)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.005):
            signals.heartbeat()

    beating = threading.Thread(target=beat)
    beating.start()
    try:
        signals.progress(1)
        assert signals.flush(2)
        assert "progress" in kinds
    finally:
        stop.set()
        beating.join()
        signals.flush(5)
        atexit.unregister(signals.flush)
        server.shutdown()
        server.server_close()
