"""A channel's URL and secret as a model field: encrypted in the database with the kubeconfigs'
keys (console/encryption.py, rotated by the same `manage.py rotate_keys` scheme), plain text in
Python. Never logged, never returned by the API (notify.api shows a masked `target`)."""

from __future__ import annotations

from typing import Any

from django.db import models

from console import encryption


class SecretField(models.TextField):
    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str:
        return encryption.decrypt(value or "")

    def get_prep_value(self, value: Any) -> Any:
        return encryption.encrypt(str(super().get_prep_value(value) or ""))
