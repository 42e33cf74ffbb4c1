"""The /_sim/ control surface: the same scenarios as SimCluster's methods, over HTTP."""

from __future__ import annotations

from typing import Any, Protocol

import orjson
import yaml

from simcluster import access, errors
from simcluster.api import Request, Response
from simcluster.cluster import Cluster
from simcluster.faults import FaultError, Faults


class Scenarios(Protocol):
    """What the control surface drives: `simcluster.server.SimCluster`'s scenario methods."""

    @property
    def cluster(self) -> Cluster: ...
    @property
    def faults(self) -> Faults: ...
    def state(self) -> dict[str, Any]: ...
    def kill_pod(self, namespace: str, name: str) -> list[str]: ...
    def evict_pod(self, namespace: str, name: str) -> bool: ...
    def clear_faults(self) -> int: ...
    def compact(self) -> int: ...
    def set_gpu_utilisation(self, namespace: str, name: str, percent: float) -> None: ...
    def advance(self, seconds: float) -> None: ...
    def node_offline(self, name: str) -> None: ...
    def node_online(self, name: str) -> None: ...
    def cordon(self, name: str) -> None: ...
    def uncordon(self, name: str) -> None: ...
    def set_access_rules(self, rules: list[dict[str, Any]] | None) -> None: ...
    @property
    def access_rules(self) -> list[dict[str, Any]] | None: ...


Obj = dict[str, Any]
NODE_ACTIONS = ("offline", "online", "cordon", "uncordon")


def _json(status: int, payload: Any) -> Response:
    return Response(status, orjson.dumps(payload))


def _access_rules(body: Obj) -> list[Obj] | None:
    """`{"rules": [...]}` (null: everything allowed) or `{"rbac": "YAML"}`: the Roles,
    ClusterRoles and bindings of RBAC YAML such as deploy/rbac-data-plane.yaml."""
    if "rbac" in body:
        objects = [doc for doc in yaml.safe_load_all(str(body["rbac"])) if isinstance(doc, dict)]
        return access.rules_from_rbac(objects)
    rules = body["rules"]
    if rules is not None and not (
        isinstance(rules, list) and all(isinstance(rule, dict) for rule in rules)
    ):
        raise ValueError("rules is a list of RBAC-style rules, or null")
    return rules


class ControlSurface:
    def __init__(self, sim: Scenarios) -> None:
        self.sim = sim

    def handle(self, request: Request) -> Response:
        parts = [p for p in request.path.split("/") if p][1:]
        try:
            return self._route(request.method, parts, request.body)
        except errors.ApiError as error:
            return Response(error.code, orjson.dumps(error.status()))
        except (FaultError, ValueError, KeyError, yaml.YAMLError) as error:
            return Response(400, orjson.dumps(errors.bad_request(str(error)).status()))

    def _route(self, method: str, parts: list[str], body: bytes) -> Response:
        if method == "GET" and parts == ["state"]:
            return _json(200, self.sim.state())
        if (
            method == "POST"
            and len(parts) == 3
            and parts[0] == "nodes"
            and parts[2] in NODE_ACTIONS
        ):
            return self._node(parts[1], parts[2])
        if (
            method == "POST"
            and len(parts) == 5
            and parts[0] == "namespaces"
            and parts[2] == "pods"
            and parts[4] == "kill"
        ):
            return _json(200, {"killed": self.sim.kill_pod(parts[1], parts[3])})
        pod_path = len(parts) == 5 and parts[:1] + parts[2:3] == ["namespaces", "pods"]
        if method == "POST" and pod_path and parts[4] == "evict":
            return _json(200, {"evicted": self.sim.evict_pod(parts[1], parts[3])})
        if method == "PUT" and len(parts) == 5 and parts[:1] + parts[2:3] == ["namespaces", "pods"]:
            if parts[4] != "gpu-utilisation":
                raise errors.path_not_found()
            percent = float(orjson.loads(body or b"{}")["percent"])
            self.sim.set_gpu_utilisation(parts[1], parts[3], percent)
            return _json(200, {"pod": parts[3], "percent": percent})
        if parts == ["faults"] and method == "POST":
            fault = self.sim.faults.add(orjson.loads(body or b"{}"))
            return _json(201, {"fault": fault.describe()})
        if parts == ["faults"] and method == "DELETE":
            return _json(200, {"cleared": self.sim.clear_faults()})
        if parts == ["faults"] and method == "GET":
            return _json(200, {"faults": [f.describe() for f in self.sim.faults.active()]})
        if parts == ["access"] and method in ("GET", "PUT"):
            if method == "PUT":
                self.sim.set_access_rules(_access_rules(orjson.loads(body or b"{}")))
            return _json(200, {"rules": self.sim.access_rules})
        if method == "POST" and parts == ["compact"]:
            return _json(200, {"compactedRevision": self.sim.compact()})
        if method == "POST" and parts == ["advance"]:
            seconds = float(orjson.loads(body or b"{}").get("seconds", 0))
            self.sim.advance(seconds)
            return _json(200, {"simulatedTime": self.sim.state()["simulatedTime"]})
        raise errors.path_not_found()

    def _node(self, name: str, action: str) -> Response:
        if self.sim.cluster.registry.get(name) is None:
            raise errors.not_found("nodes", "", name)
        {
            "offline": self.sim.node_offline,
            "online": self.sim.node_online,
            "cordon": self.sim.cordon,
            "uncordon": self.sim.uncordon,
        }[action](name)
        return _json(200, {"node": name, "action": action})
