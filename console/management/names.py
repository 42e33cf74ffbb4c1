"""What the bootstrap commands name on their command line, looked up: the project, the user or
the cluster of that name, or a CommandError that says which is missing and how to make it."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.management.base import CommandError

from console.models import Cluster, Project
from console.projects import active_user


def project_named(name: str) -> Project:
    project = Project.objects.filter(name=name).first()
    if project is None:
        raise CommandError(
            f"No project is named {name!r}: create it with `manage.py create_project {name}`."
        )
    return project


def cluster_named(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise CommandError(
            f"No cluster is named {name!r}: register it with "
            f"`manage.py add_cluster {name} --kubeconfig FILE`."
        )
    return cluster


def member_named(name: str) -> User:
    user = active_user(name)
    if user is None:
        raise CommandError(
            f"No active user is named {name!r}: users are made in the admin (/admin/) or with "
            "`manage.py createsuperuser` (an operator)."
        )
    return user
