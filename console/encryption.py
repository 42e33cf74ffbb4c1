"""Credentials at rest (a Cluster's kubeconfig): encrypted with Fernet (AES-128-CBC and an
HMAC-SHA256 over it) under the keys of TRAINYARD_FIELD_KEYS, newest first.

MultiFernet encrypts with the newest key and decrypts with any of them, so a new key is added in
front, `manage.py rotate_keys` re-encrypts every row with it, and only then is the old key
removed. Keys are read from the settings at every call (never at import time).
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class CannotDecrypt(Exception):
    """No configured key opens the value: a key was removed before the rows were rotated."""


def new_key() -> str:
    return Fernet.generate_key().decode()


def _keys() -> MultiFernet:
    return MultiFernet([Fernet(key) for key in settings.TRAINYARD_FIELD_KEYS])


def encrypt(text: str) -> str:
    """An empty value stays empty: there is nothing to hide, and a blank field reads as blank."""
    return _keys().encrypt(text.encode()).decode() if text else ""


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _keys().decrypt(token.encode()).decode()
    except InvalidToken:
        raise CannotDecrypt("No key of TRAINYARD_FIELD_KEYS decrypts the stored value.") from None


def rotate(token: str) -> str:
    """The value encrypted again under the newest key (its Fernet timestamp is kept)."""
    if not token:
        return ""
    try:
        return _keys().rotate(token.encode()).decode()
    except InvalidToken:
        raise CannotDecrypt("No key of TRAINYARD_FIELD_KEYS decrypts the stored value.") from None
