"""Runs the processes of a Procfile together with honcho, as `make run` does, and when one of them
stops by itself says which one, with what status and its last lines of output.

honcho stops every other process as soon as one exits, and says so in a line that scrolls away
under the others' shutdown messages; this closing note is the last thing printed instead.

Usage: python scripts/run_dev.py Procfile.dev
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections import defaultdict, deque
from pathlib import Path

from honcho.environ import expand_processes, parse_procfile
from honcho.manager import SYSTEM_PRINTER_NAME, Manager
from honcho.printer import Message, Printer

LAST_LINES = 12
# honcho's own words when a process exits, and when it was asked to stop everything.
STOPPED = re.compile(r"^(?P<name>\S+) stopped \(rc=(?P<status>-?\d+)\)$")
SIGNALLED = re.compile(r"^SIG\w+ received$")


class Recorder(Printer):
    """honcho's printer, which also keeps each process's last lines and notes the first process
    that stopped before anyone asked the processes to stop."""

    def __init__(self) -> None:
        super().__init__(sys.stdout)
        self.last: defaultdict[str, deque[str]] = defaultdict(lambda: deque(maxlen=LAST_LINES))
        self.asked_to_stop = False
        self.first_stopped: tuple[str, int] | None = None

    def write(self, message: Message) -> None:
        super().write(message)
        text = message.data
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if message.name != SYSTEM_PRINTER_NAME:
            self.last[message.name].extend(text.splitlines())
            return
        self._note(text.strip())

    def _note(self, line: str) -> None:
        stopped = STOPPED.match(line)
        if SIGNALLED.match(line):
            self.asked_to_stop = True
        elif stopped and not self.asked_to_stop and self.first_stopped is None:
            self.first_stopped = (stopped["name"], int(stopped["status"]))


def how_it_ended(status: int) -> str:
    """honcho reports a signal as a negative status; a shell reports it as 128 + the signal."""
    number = -status if status < 0 else status - 128 if status > 128 else 0
    if number not in {int(known) for known in signal.Signals}:
        return f"exited with status {status}"
    name = signal.Signals(number).name
    return f"was killed by {name}" + (f" (exit status {status})" if status > 0 else "")


def closing_note(name: str, status: int, last: list[str]) -> str:
    """What the developer reads last: which process ended the run, how, and its last words."""
    process = name.rsplit(".", 1)[0]  # honcho numbers each process: worker.1
    lines = [
        "",
        f"make run stopped: the process '{process}' {how_it_ended(status)} by itself,",
        "and the other processes were stopped with it. Its last lines of output:",
        *(f"    {line}" for line in last or ["(it printed nothing)"]),
        "docs/operations.md says what each process does.",
    ]
    return "\n".join(lines)


def environment(environ: dict[str, str]) -> dict[str, str]:
    """What every process starts with: the pods of the simulated cluster post their signals to
    the development server on its port, unless TRAINYARD_PUBLIC_URL says otherwise, and the
    notifications may reach the demo receiver on loopback."""
    port = environ.get("TRAINYARD_PORT") or "8000"
    defaults = {
        "TRAINYARD_PUBLIC_URL": f"http://127.0.0.1:{port}",
        # The demo webhook receiver listens on loopback (docs/notifications.md).
        "TRAINYARD_NOTIFY_ALLOWED_NETWORKS": "127.0.0.0/8",
    }
    return defaults | environ


def main(procfile: Path) -> int:
    recorder = Recorder()
    manager = Manager(recorder)
    processes = parse_procfile(procfile.read_text()).processes
    shared = environment(dict(os.environ))
    for process in expand_processes(processes):
        manager.add_process(process.name, process.cmd, env=shared | process.env)
    manager.loop()
    if recorder.first_stopped is None:
        return manager.returncode or 0
    name, status = recorder.first_stopped
    print(closing_note(name, status, list(recorder.last[name])), file=sys.stderr, flush=True)
    return status if status > 0 else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
