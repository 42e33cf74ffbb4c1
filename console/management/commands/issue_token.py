"""Issues an API token: printed once, only its SHA-256 is stored; it expires after --days (90)
and is in the audit trail."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from console import tokens
from console.models import TOKEN_DAYS


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it (it cannot be shown again)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label to recognise the token by")
        parser.add_argument(
            "--days", type=int, default=TOKEN_DAYS, help=f"days until it expires ({TOKEN_DAYS})"
        )

    def handle(self, *args: Any, username: str, name: str, days: int, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        if not user.is_active:
            raise CommandError(f"The user {username!r} is inactive.")
        if len(name) > 100:
            raise CommandError("The token name must be at most 100 characters.")
        if not 1 <= days <= 3650:
            raise CommandError("--days must be between 1 and 3650.")
        plain = tokens.issue(user, name, days)
        self.stdout.write(plain)
        self.stderr.write("Store this token now: only its hash is kept, it cannot be shown again.")
