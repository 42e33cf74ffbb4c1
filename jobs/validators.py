"""Field rules of the JobSpec schema: Kubernetes names, quantities, env names and label keys.

Each rule is a pydantic validator with no database: it returns the value or raises ValueError with
the message the user sees (translated when raised, in the language of the request).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from django.utils.translation import gettext
from pydantic import BeforeValidator, StrictStr

from console.yaml_input import MAX_DEPTH, SPEC_MAX_NODES

JOB_NAME_MAX = 40
ROLE_MAX = 12

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUANTITY = re.compile(
    r"(?P<number>\d+(\.\d*)?|\.\d+)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d{1,3})?"
)
_SUFFIX_FACTOR = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY_MAX = Decimal(2) ** 63
_SURROGATE = re.compile("[\ud800-\udfff]")


def _dns_label(value: str, what: str, max_length: int, pattern: re.Pattern[str]) -> str:
    """`what` is the field's name as the user reads it (already translated)."""
    if not value:
        raise ValueError(gettext("The %(what)s is required.") % {"what": what})
    if len(value) > max_length:
        raise ValueError(
            gettext("The %(what)s is %(length)d characters; at most %(max)d allowed.")
            % {"what": what, "length": len(value), "max": max_length}
        )
    if not pattern.fullmatch(value):
        if pattern is _DNS_SUBDOMAIN:
            text = gettext(
                "%(value)s is not a valid %(what)s: use lowercase letters, digits, '-' and '.', "
                "starting with a letter or digit and ending with a letter or digit."
            )
        elif pattern is _DNS_1035_LABEL:
            text = gettext(
                "%(value)s is not a valid %(what)s: use lowercase letters, digits and '-', "
                "starting with a letter and ending with a letter or digit."
            )
        else:
            text = gettext(
                "%(value)s is not a valid %(what)s: use lowercase letters, digits and '-', "
                "starting with a letter or digit and ending with a letter or digit."
            )
        raise ValueError(text % {"value": repr(value), "what": what})
    return value


def validate_job_name(value: str) -> str:
    # A DNS-1123 label that also starts with a letter: the headless Service of a StatefulSet
    # Task is named `<job>-<role>`, and Service names must be DNS-1035 labels.
    return _dns_label(value, gettext("job name"), JOB_NAME_MAX, _DNS_1035_LABEL)


def validate_role(value: str) -> str:
    return _dns_label(value, gettext("role"), ROLE_MAX, _DNS_LABEL)


def validate_namespace(value: str | None) -> str | None:
    return None if value is None else _dns_label(value, gettext("namespace"), 63, _DNS_LABEL)


def validate_workflow_name(value: str) -> str:
    return _dns_label(value, gettext("workflow name"), 63, _DNS_LABEL)


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(gettext("Must be a whole number, not true/false."))
    return value


def validate_image(value: str) -> str:
    if not value.strip():
        raise ValueError(gettext("The image is required."))
    if any(char.isspace() for char in value):
        raise ValueError(
            gettext("%(value)s is not an image reference: it contains whitespace.")
            % {"value": repr(value)}
        )
    if len(value) > 512:
        raise ValueError(gettext("The image reference is longer than 512 characters."))
    return value


