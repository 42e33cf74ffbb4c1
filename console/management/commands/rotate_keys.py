"""`manage.py rotate_keys`: re-encrypts every stored credential under the newest key of
TRAINYARD_FIELD_KEYS, so that older keys can then be removed (docs/operations.md).
`manage.py rotate_keys --new-key` prints a fresh key to put in front of the list."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from console import encryption
from console.fields import Sealed
from console.models import Cluster


class Command(BaseCommand):
    help = "Re-encrypt every stored kubeconfig with the newest key of TRAINYARD_FIELD_KEYS."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--new-key", action="store_true", help="print a new key and exit")

    def handle(self, *args: Any, new_key: bool, **options: Any) -> None:
        if new_key:
            self.stdout.write(encryption.new_key())
            return
        rotated, failed = 0, []
        for pk, name, token in Cluster.objects.values_list("pk", "name", "kubeconfig"):
            if not token:
                continue
            try:
                fresh = Sealed(encryption.rotate(token))
            except encryption.CannotDecrypt:
                failed.append(name)
                continue
            # Conditional: a kubeconfig replaced meanwhile is already under the newest key.
            rotated += Cluster.objects.filter(pk=pk, kubeconfig=token).update(kubeconfig=fresh)
        self.stdout.write(f"Re-encrypted {rotated} kubeconfig(s) with the newest key.")
        if failed:
            raise CommandError(
                f"No key of TRAINYARD_FIELD_KEYS decrypts the kubeconfig of {', '.join(failed)}: "
                "put the key they were encrypted with back in the list, then run this again."
            )
