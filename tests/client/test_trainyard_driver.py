"""client/trainyard_driver.py, the RLinf driver wrapper (issue 11, item 2; docs/workload-signals.md,
"Driver wrapper"): run as a subprocess in front of a fake RLinf entry, with a fake `ray` on PATH
that reports the alive nodes and a local HTTP receiver standing in for the console.

The fixtures are RLinf's own output: tests/fixtures/rlinf_driver.log was printed by RLinf's
`print_metrics_table` (rlinf/utils/metric_utils.py) with the embodied runner's metric names, and
tests/fixtures/rlinf_driver_reasoning.err by tqdm 4.70 with the reasoning runner's `Global Step`
bar (ncols=1650, `set_postfix(..., refresh=False)` then `update(1)`), its clock stepped 61 s a
step."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from jobs.models import Job, WorkloadReport

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "client" / "trainyard_driver.py"
ENTRY = Path(__file__).with_name("fake_rlinf_entry.py")
EMBODIED = ROOT / "tests" / "fixtures" / "rlinf_driver.log"
REASONING = ROOT / "tests" / "fixtures" / "rlinf_driver_reasoning.err"
WAIT = 30.0  # a bound on waiting for an event, never a pause

FAKE_RAY = f"""#!{sys.executable}
# `ray list nodes --format=json ...`: the first line of ALIVE is the alive count of this call
# (the last one stays); "fail" exits 1 as Ray does when it is not up, "garbage" answers no JSON.
import json, pathlib, sys
counts = pathlib.Path(__file__).with_name("ALIVE")
lines = counts.read_text().split()
if len(lines) > 1:
    counts.write_text("\\n".join(lines[1:]))
if lines[0] == "fail":
    sys.exit("Traceback (most recent call last):\\nConnectionError: Ray is not running")
if lines[0] == "garbage":
    sys.exit(print("Dashboard is starting"))
node = {{"state": "ALIVE", "resources_total": {{"CPU": 8.0, "GPU": 4.0, "memory": "1 GiB"}}}}
dead = {{"state": "DEAD", "resources_total": {{"GPU": 4.0}}}}
print(json.dumps([node] * int(lines[0]) + [dead]))
"""


def driver_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trainyard_driver", DRIVER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Receiver(http.server.ThreadingHTTPServer):
    """The console's signals endpoint, as far as the client sees it: it takes everything."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.messages: list[dict[str, Any]] = []
        self.arrived = threading.Condition()

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        with self.arrived:
            return [message for message in self.messages if message["kind"] == kind]

    def wait_for(self, kind: str) -> dict[str, Any]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: self.kinds(kind), WAIT), f"no {kind} signal"
            return self.kinds(kind)[-1]


class Handler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.arrived:
            self.server.messages.extend(body if isinstance(body, list) else [body])
            self.server.arrived.notify_all()
        self.send_response(202)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def env(tmp_path: Path, receiver: Receiver) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ray").write_text(FAKE_RAY)
    (bin_dir / "ray").chmod(0o755)
    (bin_dir / "ALIVE").write_text("2")
    clean = {name: value for name, value in os.environ.items() if not name.startswith("TRAINYARD")}
    return {
        **clean,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TRAINYARD_SIGNAL_URL": f"http://127.0.0.1:{receiver.server_port}/signals",
        "TRAINYARD_SIGNAL_TOKEN": "token", "TRAINYARD_POD": "ppo-head-0",
        "TRAINYARD_POD_UID": "uid-1", "TRAINYARD_RUN": "1",
        "TRAINYARD_TERMINATION_LOG": str(tmp_path / "termination-log"),
        "TRAINYARD_HEARTBEAT_SECONDS": "0.2",
        "PYTHONFAULTHANDLER": "1",  # SIGABRT prints where each thread is
    }  # fmt: skip


