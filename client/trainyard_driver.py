"""Trainyard's driver wrapper for RLinf on Ray: one file, Python 3.8+ standard library only.

It runs in the Ray head container after the head is up, in front of the training entry:

    ray start --head --port=6379 --block &
    exec python /opt/trainyard/trainyard_driver.py --expected-nodes "$TRAINYARD_EXPECTED_NODES" \\
        --done-marker "$LOG_PATH/.trainyard-completed" -- python train_embodied_agent.py ...

1. It waits until Ray has the expected nodes alive (`ray list nodes` in a subprocess: Ray is
   never imported here), reporting phase `waiting_for_nodes` and `ray` membership; after
   --nodes-timeout seconds it reports a failed completion (reason RayNodesTimeout). First it
   checks that Ray's state API can answer at all: without `ray` on PATH, or with Ray installed
   without `ray[default]` (no dashboard, which serves the state API), it reports a failed
   completion at once (reason RayStateApiMissing) and exits 2, instead of waiting out its
   deadline to report "0 of N nodes alive".
2. It runs the entry as its own process: the exit code is the entry's, never a `tee`'s. Its
   output is passed through as it comes (stdout to stdout, stderr to stderr: `kubectl logs`
   shows both), with PYTHONUNBUFFERED=1 so a Python entry's lines are not held in a buffer.
3. RLinf's progress lines (the embodied runner's metric table, the tqdm `Global Step` bar of
   the reasoning, agent and SFT runners) become `progress` signals as they pass; a heartbeat
   goes every TRAINYARD_HEARTBEAT_SECONDS (30), Ray membership with it while the entry runs.
4. When the entry ends it reports the completion (succeeded on 0, else failed with the exit
   code, "Error" or the signal's name, and the end of stderr), writes the completion JSON to
   /dev/termination-log (TRAINYARD_TERMINATION_LOG) and to the done marker.
5. Then it idles until SIGTERM (exit 0), so the StatefulSet never restarts finished training.
   A head restarted in the same run finds the marker, reports the recorded completion again
   and idles; a resumed Job (a new TRAINYARD_RUN) trains again. A SIGTERM while the entry runs
   is passed to it and is no completion: the Job is being stopped, a resume goes on.

Signals go through trainyard_signal.py from the same directory; without it, or without
TRAINYARD_SIGNAL_URL, nothing is sent and the rest works alike. Nothing here raises into
training: a failure to signal, to probe Ray or to write a file is printed and passed over.
See docs/workload-signals.md, "Driver wrapper".
"""

from __future__ import annotations

import argparse
import codecs
import collections
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import trainyard_signal
except ImportError:  # the wrapper still runs, marks and idles; it only cannot tell the console
    trainyard_signal = None  # type: ignore[assignment]

TERMINATION_LOG = "/dev/termination-log"
TERMINATION_BYTES = 4096  # what the kubelet keeps of it
MESSAGE_CHARS = 1024
MAX_METRICS = 32
MAX_LINE = 65536  # longer partial lines are not parsed
PROBE_SECONDS = 20.0  # one `ray list nodes` at most
EXIT_NO_STATE_API = 2  # the image cannot run this wrapper: fail loudly, never idle
# Ray's own test of whether its dashboard, which serves the state API, can start on a node
# (ray/dashboard/optional_deps.py imports what `ray[default]` adds), run in Ray's Python: it
# prints the missing module and exits MISSING; a layout it does not know (a future Ray) says
# nothing, and the wait tells as before.
MISSING = 3
STATE_API_CHECK = """import sys
try:
    import ray.dashboard.optional_deps
except ModuleNotFoundError as error:
    if error.name and error.name.split(".")[0] != "ray":
        print(error.name)
        sys.exit(3)
"""


def say(text: str) -> None:
    print(f"trainyard driver: {text}", file=sys.stderr, flush=True)


# --- RLinf's progress lines ---------------------------------------------------------------------


class Progress(NamedTuple):
    step: int
    max_steps: int | None
    step_seconds: float | None
    metrics: dict[str, float]


