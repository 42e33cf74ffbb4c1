"""The simulated machines: which nodes have a kubelet, whether it is reachable, their addresses."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SimNode:
    name: str
    index: int
    internal_ip: str
    online: bool = True
    last_heartbeat: float = 0.0  # the kubelet's last Lease renewal
    last_reported: float = 0.0  # the kubelet's last post of the Node's status
    marked_unknown: bool = False
    images: set[str] = field(default_factory=set)
    used_ips: set[str] = field(default_factory=set)
    next_host: int = 2

    def allocate_ip(self) -> str:
        """The next free address of the node's pod CIDR 10.244.<index>.0/24, round-robin like
        host-local IPAM so a freed address is not handed out again at once."""
        for step in range(253):
            host = 2 + (self.next_host - 2 + step) % 253
            address = f"10.244.{self.index}.{host}"
            if address not in self.used_ips:
                self.used_ips.add(address)
                self.next_host = host + 1
                return address
        raise RuntimeError(f"pod CIDR of {self.name} is exhausted")

    def release_ip(self, address: str) -> None:
        self.used_ips.discard(address)


class NodeRegistry:
    def __init__(self) -> None:
        self.nodes: dict[str, SimNode] = {}

    def add(self, name: str) -> SimNode:
        index = len(self.nodes)
        node = SimNode(name, index, f"172.18.0.{index + 2}")
        self.nodes[name] = node
        return node

    def get(self, name: str) -> SimNode | None:
        return self.nodes.get(name)

    def online(self, name: str) -> bool:
        node = self.nodes.get(name)
        return node is not None and node.online
