"""`manage.py create_user USERNAME [--password-file FILE] [--operator]`: a user to add to
projects (`add_member`), made from a script; `--operator` also gives the operator role (the group
"operators", audited as a change of the user's rights). Django's `createsuperuser` fails when the
user exists; this command changes nothing then and says so: an existing user's password is
never reset (that would end their sessions), and no one is taken out of the operators.

Without `--password-file` the user has no usable password until one is set in the admin. The
file (e.g. a mounted Kubernetes Secret) holds the password alone; a final newline is ignored.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from jobs.access import is_operator, operators_group


class Command(BaseCommand):
    help = "Create a user, optionally an operator (nothing changes if the user exists)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username", help="the user's login name")
        parser.add_argument("--password-file", type=Path, help="a file holding the password")
        parser.add_argument("--operator", action="store_true", help="make the user an operator")

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["username"]
        try:
            User._meta.get_field("username").clean(name, None)
        except ValidationError as error:
            raise CommandError(f"{name!r} is not a valid user name: {error.messages[0]}") from None
        user = User.objects.filter(username=name).first()
        if user is None:
            password = _password(options["password_file"], name)
            user = User.objects.create_user(name, password=password)
            unusable = "" if password else " without a password (set one in the admin, /admin/)"
            self.stdout.write(f"Created user {name}{unusable}.")
        elif not options["operator"] or is_operator(user):
            self.stdout.write(f"User {name} exists: nothing changed.")
        if options["operator"] and not is_operator(user):
            user.groups.add(operators_group())
            self.stdout.write(f"{name} is now an operator.")


def _password(path: Path | None, name: str) -> str | None:
    if path is None:
        return None
    try:
        password = path.read_text().removesuffix("\n")
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"Cannot read {path}: {type(error).__name__}.") from None
    try:
        validate_password(password, User(username=name))
    except ValidationError as error:
        raise CommandError(
            f"The password in {path} is refused: {' '.join(error.messages)}"
        ) from None
    return password