# tqdm: "Global Step:  12%|█▏        | 12/100 [01:02<07:38,  5.21s/it, rewards=0.5, ...]"
TQDM = re.compile(r"Global Step:\s*\d+%\|[^|]*\|\s*(\d+)/(\d+|\?)\s*\[([^\]]*)\]")
RATE = re.compile(r"([\d.]+)(s/it|it/s)")
# the metric table: "│ Global Step:   12/100 │ Progress: ...", "│ Elapsed: ... │ Step Time: 5.2s"
TABLE_STEP = re.compile(r"│\s*Global Step:\s*(\d+)/(\d+)")
TABLE_STEP_TIME = re.compile(r"Step Time:\s*([\d.]+)s")
TABLE_SECTION = re.compile(r"├─+ (.+?) ─+┤")
TABLE_END = "╰"
# print_metrics_table files "env/x" under "Environment" as "x" (and "train/actor/x" as "actor/x")
SECTION_PREFIX = {
    "Time": "time/", "Environment": "env/", "Rollout": "rollout/", "Evaluation": "eval/",
    "Replay Buffer": "replay_buffer/", "Training/Actor": "train/", "Training/Critic": "train/",
    "Training/Other": "train/",
}  # fmt: skip


def number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None  # the console refuses NaN and infinity


def chosen(metrics: dict[str, float]) -> dict[str, float]:
    """At most 32, timings last (the table's time/..., the bar's ..._time): there are more of
    them than of anything else."""
    names = sorted(metrics, key=lambda name: name.startswith("time/") or name.endswith("_time"))
    names = names[:MAX_METRICS]
    return {name: metrics[name] for name in names}


class ProgressParser:
    """Feed it the lines of one stream; it answers a Progress when a step's report is complete.
    The metric table spans many lines, so the parser keeps the table being read."""

    def __init__(self) -> None:
        self.table: Progress | None = None
        self.prefix = ""

    def feed(self, line: str) -> Progress | None:
        bar = TQDM.search(line)
        if bar:
            return self._tqdm(bar)
        start = TABLE_STEP.search(line)
        if start:
            self.table, self.prefix = Progress(int(start[1]), int(start[2]), None, {}), ""
            return None
        if self.table is None:
            return None
        return self._table_line(self.table, line)

    def _tqdm(self, bar: re.Match[str]) -> Progress:
        parts = bar[3].split(", ")  # elapsed<remaining, rate, then the postfix's name=value
        rate, postfix = RATE.search(parts[1] if len(parts) > 1 else ""), parts[2:]
        seconds = None
        if rate and number(rate[1]):
            seconds = float(rate[1]) if rate[2] == "s/it" else 1 / float(rate[1])
        metrics = {}
        for name, _, text in (item.partition("=") for item in postfix):
            value = number(text)
            if value is not None and 0 < len(name) <= 64:
                metrics[name] = value
        total = None if bar[2] == "?" else int(bar[2])
        return Progress(int(bar[1]), total, seconds, chosen(metrics))

    def _table_line(self, table: Progress, line: str) -> Progress | None:
        if TABLE_END in line:
            self.table = None
            return table._replace(metrics=chosen(table.metrics))
        step_time = TABLE_STEP_TIME.search(line)
        section = TABLE_SECTION.search(line)
        if step_time:
            self.table = table._replace(step_seconds=number(step_time[1]))
        elif section:
            self.prefix = SECTION_PREFIX.get(section[1], "")
        else:
            for cell in line.split("│")[1:]:
                name, _, text = cell.strip().partition("=")
                value = number(text)
                if value is not None and 0 < len(self.prefix + name) <= 64:
                    table.metrics[self.prefix + name] = value
        return None


# --- the entry's output -------------------------------------------------------------------------

# A piece ends after "\n" or before "\r": tqdm redraws its bar as "\r<bar>" without a newline.
PIECES = re.compile(r"(?<=\n)|(?=\r)")


