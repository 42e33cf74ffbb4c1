"""simcluster's DCGM-shaped exporter (simcluster/dcgm.py): what NVIDIA's dcgm-exporter serves
on /metrics with its pod mapping on, for the GPUs the running pods hold (issue 33, Build 4)."""

from __future__ import annotations

import re
import urllib.request

from simcluster.server import SimCluster
from tests.simcluster.conftest import Kube, container, pod_manifest, wait_for


def scrape(sim: SimCluster) -> str:
    """What a Prometheus scraping the exporter reads: no token, as dcgm-exporter's endpoint."""
    with urllib.request.urlopen(f"{sim.url}/dcgm/metrics", timeout=5) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return str(answer.read().decode())


def gpu_pod(name: str, gpus: int) -> dict[str, object]:
    wanted = {"nvidia.com/gpu": str(gpus)}
    return pod_manifest(name, container(resources={"requests": wanted, "limits": wanted}))


def test_it_labels_the_gpus_a_running_pod_holds_with_the_pod(
    own_kube: Kube, own_sim: SimCluster
) -> None:
    own_kube.core.create_namespaced_pod(own_kube.namespace, gpu_pod("trainer", 2))
    wait_for(lambda: 'pod="trainer"' in scrape(own_sim) or None)
    own_sim.set_gpu_utilisation(own_kube.namespace, "trainer", 42)
    text = scrape(own_sim)
    held = [line for line in text.splitlines() if 'pod="trainer"' in line]
    utilisation = [line for line in held if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(utilisation) == 2 and all(line.endswith(" 42") for line in utilisation)
    assert all(f'namespace="{own_kube.namespace}"' in line for line in held)
    assert all('container="main"' in line and 'UUID="GPU-' in line for line in held)
    engine = [line for line in held if line.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{")]
    assert len(engine) == 2 and all(line.endswith(" 0.420000") for line in engine)
    free = [
        line for line in text.splitlines()
        if line.startswith("DCGM_FI_DEV_GPU_UTIL{") and 'pod="' not in line
    ]  # fmt: skip
    assert free and all(line.endswith(" 0") for line in free)  # a free GPU: no pod, idle
    hosts = {host for line in held for host in re.findall(r'Hostname="([^"]+)"', line)}
    assert len(hosts) == 1  # a pod's GPUs are on its node


def test_it_sets_a_pods_utilisation_through_the_control_surface(
    own_kube: Kube, own_sim: SimCluster
) -> None:
    own_kube.core.create_namespaced_pod(own_kube.namespace, gpu_pod("rollout", 1))
    wait_for(lambda: 'pod="rollout"' in scrape(own_sim) or None)
    request = urllib.request.Request(
        f"{own_sim.url}/_sim/namespaces/{own_kube.namespace}/pods/rollout/gpu-utilisation",
        data=b'{"percent": 7}', method="PUT",
        headers={"Authorization": f"Bearer {own_sim.token}"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status == 200
    line = next(
        line for line in scrape(own_sim).splitlines()
        if line.startswith("DCGM_FI_DEV_GPU_UTIL{") and 'pod="rollout"' in line
    )  # fmt: skip
    assert line.endswith(" 7")
