"""A Cluster's kubeconfig as a model field: encrypted in the database (console/encryption.py),
plain text in Python, or read from a file when the Cluster references one.

The ciphertext is decrypted when the attribute is read, not when the row is loaded: a lost key
fails the use of that credential (the cluster shows it as its message), not every page that
loads a Cluster. Saving a row that was loaded and not changed writes its ciphertext back as is.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.query_utils import DeferredAttribute

from console import encryption
from console.kubeconfig import KubeconfigRejected, check_insecure_flag, read_kubeconfig_file


class Sealed(str):
    """A value as the database holds it: ciphertext, not yet decrypted."""


def _open(value: Any) -> str:
    if not isinstance(value, Sealed):
        return str(value or "")
    try:
        return encryption.decrypt(value)
    except encryption.CannotDecrypt as error:
        raise KubeconfigRejected(
            f"{error} Was a key removed before `manage.py rotate_keys` ran?"
        ) from None


class KubeconfigAttribute(DeferredAttribute):
    """Reads the text at use time: from the Cluster's file if it names one, else decrypted; a
    text that skips TLS verification is refused unless the Cluster is flagged insecure."""

    def __get__(self, instance: Any, cls: Any = None) -> Any:
        if instance is None:
            return self
        path = instance.kubeconfig_path
        text = read_kubeconfig_file(path) if path else _open(super().__get__(instance, cls))
        check_insecure_flag(text, instance.insecure)
        return text

    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__[self.field.attname] = value


class KubeconfigField(models.TextField):
    descriptor_class = KubeconfigAttribute

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Sealed | None:
        return None if value is None else Sealed(value)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        """The value as set (never the file's text, nor a decryption)."""
        return model_instance.__dict__.get(self.attname, "")

    def value_from_object(self, obj: models.Model) -> Any:
        return obj.__dict__.get(self.attname, "")

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, Sealed):
            return str(value)
        return encryption.encrypt(str(super().get_prep_value(value) or ""))