class Driver:
    """The wrapper running as the head container's main process, its output collected."""

    def __init__(self, env: dict[str, str], *args: str, entry: tuple[str, ...] = ()) -> None:
        command = [sys.executable, str(DRIVER), "--poll-seconds", "0.05", *args, "--"]
        command += [sys.executable, str(ENTRY), *entry]
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.output = {"stdout": b"", "stderr": b""}
        self.grew = threading.Condition()
        self.readers = [
            threading.Thread(target=self._read, args=(name,), daemon=True)
            for name in self.output
        ]  # fmt: skip
        for reader in self.readers:
            reader.start()

    def _read(self, name: str) -> None:
        stream = getattr(self.process, name)
        while chunk := os.read(stream.fileno(), 65536):
            with self.grew:
                self.output[name] += chunk
                self.grew.notify_all()

    def wait_for(self, text: str, stream: str = "stderr") -> None:
        with self.grew:
            found = self.grew.wait_for(lambda: text.encode() in self.output[stream], WAIT)
        assert found, f"{text!r} never came; stderr: {self.output['stderr'][-2000:]!r}"

    def stop(self) -> int:
        """SIGTERM, as the kubelet sends it; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(WAIT)
            for reader in self.readers:
                reader.join(WAIT)
            stderr = self.output["stderr"][-4000:].decode(errors="replace")
            raise AssertionError(f"still running {WAIT:g} s after SIGTERM:\n{stderr}") from None
        self._drain()
        return code

    def exited(self) -> int:
        """It ends by itself: its exit code, once its output is read to the end."""
        code = self.process.wait(WAIT)
        self._drain()
        return code

    def _drain(self) -> None:
        for reader in self.readers:
            reader.join(WAIT)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def idles(self) -> bool:
        self.wait_for("trainyard driver: idle")
        return self.process.poll() is None


def read_json(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def test_it_passes_the_output_through_and_reports_the_entry_exit_code(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    marker = tmp_path / "out" / ".trainyard-completed"
    driver = Driver(
        env, "--expected-nodes", "2", "--done-marker", str(marker),
        entry=("--stdout", str(EMBODIED), "--stderr", str(REASONING), "--exit", "3"),
    )  # fmt: skip
    completion = receiver.wait_for("completion")
    assert driver.idles()
    assert driver.stop() == 0
    assert completion["outcome"] == "failed"
    assert completion["exit_code"] == 3  # the entry's own, as no `| tee` would keep it
    assert completion["reason"] == "Error"
    assert completion["message"].endswith("RuntimeError: NCCL watchdog timeout (exit 3)")
    assert len(completion["message"]) <= 1024
    assert driver.output["stdout"] == EMBODIED.read_bytes()  # every byte, in order
    assert REASONING.read_bytes() in driver.output["stderr"]  # with the driver's own lines
    termination = read_json(tmp_path / "termination-log")
    assert termination == {
        "trainyard": "completion", "outcome": "failed", "exit_code": 3, "reason": "Error",
        "message": completion["message"],
    }  # fmt: skip
    assert read_json(marker) == {**termination, "run": "1"}


def test_it_reports_the_signal_that_killed_the_entry(
    env: dict[str, str], receiver: Receiver
) -> None:
    script = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    command = [sys.executable, str(DRIVER), "--expected-nodes", "0", "--", sys.executable]
    process = subprocess.Popen([*command, "-c", script], env=env, stderr=subprocess.DEVNULL)
    completion = receiver.wait_for("completion")
    process.send_signal(signal.SIGTERM)
    assert process.wait(WAIT) == 0
    assert (completion["exit_code"], completion["reason"]) == (137, "SIGKILL")


def test_it_reports_success_then_idles_until_sigterm(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    driver = Driver(env, "--expected-nodes", "2", entry=("--stdout", str(EMBODIED)))
    completion = receiver.wait_for("completion")
    assert (completion["outcome"], completion["exit_code"]) == ("succeeded", 0)
    assert driver.idles()  # the StatefulSet sees a running container, never a rerun
    receiver.wait_for("heartbeat")
    assert driver.stop() == 0
    assert read_json(tmp_path / "termination-log")["outcome"] == "succeeded"
    phases = [message["phase"] for message in receiver.kinds("phase")]
    assert phases == ["starting", "waiting_for_nodes", "initializing", "training"]


def test_a_done_marker_prevents_training_again_in_the_same_run(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    marker, starts = tmp_path / ".trainyard-completed", tmp_path / "starts"
    args = ("--expected-nodes", "2", "--done-marker", str(marker))
    entry = ("--starts", str(starts), "--exit", "1")
    first = Driver(env, *args, entry=entry)
    receiver.wait_for("completion")
    assert first.idles()
    assert first.stop() == 0
    receiver.messages.clear()
    (tmp_path / "termination-log").unlink()

    restarted = Driver({**env, "TRAINYARD_POD_UID": "uid-2"}, *args, entry=entry)
    completion = receiver.wait_for("completion")
    assert restarted.idles()
    assert restarted.stop() == 0
    assert starts.read_text() == "started\n"  # once: the restarted head did not train
    assert (completion["outcome"], completion["exit_code"], completion["uid"]) == (
        "failed", 1, "uid-2",
    )  # fmt: skip
    assert not receiver.kinds("phase")  # no "starting": that would end the recorded completion
    assert read_json(tmp_path / "termination-log")["exit_code"] == 1


def test_a_resumed_job_trains_again(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    marker, starts = tmp_path / ".trainyard-completed", tmp_path / "starts"
    args = ("--expected-nodes", "2", "--done-marker", str(marker))
    first = Driver(env, *args, entry=("--starts", str(starts)))
    receiver.wait_for("completion")
    assert first.stop() == 0
    resumed = Driver({**env, "TRAINYARD_RUN": "2"}, *args, entry=("--starts", str(starts)))
    resumed.wait_for("trainyard driver: idle")
    assert resumed.stop() == 0
    assert starts.read_text() == "started\nstarted\n"
    assert read_json(marker)["run"] == "2"


def test_the_done_marker_can_come_from_the_environment(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    marker = tmp_path / "done"
    driver = Driver({**env, "TRAINYARD_DONE_MARKER": str(marker)}, "--expected-nodes", "0")
    receiver.wait_for("completion")
    assert driver.stop() == 0
    assert read_json(marker)["outcome"] == "succeeded"


def test_it_waits_for_the_expected_nodes(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    (tmp_path / "bin" / "ALIVE").write_text("fail garbage 1 1 2")
    driver = Driver(env, "--expected-nodes", "2", entry=("--stdout", str(EMBODIED)))
    receiver.wait_for("completion")
    assert driver.stop() == 0
    rays = [(m["alive_nodes"], m["expected_nodes"], m["gpus"]) for m in receiver.kinds("ray")]
    assert rays[:3] == [(1, 2, 4), (1, 2, 4), (2, 2, 8)]  # Ray down: nothing to say
    kinds = [message["kind"] for message in receiver.messages if message["kind"] != "heartbeat"]
    assert kinds.index("ray") > kinds.index("phase")  # waiting_for_nodes comes first
    assert receiver.kinds("phase")[1]["phase"] == "waiting_for_nodes"
    assert b"`ray list nodes` exited 1: ConnectionError: Ray is not" in driver.output["stderr"]
    assert b"answered no node list: 'Dashboard is starting'" in driver.output["stderr"]


def test_too_few_nodes_in_time_is_a_failed_completion(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    (tmp_path / "bin" / "ALIVE").write_text("1")
    marker, starts = tmp_path / ".trainyard-completed", tmp_path / "starts"
    driver = Driver(
        env, "--expected-nodes", "3", "--nodes-timeout", "0.3", "--done-marker", str(marker),
        entry=("--starts", str(starts)),
    )  # fmt: skip
    completion = receiver.wait_for("completion")
    assert driver.idles()
    assert driver.stop() == 0
    assert completion["outcome"] == "failed"
    assert completion["reason"] == "RayNodesTimeout"
    assert completion["message"] == "Ray has 1 of 3 expected nodes alive after 0.3 s"
    assert "exit_code" not in completion
    assert not starts.exists()
    assert read_json(tmp_path / "termination-log")["reason"] == "RayNodesTimeout"
    assert read_json(marker)["reason"] == "RayNodesTimeout"
    said = b"trainyard driver: Ray has 1 of 3 expected nodes alive after 0.3 s\n"
    assert said in driver.output["stderr"]  # on its log too: the kept log names the failure


def without_ray_default(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Ray installed as plain `ray`: its dashboard's optional dependencies are missing, as
    Python says it of aiohttp (a stand-in `ray` package the fake `ray` command's Python finds)."""
    dashboard = tmp_path / "site" / "ray" / "dashboard"
    dashboard.mkdir(parents=True)
    (dashboard.parent / "__init__.py").write_text("")
    (dashboard / "__init__.py").write_text("")
    (dashboard / "optional_deps.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'aiohttp'\", name='aiohttp')\n"
    )
    return env | {"PYTHONPATH": str(tmp_path / "site")}


