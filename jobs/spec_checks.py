"""The checks of a spec that span fields or need the database: unique roles and workload names,
the project, the cluster and namespace, a free name, and a Workflow's dependency graph.

They read the raw data rather than the validated model, so every error comes at once alongside the
field errors; each adds to `errors` (keyed by dotted path) unless that path already has one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.utils.translation import gettext

from console.models import Cluster, Node, Project
from jobs.access import User, projects_for, reads_project
from jobs.choices import TaskKind
from jobs.models import Job, Workflow

# A StatefulSet's pods carry `controller-revision-hash: <name>-<10-char hash>`, a label value
# limited to 63 characters, so the StatefulSet name itself must stay within 52 (kubernetes#64023).
STATEFULSET_NAME_MAX = 52


def _add(errors: dict[str, str], path: str, message: str) -> None:
    """Adds a database or cross-field error unless the field already has a syntax error."""
    errors.setdefault(path, message)


def _task_dicts(data: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        return []
    return [(index, task) for index, task in enumerate(tasks) if isinstance(task, Mapping)]


def check_roles(data: Mapping[str, Any], errors: dict[str, str], prefix: str) -> None:
    """Roles are unique within a Job, and every workload name fits Kubernetes' limits."""
    first_use: dict[str, int] = {}
    for index, task in _task_dicts(data):
        role = task.get("role")
        if not isinstance(role, str):
            continue
        path = f"{prefix}tasks.{index}.role"
        if role in first_use:
            message = gettext("The role %(role)s is already used by task %(task)d.")
            _add(errors, path, message % {"role": repr(role), "task": first_use[role]})
            continue
        first_use[role] = index
        _check_workload_name(data.get("name"), role, task.get("kind"), errors, path)


def _check_workload_name(
    name: Any, role: str, kind: Any, errors: dict[str, str], path: str
) -> None:
    # Types first: formatting an arbitrary value (a list, a huge number) costs what it holds.
    if not isinstance(name, str) or kind not in (None, TaskKind.STATEFULSET):
        return
    workload = f"{name}-{role}"
    if len(workload) > STATEFULSET_NAME_MAX:
        _add(
            errors,
            path,
            gettext(
                "The StatefulSet name %(workload)s is %(length)d characters; Kubernetes "
                "allows %(max)d (its pods' revision label adds 11). "
                "Shorten the job name or the role."
            )
            % {"workload": repr(workload), "length": len(workload), "max": STATEFULSET_NAME_MAX},
        )


def _writable_projects(user: User) -> list[Project]:
    return list(projects_for(user, write=True))


def resolve_project(value: Any, user: User, errors: dict[str, str], path: str) -> Project | None:
    """The named project if the user may operate in it; else their only one; else an error."""
    writable = _writable_projects(user)
    if isinstance(value, str):
        project = next((p for p in writable if p.name == value), None)
        if project is None:
            message = gettext("You cannot create jobs in a project named %(name)s.")
            _add(errors, path, message % {"name": repr(value)})
        return project
    if value is not None:
        return None
    if len(writable) == 1:
        return writable[0]
    if not writable:
        _add(errors, path, gettext("You are not a member of any project that may create jobs."))
    else:
        names = ", ".join(p.name for p in writable)
        message = gettext("Choose the project: you are a member of %(names)s.")
        _add(errors, path, message % {"names": names})
    return None


def retired_cluster(name: str) -> str:
    return gettext("Cluster %(name)s is retired: no Job is created on it any more.") % {
        "name": repr(name)
    }


def _resolve_cluster(
    value: Any, project: Project | None, errors: dict[str, str], path: str
) -> Cluster | None:
    """The named cluster if the project may use it (`Project.clusters`). One message for a
    cluster that does not exist and one the project may not use, naming those it may use: no
    hint of other clusters. Without a project (its own error is reported) nothing is judged."""
    if not isinstance(value, str) or project is None:
        return None
    cluster = project.clusters.filter(name=value).first()
    if cluster is not None and cluster.retired_at is not None:
        _add(errors, path, retired_cluster(value))
        return None
    if cluster is not None:
        return cluster
    live = project.clusters.filter(retired_at__isnull=True)
    usable = ", ".join(live.values_list("name", flat=True)[:20])
    if usable:
        message = gettext(
            "No cluster named %(name)s is available to project %(project)s (it may use: "
            "%(usable)s)."
        )
    else:
        message = gettext(
            "Project %(project)s may use no cluster yet: an operator chooses its clusters on "
            "the project's page."
        )
    _add(errors, path, message % {"name": repr(value), "project": project.name, "usable": usable})
    return None


def _check_name_free(
    name: Any, cluster: Cluster, namespace: str, errors: dict[str, str], path: str, user: User
) -> None:
    """A name taken by a Job of a project the user cannot see is "not available", never "exists":
    the message must not let anyone probe other projects' Job names."""
    if not isinstance(name, str) or path in errors:
        return
    existing = Job.objects.filter(cluster=cluster, namespace=namespace, name=name).first()
    if existing is None:
        return
    where = f"{cluster.name}/{namespace}"
    if not reads_project(user, existing.project_id):
        message = gettext("The name %(name)s is not available in %(where)s: choose another.")
        _add(errors, path, message % {"name": repr(name), "where": where})
        return
    if existing.delete_requested_at is not None:
        message = gettext("A job named %(name)s in %(where)s is still being deleted.")
    else:
        message = gettext("A job named %(name)s already exists in %(where)s.")
    _add(errors, path, message % {"name": repr(name), "where": where})


