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


# What `make run`'s processes log (issue 31, item 4): the lines a person acts on, not one line
# per task, beat tick, reconcile or request. Each line below is written through the logger that
# writes it in the worker, the beat or the development server.
LINES = """
import logging
import django
django.setup()
for name, level, text in [
    ("celery.worker.strategy", "INFO", "Task console.tasks.reconcile_job[1f] received"),
    ("celery.app.trace", "INFO", "Task console.tasks.reconcile_job[1f] succeeded in 0.02s"),
    ("celery.beat", "INFO", "Scheduler: Sending due task sync-clusters"),
    ("console.engine.one_job", "INFO", "reconciled job 7: 2 writes"),
    ("django.server", "INFO", '"POST /api/v1/jobs/7/signals HTTP/1.1" 202 32'),
    ("urllib3.connectionpool", "WARNING", "Retrying after connection broken by refused"),
    ("console.tasks", "INFO", "sync of cluster demo (1): watch: 3 changes applied"),
    ("console.tasks", "WARNING", "sync of cluster gone (2): UNREACHABLE after 0.01s"),
    ("celery.app.trace", "ERROR", "Task console.tasks.sync_cluster[2e] raised unexpected"),
    ("console.engine.one_job", "WARNING", "reconcile of job 8: HTTP 403 forbidden"),
    ("django.server", "WARNING", '"POST /api/v1/jobs/9/signals HTTP/1.1" 404 58'),
    ("django.request", "WARNING", "Not Found: /api/v1/jobs/9/signals"),
]:
    logging.getLogger(name).log(getattr(logging, level), text)
"""
KEPT = [
    "sync of cluster demo (1): watch: 3 changes applied",
    "sync of cluster gone (2): UNREACHABLE after 0.01s",
    "Task console.tasks.sync_cluster[2e] raised unexpected",
    "reconcile of job 8: HTTP 403 forbidden",
    '"POST /api/v1/jobs/9/signals HTTP/1.1" 404 58',
    "Not Found: /api/v1/jobs/9/signals",  # once: Django's own handler printed it a second time
]
DETAIL = [
    "Task console.tasks.reconcile_job[1f] received",
    "Task console.tasks.reconcile_job[1f] succeeded in 0.02s",
    "Scheduler: Sending due task sync-clusters",
    "reconciled job 7: 2 writes",
    '"POST /api/v1/jobs/7/signals HTTP/1.1" 202 32',
    "Retrying after connection broken by refused",
]


def logged(tmp_path: Path, **environ: str) -> list[str]:
    """The lines a process started with these variables logs (settings as Django loads them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINYARD_")}
    env |= {"TRAINYARD_VAR_DIR": str(tmp_path), **environ}
    result = subprocess.run(
        [sys.executable, "-c", LINES], capture_output=True, text=True, timeout=60, env=env,
        check=True,
    )  # fmt: skip
    return result.stderr.splitlines()


def test_it_logs_each_sync_and_every_warning_but_no_line_per_task_or_request(
    tmp_path: Path,
) -> None:
    assert logged(tmp_path) == KEPT


def test_it_logs_every_task_and_request_one_setting_away(tmp_path: Path) -> None:
    everything = set(KEPT + DETAIL)
    assert set(logged(tmp_path, TRAINYARD_LOG_DETAIL="true")) == everything
    assert set(logged(tmp_path, TRAINYARD_LOG_LEVEL="debug")) >= everything
    assert logged(tmp_path, TRAINYARD_LOG_LEVEL="warning") == KEPT[1:]


def test_the_worker_and_beat_of_make_run_print_no_banner_and_log_at_the_level_set() -> None:
    """`--quiet` keeps Celery's start-up banners (about 40 lines) from pushing the address and
    the login off the screen; `-l` follows TRAINYARD_LOG_LEVEL (Celery sets the root logger's
    level from it, over the settings')."""
    commands = dict(
        line.split(": ", 1)
        for line in (settings.BASE_DIR / "Procfile.dev").read_text().splitlines()
    )
    for name in ("worker", "beat"):
        assert "celery -A console --quiet " in commands[name]
        assert commands[name].endswith(" -l ${TRAINYARD_LOG_LEVEL:-info}")
