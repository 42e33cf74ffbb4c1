"""gunicorn's settings for the console's web process (the image's command:
`gunicorn -c deploy/gunicorn.conf.py console.wsgi`). Command-line flags and GUNICORN_CMD_ARGS
override them; WEB_CONCURRENCY sets the number of worker processes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from prometheus_client import multiprocess

bind = "0.0.0.0:8000"
# Sync workers, two per core the web process may use (WEB_CONCURRENCY; 4 for the 2 cores this
# default is sized for). A request is short and mostly CPU (a poll answered 204 from its version,
# a signal, a fragment: 2 to 15 ms) with waits on PostgreSQL in between: a second process per
# core fills those waits, more only add memory and time slices. Sync workers share one listen
# queue, so a request waits for the first free process; threads (gthread) would share one core
# per process and queue each connection behind its process's own (docs/operations.md, "Sizing
# the web tier").
worker_class = "sync"
workers = int(os.environ.get("WEB_CONCURRENCY", "4"))
# A page or API call never waits on a cluster (requests only record intent), so a request that
# takes this long is stuck: the worker is replaced.
timeout = 30
graceful_timeout = 25  # inside Kubernetes' default 30 s between SIGTERM and SIGKILL
keepalive = 5
accesslog = None
errorlog = "-"
# No control socket: nothing uses it, and it would be written under $HOME.
control_socket_disable = True
worker_tmp_dir = "/dev/shm" if Path("/dev/shm").is_dir() else None


def on_starting(server: Any) -> None:
    """The request metrics of earlier processes would be summed with ours: start empty."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
        Path(directory).mkdir(parents=True)


def child_exit(server: Any, worker: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