def pump(source: IO[bytes], sink: IO[bytes], on_line: Callable[[str, bool], None]) -> None:
    """Copy the entry's output to ours as it comes, and hand every line to `on_line(line, ended)`
    (`ended`: it ended with a newline). A "\\r" redraw that ends a read is whole (tqdm writes
    one redraw at once), so a bar is read when drawn, not when the next one comes."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    while True:
        chunk = os.read(source.fileno(), 65536)
        try:
            sink.write(chunk)
            sink.flush()
        except (OSError, ValueError):
            pass  # our own output is gone: keep draining, or the entry blocks on a full pipe
        if not chunk:
            break
        *pieces, pending = PIECES.split(pending + decoder.decode(chunk))
        if pending.startswith("\r") or len(pending) > MAX_LINE:
            pieces, pending = [*pieces, pending], ""
        for piece in pieces:
            if piece.strip("\r\n"):
                on_line(piece.strip("\r\n"), piece.endswith("\n") and not piece.startswith("\r"))
    if pending.strip("\r\n"):
        on_line(pending.strip("\r\n"), True)


# --- Ray -----------------------------------------------------------------------------------------


class Membership(NamedTuple):
    alive: int
    gpus: int


def ray_membership(address: str) -> Membership | None:
    """Alive nodes and their GPUs from `ray list nodes` (Ray's state API, as `ray status` reads
    it); None when Ray does not answer (printed)."""
    command = ["ray", "list", "nodes", "--format=json", "--detail", "--limit=10000"]
    command += ["--filter", "state=ALIVE"]
    if address != "auto":
        command += ["--address", address]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PROBE_SECONDS, check=False
        )
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        say(f"`ray list nodes` failed: {error!r}")
        return None
    if done.returncode != 0:  # the last line of a traceback says why
        last = (done.stderr.strip().splitlines() or [""])[-1][-300:]
        say(f"`ray list nodes` exited {done.returncode}: {last}")
        return None
    try:
        alive = [node for node in json.loads(done.stdout) if node.get("state") == "ALIVE"]
        gpus = sum(float((node.get("resources_total") or {}).get("GPU", 0)) for node in alive)
    except (ValueError, TypeError, AttributeError):
        say(f"`ray list nodes` answered no node list: {done.stdout.strip()[:300]!r}")
        return None
    return Membership(len(alive), int(gpus))


def ray_python(ray: str) -> list[str]:
    """The interpreter the `ray` command runs with (its `#!` line), else this one."""
    try:
        with open(ray, "rb") as file:
            first = file.readline(512).decode("utf-8", "replace")
    except OSError:
        return [sys.executable]
    words = first[2:].split() if first.startswith("#!") else []
    return words if words and "python" in os.path.basename(words[-1]) else [sys.executable]


def state_api_missing() -> str:
    """Why `ray list nodes` can never answer in this image, known at once; "" when it can, or
    when that cannot be told (then the wait for the nodes tells, as before)."""
    ray = shutil.which("ray")
    if ray is None:
        return "the `ray` command is not on PATH: the image needs ray[default]"
    try:
        done = subprocess.run(
            [*ray_python(ray), "-c", STATE_API_CHECK],
            capture_output=True, text=True, timeout=PROBE_SECONDS, check=False,
        )  # fmt: skip
    except (OSError, ValueError, subprocess.SubprocessError):
        return ""
    module = (done.stdout.strip().splitlines() or [""])[-1][:100]
    if done.returncode != MISSING or not module:
        return ""
    return (
        "Ray is installed without ray[default] (its module " + module + " is missing): "
        "Ray's state API (`ray list nodes`, served by Ray's dashboard), which this wrapper "
        "reads to wait for the nodes, never answers. Install ray[default] in the image."
    )


# --- the run -------------------------------------------------------------------------------------


class Completion(NamedTuple):
    outcome: str
    exit_code: int | None
    reason: str | None
    message: str | None

    def document(self) -> str:
        """The completion JSON, within what the kubelet keeps of a termination message."""
        fields = {"trainyard": "completion", **self._asdict()}
        text = json.dumps(fields)
        while len(text.encode()) > TERMINATION_BYTES and fields["message"]:
            fields["message"] = fields["message"][len(fields["message"]) // 4 :]
            text = json.dumps(fields)
        return text


class Silent:
    """Stands in for trainyard_signal.Signals when the client is not beside this file."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: True


def exit_completion(code: int, stderr_tail: collections.deque[str]) -> Completion:
    if code == 0:
        return Completion("succeeded", 0, None, None)
    if code < 0:  # killed by a signal: the shell's convention, as the kubelet reports it
        try:
            reason = signal.Signals(-code).name
        except ValueError:
            reason = f"signal {-code}"
        code = 128 - code
    else:
        reason = "Error"
    message = "\n".join(stderr_tail)[-MESSAGE_CHARS:] or None
    return Completion("failed", code, reason, message)


