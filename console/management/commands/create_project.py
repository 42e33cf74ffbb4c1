"""`manage.py create_project NAME`: a project, made as an operator makes it on the Projects page
(console.projects.create_project: audited). Running it again for an existing project changes
nothing and says so, so that a deployment script may run it on every start."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from console import projects
from console.models import Project


class Command(BaseCommand):
    help = "Create a project (nothing changes if it exists)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="the project's name (letters, digits, - and _)")

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["name"]
        if Project.objects.filter(name=name).exists():
            self.stdout.write(f"Project {name} exists: nothing changed.")
            return
        try:
            Project._meta.get_field("name").clean(name, None)
        except ValidationError as error:
            raise CommandError(
                f"{name!r} is not a valid project name: {error.messages[0]}"
            ) from None
        projects.create_project(name, by=None, via="manage.py create_project")
        self.stdout.write(f"Created project {name}: no member, no cluster yet.")
