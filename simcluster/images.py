"""Image references as containerd reports them, and which ones can never be pulled."""

from __future__ import annotations

import hashlib


def normalize(image: str) -> str:
    """`python:3.11` -> `docker.io/library/python:3.11`, adding `:latest` when untagged."""
    name, _, digest = image.partition("@")
    first = name.split("/", 1)[0]
    has_registry = "/" in name and ("." in first or ":" in first or first == "localhost")
    if not has_registry:
        name = f"docker.io/{name}" if "/" in name else f"docker.io/library/{name}"
    if digest:
        return f"{name}@{digest}"
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


def image_id(image: str) -> str:
    """repo@sha256:<digest>, stable for the same reference."""
    reference = normalize(image)
    repository = (
        reference.split("@", 1)[0].rsplit(":", 1)[0]
        if "@" not in reference
        else reference.split("@", 1)[0]
    )
    digest = hashlib.sha256(reference.encode()).hexdigest()
    return f"{repository}@sha256:{digest}"


def image_size(image: str) -> int:
    return 50_000_000 + int(hashlib.sha256(image.encode()).hexdigest()[:6], 16) * 100


def pullable(image: str) -> bool:
    return "nonexistent" not in image


def pull_error(image: str) -> str:
    reference = normalize(image)
    return (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{reference}": '
        f'failed to resolve reference "{reference}": {reference}: not found'
    )
