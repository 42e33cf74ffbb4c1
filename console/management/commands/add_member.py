"""`manage.py add_member PROJECT USERNAME [--role member|viewer]`: the user is in the project with
that role afterwards, as an operator adds them (or changes their role) on the project's page
(console.projects: audited). Running it again changes nothing and says so."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from console import projects
from console.management.names import member_named, project_named
from console.models import Membership

VIA = "manage.py add_member"


class Command(BaseCommand):
    help = "Add a user to a project with a role, or give them that role (nothing changes if held)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("project", help="the project's name")
        parser.add_argument("username", help="an active user's name")
        parser.add_argument(
            "--role",
            choices=Membership.Role.values,
            default=Membership.Role.MEMBER,
            help="member (creates and operates the project's Jobs) or viewer (reads them); "
            "default: member",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_named(options["project"])
        user = member_named(options["username"])
        role = Membership.Role(options["role"])
        membership = Membership.objects.filter(project=project, user=user).first()
        if membership is None:
            projects.add_member(project, user, role, by=None, via=VIA)
            self.stdout.write(f"Added {user} to project {project} as {role}.")
        elif projects.change_role(membership, role, by=None, via=VIA):
            self.stdout.write(f"{user} is now {role} of project {project} (was {membership.role}).")
        else:
            self.stdout.write(f"{user} is already {role} of project {project}: nothing changed.")