def quantity_value(text: str) -> Decimal:
    """The value of a Kubernetes quantity (`500m`, `16Gi`, `1.5`, `1e3`) in base units."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(
            gettext(
                "%(value)s is not a Kubernetes quantity: write a number with an optional suffix "
                "such as 500m, 2, 1.5, 512Mi or 16Gi (no sign, no space)."
            )
            % {"value": repr(text)}
        )
    suffix = match["suffix"] or ""
    exponent = suffix[:1] in ("e", "E")
    factor = Decimal(10) ** int(suffix[1:]) if exponent else _SUFFIX_FACTOR[suffix]
    try:
        return Decimal(match["number"]) * factor
    except InvalidOperation:
        raise ValueError(
            gettext("%(value)s is not a number Kubernetes accepts.") % {"value": repr(text)}
        ) from None


def _number_as_text(value: Any) -> Any:
    """YAML and JSON give `cpu: 4` as a number; a quantity is its decimal text."""
    if isinstance(value, bool):
        raise ValueError(gettext("Must be a quantity such as 4 or 500m, not true/false."))
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    return value


def _positive_quantity(value: str, what: str) -> str:
    amount = quantity_value(value)
    if amount <= 0:
        raise ValueError(
            gettext("The %(what)s request must be greater than zero.") % {"what": what}
        )
    if amount >= _QUANTITY_MAX:
        raise ValueError(
            gettext("%(value)s is larger than Kubernetes can represent.") % {"value": repr(value)}
        )
    return value


def validate_cpu(value: str) -> str:
    return _positive_quantity(value, gettext("CPU"))


def validate_memory(value: str) -> str:
    if value.endswith("m"):
        raise ValueError(
            gettext("%(value)s means milli-bytes; write Mi for mebibytes (e.g. 512Mi).")
            % {"value": repr(value)}
        )
    return _positive_quantity(value, gettext("memory"))


def validate_env(value: dict[str, str]) -> dict[str, str]:
    for name in value:
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(
                gettext(
                    "%(name)s is not a valid variable name: use letters, digits and '_', "
                    "not starting with a digit."
                )
                % {"name": repr(name)}
            )
        if name.upper().startswith("TRAINYARD_"):
            raise ValueError(
                gettext("%(name)s is reserved: TRAINYARD_* variables are set by the console.")
                % {"name": repr(name)}
            )
    return value


def _label_key_error(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and not (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return gettext("The prefix of %(key)s must be a DNS subdomain (e.g. example.com).") % {
            "key": repr(key)
        }
    if not (len(name) <= 63 and _LABEL_NAME.fullmatch(name)):
        return gettext(
            "%(key)s is not a valid label key: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit, optionally after a 'prefix/'."
        ) % {"key": repr(key)}
    return None


def validate_node_selector(value: dict[str, str]) -> dict[str, str]:
    for key, label in value.items():
        error = _label_key_error(key)
        if error:
            raise ValueError(error)
        if label and not (len(label) <= 63 and _LABEL_NAME.fullmatch(label)):
            raise ValueError(
                gettext(
                    "The value %(value)s of %(key)s is not a valid label value: at most 63 "
                    "letters, digits, '-', '_' or '.', starting and ending with a letter or digit."
                )
                % {"value": repr(label), "key": repr(key)}
            )
    return value


Count = Annotated[int, BeforeValidator(_not_bool)]
Quantity = Annotated[StrictStr, BeforeValidator(_number_as_text)]


# --- what any value of a spec must be, whatever field it is in ------------------------------


def _text_problem(text: str) -> str | None:
    """PostgreSQL stores no NUL in text or jsonb, and a lone surrogate is not Unicode: either
    would fail at the database (a 500), so both are the user's error, named by field."""
    if "\x00" in text:
        return gettext("Contains a NUL character (\\u0000), which cannot be stored.")
    if _SURROGATE.search(text):
        return gettext("Contains an unpaired surrogate (such as \\ud800): not valid Unicode text.")
    return None


def _path_part(key: Any) -> str:
    """A mapping key as a path part, escaped when it could not be shown or stored itself."""
    text = str(key)
    return ascii(text)[1:-1] if _text_problem(text) else text


def _children(value: Any) -> list[tuple[Any, Any]]:
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return list(enumerate(value))
    return []