def check_target(
    data: Mapping[str, Any],
    project: Project | None,
    errors: dict[str, str],
    prefix: str,
    user: User,
) -> tuple[Cluster | None, str | None]:
    """The cluster and namespace the Job's workloads go to (a cluster its project may use),
    and whether its name is free there."""
    cluster = _resolve_cluster(data.get("cluster"), project, errors, prefix + "cluster")
    if cluster is None:
        return None, None
    namespace = data.get("namespace")
    if namespace is None:
        namespace = cluster.namespace
    if not isinstance(namespace, str) or prefix + "namespace" in errors:
        return cluster, None
    _check_name_free(data.get("name"), cluster, namespace, errors, prefix + "name", user)
    return cluster, namespace


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def check_child(
    child: Mapping[str, Any],
    project: Project | None,
    errors: dict[str, str],
    prefix: str,
    user: User,
) -> str | None:
    """A child Job belongs to its Workflow's project; otherwise it is checked like any Job."""
    named = child.get("project")
    if named is not None and project is not None and named != project.name:
        message = gettext("Must be the workflow's project, %(project)s.")
        _add(errors, prefix + "project", message % {"project": repr(project.name)})
    check_roles(child, errors, prefix)
    return check_target(child, project, errors, prefix, user)[1]


def check_workflow_graph(
    children: Iterable[tuple[int, Mapping[str, Any]]], errors: dict[str, str]
) -> None:
    """Child names are unique, `depends_on` names siblings, and the edges form a DAG."""
    names: dict[str, int] = {}
    edges: list[tuple[str, str]] = []
    for index, child in children:
        name = child.get("name")
        if not isinstance(name, str):
            continue
        if name in names:
            message = gettext("Job %(index)d is named %(name)s already.")
            _add(errors, f"jobs.{index}.name", message % {"index": names[name], "name": repr(name)})
            continue
        names[name] = index
        upstreams = [up for up in _list(child.get("depends_on")) if isinstance(up, str)]
        edges += [(upstream, name) for upstream in upstreams]
    for upstream, downstream in edges:
        path = f"jobs.{names[downstream]}.depends_on"
        if upstream == downstream:
            _add(errors, path, gettext("A job cannot depend on itself."))
        elif upstream not in names:
            message = gettext("%(name)s is not a job of this workflow.")
            _add(errors, path, message % {"name": repr(upstream)})
    _check_acyclic(names, edges, errors)


def _check_acyclic(
    names: Mapping[str, int], edges: list[tuple[str, str]], errors: dict[str, str]
) -> None:
    from jobs.status.lifecycle import CycleError, topological_order

    known = [(up, down) for up, down in edges if up in names and up != down]
    try:
        topological_order(names, known)
    except CycleError as exc:
        _add(errors, "jobs", gettext("A workflow must be acyclic: %(error)s.") % {"error": exc})


def check_workflow_name_free(name: Any, project: Project | None, errors: dict[str, str]) -> None:
    if not isinstance(name, str) or project is None or "name" in errors:
        return
    if Workflow.objects.filter(project=project, name=name).exists():
        message = gettext("A workflow named %(name)s already exists in %(project)s.")
        _add(errors, "name", message % {"name": repr(name), "project": project.name})


def workflow_children(data: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """The Workflow's child Jobs that are mappings, with their positions in `jobs`."""
    return [(i, c) for i, c in enumerate(_list(data.get("jobs"))) if isinstance(c, Mapping)]


def check_gpu_capacity(
    cluster_name: Any, nodes: int, gpus_per_node: int, errors: dict[str, str], path: str
) -> None:
    """A run of `nodes` nodes of `gpus_per_node` GPUs each fits the cluster's synced Nodes:
    some Online, schedulable Node has that many GPUs (the largest is named when none has), and
    enough of them do. A cluster whose Nodes were never seen is not judged."""
    if not isinstance(cluster_name, str) or not gpus_per_node:
        return
    schedulable = Node.objects.filter(
        cluster__name=cluster_name, phase=Node.Phase.ONLINE, unschedulable=False
    )
    largest = schedulable.order_by("-gpu_capacity", "name").values_list("name", "gpu_capacity")
    top = largest.first()
    if top is None:
        return
    if top[1] < gpus_per_node:
        message = gettext(
            "The largest schedulable node of %(cluster)s, %(node)s, has %(gpus)s GPUs."
        )
        _add(errors, path, message % {"cluster": cluster_name, "node": top[0], "gpus": top[1]})
        return
    fitting = schedulable.filter(gpu_capacity__gte=gpus_per_node).count()
    if fitting < nodes:
        message = gettext(
            "Only %(fitting)s schedulable nodes of %(cluster)s have %(gpus)s GPUs; "
            "the run needs %(nodes)s."
        )
        params = {
            "fitting": fitting,
            "cluster": cluster_name,
            "gpus": gpus_per_node,
            "nodes": nodes,
        }
        _add(errors, path, message % params)
