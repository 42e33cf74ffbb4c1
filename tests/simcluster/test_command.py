"""`manage.py simcluster` in the foreground: kubeconfig, namespace, answering, clean stop.

Spec: the brief's management command section.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]


def test_it_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig.yaml"
    command = [
        sys.executable,
        "manage.py",
        "simcluster",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--speed",
        "10",
        "--namespace",
        "demo",
    ]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "TRAINYARD_VAR_DIR": str(tmp_path / "var"),
    }
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        first = process.stdout.readline() if process.stdout else ""
        assert first.startswith("simcluster serving http://127.0.0.1:"), first + (
            process.stderr.read() if process.stderr else ""
        )
        url = first.split()[2]
        assert "written to" in (process.stdout.readline() if process.stdout else "")
        api = config.new_client_from_config(config_file=str(kubeconfig))
        try:
            assert api.configuration.host == url
            core: Any = client.CoreV1Api(api)
            nodes = core.list_node().items
            assert [n.metadata.name for n in nodes] == ["sim-node-0", "sim-node-1"]
            assert nodes[0].status.capacity["nvidia.com/gpu"] == "4"
            assert core.read_namespace("demo").status.phase == "Active"
            _, active = config.list_kube_config_contexts(config_file=str(kubeconfig))
            assert active["name"] == "simcluster" and active["context"]["namespace"] == "demo"
        finally:
            api.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert "simcluster stopped" in (process.stdout.read() if process.stdout else "")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
