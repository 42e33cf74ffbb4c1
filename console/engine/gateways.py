"""The gateway of a Cluster, from its kubeconfig checked again at every use."""

from __future__ import annotations

from typing import Any

from console import kubeconfig, outbound
from console.kube import client
from console.kube.gateway import Gateway
from console.models import Cluster


def gateway_for(cluster: Cluster) -> Gateway:
    """Raises KubeconfigRejected when the stored kubeconfig is unusable: its text is read at
    every use (the stored text or the file it names may have changed since it was entered) and
    checked whenever it is not the text the cluster's client was built from."""
    try:
        api = client.api_client(
            cluster.pk, cluster.kubeconfig, cluster.context, _checked, outbound.peer_refusal
        )
    except client.ClientConfigError as error:
        raise kubeconfig.KubeconfigRejected(str(error)) from None
    return Gateway(api, client.timeouts())


def _checked(text: str, context: str) -> dict[str, Any]:
    return kubeconfig.validate_kubeconfig(text, context, insecure=True)