class Driver:
    def __init__(self, args: argparse.Namespace, signals: Any) -> None:
        self.args, self.signals = args, signals
        self.entry: subprocess.Popen[bytes] | None = None
        self.busy = False  # running the entry or recording its completion: not to be cut short
        self.terminated = False  # SIGTERM came
        self.stopped = False  # SIGTERM came while the entry ran, and was passed to it
        self.exit_code = 0
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.started = False  # a first step was seen: phase training

    # -- signals from Kubernetes --
    def on_terminate(self, signum: int, frame: Any) -> None:
        """While the entry runs, it is the entry's to answer; while its completion is recorded,
        the driver exits right after; otherwise (waiting for nodes, idle) it exits 0 at once."""
        self.terminated = True
        entry = self.entry
        if entry is not None and entry.poll() is None:
            self.stopped = True
            with contextlib.suppress(OSError):  # it has just ended
                os.killpg(entry.pid, signum)
        elif not self.busy:
            raise SystemExit(0)

    # -- the steps --
    def wait_for_nodes(self) -> Completion | None:
        expected, address = self.args.expected_nodes, self.args.ray_address
        deadline = time.monotonic() + self.args.nodes_timeout
        self.signals.phase("waiting_for_nodes")
        alive = 0
        while True:
            membership = ray_membership(address)
            if membership is not None:
                alive = membership.alive
                self.signals.ray(expected, alive, membership.gpus)
                if alive >= expected:
                    say(f"Ray has {alive} of {expected} nodes alive")
                    return None
            if time.monotonic() >= deadline:
                break
            time.sleep(min(self.args.poll_seconds, max(deadline - time.monotonic(), 0)))
        text = f"Ray has {alive} of {expected} expected nodes alive after "
        text += f"{self.args.nodes_timeout:g} s"
        say(text)  # on the log too: the kept log names the failure, not only the completion
        return Completion("failed", None, "RayNodesTimeout", text)

    def run_entry(self) -> Completion | None:
        """The entry's completion; None when this pod was told to stop (no completion)."""
        self.busy = True
        self.signals.phase("initializing")
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            self.entry = subprocess.Popen(
                self.args.entry, env=env, start_new_session=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
        except OSError as error:
            return Completion("failed", 127, "Error", f"cannot start the entry: {error}"[-1024:])
        assert self.entry.stdout is not None and self.entry.stderr is not None
        pumps = [
            self._pump(self.entry.stdout, sys.stdout.buffer, ProgressParser(), False),
            self._pump(self.entry.stderr, sys.stderr.buffer, ProgressParser(), True),
        ]
        watch = threading.Event()
        if self.args.expected_nodes > 0:
            threading.Thread(target=self._watch_ray, args=(watch,), daemon=True).start()
        code = self.entry.wait()
        watch.set()
        for thread in pumps:
            thread.join()
        self.exit_code = 128 - code if code < 0 else code
        if self.stopped:
            say(f"stopped: the entry exited {code}; no completion reported")
            return None
        return exit_completion(code, self.stderr_tail)

    def _pump(
        self, source: IO[bytes], sink: IO[bytes], parser: ProgressParser, stderr: bool
    ) -> threading.Thread:
        def on_line(line: str, ended: bool) -> None:
            if stderr and ended:
                self.stderr_tail.append(line)
            try:
                progress = parser.feed(line)
            except Exception as error:  # a line we did not foresee: never stop the copying
                say(f"progress line not read: {error!r}")
                return
            if progress is not None:
                if not self.started:
                    self.started = True
                    self.signals.phase("training")
                self.signals.progress(*progress[:3], metrics=progress.metrics or None)

        thread = threading.Thread(target=pump, args=(source, sink, on_line), daemon=True)
        thread.start()
        return thread

    def _watch_ray(self, done: threading.Event) -> None:
        """Ray membership every heartbeat while the entry runs: a lost worker reads Degraded."""
        while not done.wait(self.args.heartbeat_seconds):
            membership = ray_membership(self.args.ray_address)
            if membership is not None and not done.is_set():
                self.signals.ray(self.args.expected_nodes, membership.alive, membership.gpus)

    def complete(self, completion: Completion, mark: bool = True) -> None:
        """Report it, and write it where the kubelet and a restarted head find it."""
        self.busy = True
        say(f"completion: {completion.outcome}, exit code {completion.exit_code}")
        self.signals.completion(*completion)
        document = completion.document()
        log = os.environ.get("TRAINYARD_TERMINATION_LOG", TERMINATION_LOG)
        write(log, document)
        if mark and self.args.done_marker:
            text = marker_text(completion, os.environ.get("TRAINYARD_RUN"))
            write(self.args.done_marker, text, atomic=True)

    def idle(self) -> None:
        """Until SIGTERM (its handler exits): the StatefulSet must not start this again."""
        self.busy = False
        if self.terminated:  # it came while the completion was being recorded
            return
        say("idle: SIGTERM ends this container")
        while True:  # in short naps: a signal the kernel hands to another thread runs its
            time.sleep(1.0)  # handler here only once this thread wakes


def write(path: str, text: str, atomic: bool = False) -> None:
    """Write a file, printing a failure; `atomic`: a reader sees the old or the new file whole."""
    try:
        target = path + ".tmp" if atomic else path
        if atomic and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(target, "w", encoding="utf-8") as file:
            file.write(text)
            if atomic:
                file.flush()
                os.fsync(file.fileno())
        if atomic:
            os.replace(target, path)
    except OSError as error:
        say(f"cannot write {path}: {error}")


def recorded(marker: str | None) -> Completion | None:
    """The completion a done marker records for this run; None to train."""
    if not marker or not os.path.exists(marker):
        return None
    completion: Completion | None
    try:
        with open(marker, encoding="utf-8") as file:
            text = file.read()
    except OSError as error:
        completion, note = unreadable(marker, error)
    else:
        completion, note = marked(text, os.environ.get("TRAINYARD_RUN"), marker)
    if note:
        say(note)
    return completion


def marker_text(completion: Completion, run: str | None) -> str:
    """The done marker: the completion JSON with the run it ended."""
    return json.dumps(dict(json.loads(completion.document()), run=run)) + "\n"


def marked(text: str, run: str | None, marker: str) -> tuple[Completion | None, str]:
    """The completion a done marker's text records for `run` (None: another run's, train
    again), and what to print about it ("" for nothing)."""
    try:
        record = json.loads(text)
        if run and record.get("run") and str(record["run"]) != run:
            return None, f"{marker} is from run {record['run']}, this is run {run}: training again"
        completion = Completion(*(record.get(name) for name in Completion._fields))
        if completion.outcome not in ("succeeded", "failed"):
            raise ValueError(f"outcome {completion.outcome!r}")
        return completion, ""
    except (ValueError, TypeError, AttributeError) as error:
        return unreadable(marker, error)


def unreadable(marker: str, error: Exception) -> tuple[Completion, str]:
    completion = Completion("failed", None, "Error", f"unreadable done marker {marker}")
    return completion, f"{marker} unreadable ({error!r}): treated as a completed run"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="trainyard_driver.py",
        usage="%(prog)s --expected-nodes N [options] -- ENTRY [ARG ...]",
        description="Wait for Ray's nodes, run the entry, report it, then idle.",
    )
    parser.add_argument("--expected-nodes", type=int, required=True, help="0: do not wait")
    parser.add_argument("--nodes-timeout", type=float, default=600.0, help="seconds")
    parser.add_argument("--ray-address", default="auto", help="Ray's API server, or auto")
    parser.add_argument("--poll-seconds", type=float, default=5.0, help="between Ray probes")
    parser.add_argument("--done-marker", default=os.environ.get("TRAINYARD_DONE_MARKER"))
    parser.add_argument("entry", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.entry[:1] == ["--"]:
        args.entry = args.entry[1:]
    if not args.entry:
        parser.error("no entry command after --")
    args.heartbeat_seconds = heartbeat_seconds(os.environ.get("TRAINYARD_HEARTBEAT_SECONDS", ""))
    return args


def heartbeat_seconds(text: str) -> float:
    """TRAINYARD_HEARTBEAT_SECONDS: 30 when unset or not a number, at least 0.1."""
    return max(number(text) or 30.0, 0.1)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    signals: Any = Silent() if trainyard_signal is None else trainyard_signal.Signals()
    driver = Driver(args, signals)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, driver.on_terminate)
    signals.start_heartbeat(args.heartbeat_seconds)
    completion = recorded(args.done_marker)
    if completion is not None:
        say(f"{args.done_marker}: this run is complete already, not training again")
        driver.complete(completion, mark=False)  # again: a restarted pod is a new sequence
    else:
        signals.phase("starting")
        if args.expected_nodes > 0 and (missing := state_api_missing()):
            say(missing)
            driver.complete(Completion("failed", None, "RayStateApiMissing", missing), mark=False)
            return EXIT_NO_STATE_API  # no done marker: the restarted container checks again
        if args.expected_nodes > 0:
            completion = driver.wait_for_nodes()
        completion = completion or driver.run_entry()
        if completion is None:  # stopped while training: exit as the entry did
            signals.flush(5.0)
            return driver.exit_code
        driver.complete(completion)
    driver.idle()
    return 0


if __name__ == "__main__":
    sys.exit(main())
