"""Creates (or resets) the demo login that `make run` prints."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from console.models import Membership, Project

USERNAME = "demo"
PASSWORD = "trainyard-demo"


class Command(BaseCommand):
    help = "Create the demo user (an operator and a member of the 'demo' project) and print it."

    def handle(self, *args: Any, **options: Any) -> None:
        user, _ = User.objects.get_or_create(username=USERNAME)
        user.is_staff = user.is_superuser = True
        user.set_password(PASSWORD)
        user.save()
        project, _ = Project.objects.get_or_create(name="demo")
        Membership.objects.get_or_create(project=project, user=user)
        self.stdout.write(
            self.style.SUCCESS(
                f"\n  Trainyard is starting at http://127.0.0.1:8000/\n"
                f"  Log in as  {USERNAME} / {PASSWORD}\n"
            )
        )
