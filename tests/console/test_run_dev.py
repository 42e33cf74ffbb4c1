"""scripts/run_dev.py, which `make run` uses to run Procfile.dev with honcho: a process that stops
by itself takes the others down (honcho's rule), and the last thing printed says which one, how,
and its last lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

RUN_DEV = settings.BASE_DIR / "scripts" / "run_dev.py"


def procfile(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "Procfile"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_it_says_which_process_stopped_everything_and_why(tmp_path: Path) -> None:
    path = procfile(
        tmp_path,
        "steady: sleep 60",
        "broken: echo starting; echo 'boom: the queue file is empty' >&2; exit 3",
    )
    result = subprocess.run(
        [sys.executable, str(RUN_DEV), str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 3
    assert "sending SIGTERM to steady.1" in result.stdout
    note = result.stderr.strip().splitlines()
    assert note[0] == "make run stopped: the process 'broken' exited with status 3 by itself,"
    assert note[2:4] == ["    starting", "    boom: the queue file is empty"]


@pytest.mark.parametrize(
    ("command", "how"),
    [
        ("kill -9 $$", "was killed by SIGKILL"),
        ("sh -c 'kill -9 $$'", "was killed by SIGKILL (exit"),
    ],
)
def test_it_names_the_signal_that_killed_a_process(tmp_path: Path, command: str, how: str) -> None:
    """honcho reports a signal as a negative status, a shell as 128 + the signal."""
    path = procfile(tmp_path, "steady: sleep 60", f"killed: {command}")
    result = subprocess.run(
        [sys.executable, str(RUN_DEV), str(path)], capture_output=True, text=True, timeout=60
    )
    assert f"make run stopped: the process 'killed' {how}" in result.stderr
    assert result.returncode != 0


def test_it_says_nothing_more_when_asked_to_stop(tmp_path: Path) -> None:
    path = procfile(tmp_path, "one: sleep 60", "two: sleep 60")
    process = subprocess.Popen(
        [sys.executable, str(RUN_DEV), str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    started = 0
    while started < 2:
        line = process.stdout.readline()
        assert line, "run_dev.py ended before both processes started"
        started += "started (pid=" in line
    process.send_signal(signal.SIGINT)
    out, errors = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "SIGINT received" in out
    assert errors == ""


def test_the_pods_of_the_demo_post_their_signals_to_the_web_server_on_its_port(
    tmp_path: Path,
) -> None:
    path = procfile(tmp_path, 'show: echo "url=$TRAINYARD_PUBLIC_URL"; exit 4')
    for extra, url in [
        ({}, "http://127.0.0.1:8000"),
        ({"TRAINYARD_PORT": "8123"}, "http://127.0.0.1:8123"),
        (
            {"TRAINYARD_PORT": "8123", "TRAINYARD_PUBLIC_URL": "http://10.0.0.5:80"},
            "http://10.0.0.5:80",
        ),
    ]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("TRAINYARD_PORT", "TRAINYARD_PUBLIC_URL")
        }
        result = subprocess.run(
            [sys.executable, str(RUN_DEV), str(path)],
            capture_output=True, text=True, timeout=60, env=env | extra,
        )  # fmt: skip
        assert f"url={url}" in result.stdout