def plain_data_errors(data: Any, max_nodes: int = SPEC_MAX_NODES) -> dict[str, str]:
    """Problems no field rule can see: NUL or a lone surrogate in any key or text, nesting deeper
    than MAX_DEPTH, more than `max_nodes` values. Walked without recursion, and checked
    before anything else reads the data (a name formatted, a project looked up, a merge)."""
    errors: dict[str, str] = {}
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    seen = 0
    while stack:
        path, value, depth = stack.pop()
        seen += 1
        if seen > max_nodes:
            message = gettext("The spec has more than %(max)d values; it is refused.")
            return {"spec": message % {"max": max_nodes}}
        if depth > MAX_DEPTH:
            message = gettext("Nested more than %(max)d levels deep.")
            errors.setdefault(path or "spec", message % {"max": MAX_DEPTH})
            continue
        for key, child in _children(value):
            where = f"{path}.{_path_part(key)}" if path else _path_part(key)
            problem = _text_problem(key) if isinstance(key, str) else None
            if problem:
                errors.setdefault(where, problem)
            stack.append((where, child, depth + 1))
        problem = _text_problem(value) if isinstance(value, str) else None
        if problem:
            errors.setdefault(path or "spec", problem)
    return errors


# --- storage and placement ------------------------------------------------------------------

MAX_VOLUMES = 8
# Where a volume may not go: the container's own devices and kernel views (the shared memory
# volume at /dev/shm is the console's, see console.kube.manifests).
_SYSTEM_PATHS = ("/dev", "/proc", "/sys")
TOLERATION_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")


def validate_claim(value: str) -> str:
    """A PersistentVolumeClaim name: a DNS-1123 subdomain, as the API server checks it."""
    return _dns_label(value, gettext("claim name"), 253, _DNS_SUBDOMAIN)


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def validate_mount_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(
            gettext("%(value)s is not an absolute path: start it with '/'.")
            % {"value": repr(value)}
        )
    parts = value.split("/")[1:]
    if value == "/" or any(part in ("", ".", "..") for part in parts):
        raise ValueError(
            gettext(
                "%(value)s is not a usable mount path: no '/' alone, no empty, '.' or '..' parts, "
                "no trailing '/'."
            )
            % {"value": repr(value)}
        )
    if any(_within(value, system) for system in _SYSTEM_PATHS):
        raise ValueError(
            gettext("%(value)s is under /dev, /proc or /sys, which belong to the container.")
            % {"value": repr(value)}
        )
    return value


def validate_sub_path(value: str | None) -> str | None:
    """A path inside the claim: relative and without '..', as the API server requires."""
    if value is None:
        return None
    if not value or value.startswith("/") or ".." in value.split("/"):
        raise ValueError(
            gettext("%(value)s is not a relative path inside the claim (no leading '/', no '..').")
            % {"value": repr(value)}
        )
    return value


def check_mount_paths(paths: list[str]) -> None:
    """Unique mount paths, none inside another: the kubelet would hide one behind the other."""
    for index, path in enumerate(paths):
        for other in paths[:index]:
            if _within(path, other) or _within(other, path):
                raise ValueError(
                    gettext("The mount paths %(first)s and %(second)s overlap.")
                    % {"first": repr(other), "second": repr(path)}
                )


def validate_shm_size(value: str | None) -> str | None:
    return None if value is None else validate_memory(value)


def validate_toleration_key(value: str) -> str:
    error = _label_key_error(value) if value else None
    if error:
        raise ValueError(error)
    return value


def validate_toleration_value(value: str) -> str:
    if value and not (len(value) <= 63 and _LABEL_NAME.fullmatch(value)):
        raise ValueError(
            gettext(
                "%(value)s is not a valid taint value: at most 63 letters, digits, '-', '_' or "
                "'.', starting and ending with a letter or digit."
            )
            % {"value": repr(value)}
        )
    return value


SHM_CEILING = Decimal(64 * 2**30)  # bytes: 64Gi


def shm_size_of(template: Mapping[str, Any]) -> str | None:
    """The size limit of a Task's memory-backed /dev/shm: its `shm_size`, otherwise half its
    memory request and at most 64Gi (docs/decisions.md); None, unlimited, without a request."""
    if template.get("shm_size"):
        return str(template["shm_size"])
    memory = (template.get("resources") or {}).get("memory")
    if not memory:
        return None
    return _bytes_quantity(int(min(quantity_value(str(memory)) / 2, SHM_CEILING)))


def _bytes_quantity(amount: int) -> str:
    """An amount of bytes in the largest binary unit that divides it (8Gi, 1536Mi, 1000)."""
    for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount and amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)
