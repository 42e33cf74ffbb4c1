"""The demo login that `make run` prints, made once: a restart keeps its password and sessions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from console.models import Cluster, Membership, Project

USERNAME = "demo"
PASSWORD = "trainyard-demo"


class Command(BaseCommand):
    help = "Create the demo user (an operator and a member of the 'demo' project) and print it."

    def handle(self, *args: Any, **options: Any) -> None:
        user = demo_user()
        url = f"http://127.0.0.1:{settings.TRAINYARD_PORT}/"
        password = PASSWORD if user.check_password(PASSWORD) else "(the password you set)"
        self.stdout.write(
            self.style.SUCCESS(
                f"\n  Trainyard is starting at {url}\n  Log in as  {USERNAME} / {password}\n"
            )
        )


def demo_user() -> User:
    """The demo user, made an operator (a superuser) and a member of the project `demo`, which
    may use the cluster `demo` (once `demo_cluster` has registered it).

    Its password is set only when the user is created: setting it again would change the
    password hash, and with it every open session's auth hash, logging every browser out.
    """
    user, created = User.objects.get_or_create(
        username=USERNAME, defaults={"is_staff": True, "is_superuser": True}
    )
    if created:
        user.set_password(PASSWORD)
        user.save(update_fields=["password"])
    project, _ = Project.objects.get_or_create(name="demo")
    Membership.objects.get_or_create(project=project, user=user)
    project.clusters.add(*Cluster.objects.filter(name="demo"))  # demo_cluster registers it
    return user
