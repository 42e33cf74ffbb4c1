"""Issues an API token: printed once, only its SHA-256 is stored."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from console.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it (it cannot be shown again)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label to recognise the token by")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        if not user.is_active:
            raise CommandError(f"The user {username!r} is inactive.")
        if len(name) > 100:
            raise CommandError("The token name must be at most 100 characters.")
        _, plain = ApiToken.issue(user, name=name)
        self.stdout.write(plain)
        self.stderr.write("Store this token now: only its hash is kept, it cannot be shown again.")