def test_it_fails_at_once_and_exits_2_when_ray_lacks_its_state_api(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    """Issue 31, item 3: with plain `ray` the wrapper waited its whole node deadline, then said
    "0 of 2 expected nodes alive". It now says why at once, and the container fails."""
    marker, starts = tmp_path / ".trainyard-completed", tmp_path / "starts"
    driver = Driver(
        without_ray_default(env, tmp_path), "--expected-nodes", "2", "--nodes-timeout", "600",
        "--done-marker", str(marker), entry=("--starts", str(starts)),
    )  # fmt: skip
    assert driver.exited() == 2
    completion = receiver.wait_for("completion")
    assert completion["outcome"] == "failed"
    assert completion["reason"] == "RayStateApiMissing"
    assert "without ray[default] (its module aiohttp is missing)" in completion["message"]
    assert not receiver.kinds("ray")  # no wait, no "0 of 2 alive"
    assert read_json(tmp_path / "termination-log")["reason"] == "RayStateApiMissing"
    assert not marker.exists() and not starts.exists()
    assert b"Install ray[default] in the image." in driver.output["stderr"]


def test_it_fails_at_once_without_ray_on_path(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    driver = Driver(env | {"PATH": str(empty)}, "--expected-nodes", "2")
    assert driver.exited() == 2
    completion = receiver.wait_for("completion")
    assert completion["reason"] == "RayStateApiMissing"
    assert completion["message"].startswith("the `ray` command is not on PATH")


def test_it_waits_as_before_when_rays_install_cannot_be_judged(
    env: dict[str, str], receiver: Receiver
) -> None:
    """The fake `ray` runs in a Python without Ray at all (the tests' own): nothing is judged,
    the wrapper waits for the nodes as it always did."""
    driver = Driver(env, "--expected-nodes", "2", entry=("--stdout", str(EMBODIED)))
    assert receiver.wait_for("completion")["outcome"] == "succeeded"
    assert driver.stop() == 0


def test_sigterm_while_waiting_for_nodes_exits_0(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    (tmp_path / "bin" / "ALIVE").write_text("1")
    driver = Driver(env, "--expected-nodes", "2")
    receiver.wait_for("ray")
    assert driver.stop() == 0
    assert not receiver.kinds("completion")


def test_sigterm_while_training_goes_to_the_entry_and_is_no_completion(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    marker = tmp_path / ".trainyard-completed"
    driver = Driver(
        env, "--expected-nodes", "2", "--done-marker", str(marker),
        entry=("--until-sigterm", "--exit", "7"),
    )  # fmt: skip
    driver.wait_for("training until SIGTERM", "stdout")
    assert driver.stop() == 7  # the entry's answer to SIGTERM: the Job is being stopped
    assert not receiver.kinds("completion")
    assert not marker.exists()  # a resume trains again
    assert not (tmp_path / "termination-log").exists()


def test_it_reports_ray_membership_while_the_entry_runs(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    driver = Driver(env, "--expected-nodes", "2", entry=("--until-sigterm",))
    driver.wait_for("training until SIGTERM", "stdout")
    (tmp_path / "bin" / "ALIVE").write_text("1")  # a worker pod is lost
    with receiver.arrived:
        lost = receiver.arrived.wait_for(
            lambda: any(m["alive_nodes"] == 1 for m in receiver.kinds("ray")), WAIT
        )
    driver.stop()
    assert lost


def test_progress_is_read_from_the_entry_output(env: dict[str, str], receiver: Receiver) -> None:
    driver = Driver(
        env, "--expected-nodes", "0", entry=("--stdout", str(EMBODIED), "--stderr", str(REASONING))
    )
    receiver.wait_for("completion")
    assert driver.stop() == 0
    table = [m for m in receiver.kinds("progress") if m["max_steps"] == 1000]
    assert [m["step"] for m in table] == [1, 2, 3]
    assert table[2]["metrics"]["env/success_once"] == 0.506
    bar = [m for m in receiver.kinds("progress") if m["max_steps"] == 4]
    assert [m["step"] for m in bar] == [0, 1, 2, 3, 4, 4]  # tqdm draws the last one twice
    assert bar[3]["step_seconds"] == 62.53
    assert bar[3]["metrics"]["rewards"] == 0.472


def test_without_the_signal_client_it_still_records_and_idles(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    alone = tmp_path / "alone" / "trainyard_driver.py"
    alone.parent.mkdir()
    alone.write_bytes(DRIVER.read_bytes())
    command = [sys.executable, str(alone), "--expected-nodes", "2", "--", sys.executable]
    process = subprocess.Popen(
        [*command, str(ENTRY), "--exit", "4"], env=env, stderr=subprocess.PIPE
    )  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:
        if b"trainyard driver: idle" in line:
            break
    process.send_signal(signal.SIGTERM)
    assert process.wait(WAIT) == 0
    process.stderr.close()
    assert read_json(tmp_path / "termination-log")["exit_code"] == 4
    assert not receiver.messages  # nothing could be sent: the fallback the console reads


# --- the parts, in this process -----------------------------------------------------------------


def progress_of(data: bytes, chunk: int) -> list[Any]:
    """Feed `data` through `pump` in chunks of `chunk` bytes, as a pipe would hand it over."""
    driver = driver_module()
    parser, found = driver.ProgressParser(), []

    def on_line(line: str, ended: bool) -> None:
        if progress := parser.feed(line):
            found.append(progress)

    read_end, write_end = os.pipe()
    with open(os.devnull, "wb") as sink, os.fdopen(read_end, "rb") as source:
        pumping = threading.Thread(target=driver.pump, args=(source, sink, on_line))
        pumping.start()
        with os.fdopen(write_end, "wb", buffering=0) as entry:
            for start in range(0, len(data), chunk):
                entry.write(data[start : start + chunk])
        pumping.join(WAIT)
    return found


def test_the_metric_table_gives_a_step_with_its_metrics() -> None:
    table = progress_of(EMBODIED.read_bytes(), 65536)
    assert [(p.step, p.max_steps, p.step_seconds) for p in table] == [
        (1, 1000, 95.0), (2, 1000, 63.25), (3, 1000, 52.667),
    ]  # fmt: skip
    metrics = table[0].metrics
    assert metrics["env/success_once"] == 0.406
    assert metrics["train/actor/policy_loss"] == -0.012
    assert metrics["train/actor/lr"] == 2e-06
    assert metrics["rollout/advantages_mean"] == 3.1e-05
    assert metrics["time/actor/run_training"] == 10.7
    assert "train/critic/explained_variance" not in metrics  # nan: the console refuses it
    assert len(metrics) == 22


def test_a_line_split_across_reads_is_read_whole() -> None:
    whole = progress_of(EMBODIED.read_bytes(), 65536)
    assert progress_of(EMBODIED.read_bytes(), 7) == whole  # 7 bytes cut "│" and "─" apart


def test_the_tqdm_bar_gives_a_step_as_it_is_drawn() -> None:
    bar = progress_of(REASONING.read_bytes(), 65536)
    assert [(p.step, p.max_steps, p.step_seconds) for p in bar] == [
        (0, 4, None), (1, 4, 61.3), (2, 4, 61.89), (3, 4, 62.53), (4, 4, 63.23), (4, 4, 62.8),
    ]  # fmt: skip
    assert bar[1].metrics["policy_loss"] == -0.00413
    assert bar[1].metrics["lr"] == 1e-06
    assert "entropy" not in bar[1].metrics


def test_at_most_32_metrics_timings_last() -> None:
    parser = driver_module().ProgressParser()
    postfix = ", ".join([f"t{n}_time=1" for n in range(30)] + [f"m{n}=2" for n in range(10)])
    line = f"Global Step:  50%|█████     | 5/10 [05:00<05:00,  2.00it/s, {postfix}]"
    progress = parser.feed(line)
    assert progress.step_seconds == 0.5
    assert len(progress.metrics) == 32 and all(progress.metrics[f"m{n}"] == 2 for n in range(10))
    table = parser.feed("│ Global Step:    7/10 │ Progress: ██░░ │  70.0%")
    parser.feed("├──── Time ────┤")
    parser.feed("│" + "│".join(f"x{n}=1.0" for n in range(40)) + "│")
    parser.feed("├──── Rollout ────┤")
    parser.feed("│rewards=0.5│")
    progress = parser.feed("╰────╯")
    assert table is None and progress.step == 7
    assert len(progress.metrics) == 32 and progress.metrics["rollout/rewards"] == 0.5


def test_the_termination_message_fits_what_the_kubelet_keeps() -> None:
    completion = driver_module().Completion("failed", 1, "Error", "错" * 1024)
    document = completion.document()
    assert len(document.encode()) <= 4096
    assert json.loads(document)["message"].endswith("错")


@pytest.mark.django_db(transaction=True)
def test_the_console_takes_what_the_driver_sends(signalling_job: Job) -> None:
    """Against the console itself: every message is valid (no NaN, names within 64), so the
    workload report holds the last step and the completion."""
    env = {**os.environ, "TRAINYARD_TERMINATION_LOG": os.devnull}
    command = [sys.executable, str(DRIVER), "--expected-nodes", "0", "--"]
    command += [sys.executable, str(ENTRY), "--stdout", str(EMBODIED)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    for line in process.stderr:  # until it idles
        if b"trainyard driver: idle" in line:
            break
    process.send_signal(signal.SIGTERM)
    assert process.wait(WAIT) == 0
    process.stderr.close()
    report = WorkloadReport.objects.get(job=signalling_job)
    assert report.outcome == "succeeded"
    assert report.latest["progress"]["step"] == 3
    assert report.latest["phase"]["phase"] == "training"
