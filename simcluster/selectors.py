"""Label and field selectors, parsed the way apimachinery's `labels.Parse` and `fields.Parse` do."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class SelectorError(ValueError):
    """A selector the API server would answer with 400 BadRequest."""


class Op(StrEnum):
    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER = "gt"
    LESS = "lt"


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: Op
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, Any]) -> bool:
        """One clause; absent keys fail every clause except `!=`, `notin` and `!key`."""
        present = self.key in labels
        value = str(labels[self.key]) if present else ""
        if self.op is Op.EXISTS:
            return present
        if self.op is Op.DOES_NOT_EXIST:
            return not present
        if self.op in (Op.EQUALS, Op.IN):
            return present and value in self.values
        if self.op in (Op.NOT_EQUALS, Op.NOT_IN):
            return not present or value not in self.values
        return present and _compare(value, self.op, self.values[0])


def _compare(value: str, op: Op, bound: str) -> bool:
    try:
        number = int(value)
    except ValueError:
        return False
    return number > int(bound) if op is Op.GREATER else number < int(bound)


Selector = tuple[Requirement, ...]

_KEY_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(
    rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_KEY_NAME}$"
)
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SET = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\((.*)\)\s*$")
_EQUALITY = re.compile(r"^\s*([^!=<>\s]+)\s*(==|=|!=|>|<)\s*(\S*)\s*$")


def matches(selector: Selector, labels: Mapping[str, Any]) -> bool:
    return all(requirement.matches(labels) for requirement in selector)


def parse_label_selector(text: str) -> Selector:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h`; an empty string selects everything."""
    return tuple(_parse_clause(clause) for clause in _split_clauses(text) if clause.strip())


def _split_clauses(text: str) -> list[str]:
    """Commas separate clauses except inside the parentheses of a set."""
    clauses: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            clauses.append("".join(current))
            current = []
        else:
            current.append(char)
    clauses.append("".join(current))
    return clauses


def _parse_clause(clause: str) -> Requirement:
    stripped = clause.strip()
    if match := _SET.match(stripped):
        values = tuple(v.strip() for v in match.group(3).split(",") if v.strip())
        return _requirement(match.group(1), Op(match.group(2)), values, clause)
    if match := _EQUALITY.match(stripped):
        symbol = {"==": "=", ">": "gt", "<": "lt"}.get(match.group(2), match.group(2))
        return _requirement(match.group(1), Op(symbol), (match.group(3),), clause)
    if stripped.startswith("!"):
        return _requirement(stripped[1:].strip(), Op.DOES_NOT_EXIST, (), clause)
    return _requirement(stripped, Op.EXISTS, (), clause)


def _requirement(key: str, op: Op, values: tuple[str, ...], clause: str) -> Requirement:
    if not _KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise SelectorError(f"unable to parse requirement: invalid label key {key!r} in {clause!r}")
    if op in (Op.IN, Op.NOT_IN) and not values:
        raise SelectorError(
            "unable to parse requirement: for 'in', 'notin' operators, "
            f"values set can't be empty ({clause!r})"
        )
    for value in values:
        if op in (Op.GREATER, Op.LESS):
            if not re.fullmatch(r"-?[0-9]+", value):
                raise SelectorError(
                    "unable to parse requirement: for 'Gt', 'Lt' operators, "
                    f"the value must be an integer ({clause!r})"
                )
        elif len(value) > 63 or not _VALUE.match(value):
            raise SelectorError(f"unable to parse requirement: invalid label value: {value!r}")
    return Requirement(key, op, values)


def parse_field_selector(text: str, allowed: frozenset[str]) -> Selector:
    """`spec.nodeName=n1,status.phase!=Running`: only equality, only the resource's fields."""
    requirements = []
    for clause in text.split(","):
        if not clause.strip():
            continue
        match = _EQUALITY.match(clause)
        if not match or match.group(2) in (">", "<"):
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{clause}'")
        field, symbol, value = match.groups()
        if field not in allowed:
            raise SelectorError(f"field label not supported: {field}")
        requirements.append(
            Requirement(field, Op.NOT_EQUALS if symbol == "!=" else Op.EQUALS, (value,))
        )
    return tuple(requirements)


def selector_from_label_selector(spec: Mapping[str, Any] | None) -> Selector:
    """A metav1.LabelSelector (matchLabels + matchExpressions) as requirements."""
    if not spec:
        return ()
    requirements = [
        Requirement(k, Op.EQUALS, (str(v),)) for k, v in (spec.get("matchLabels") or {}).items()
    ]
    operators = {
        "In": Op.IN,
        "NotIn": Op.NOT_IN,
        "Exists": Op.EXISTS,
        "DoesNotExist": Op.DOES_NOT_EXIST,
    }
    for expression in spec.get("matchExpressions") or []:
        op = operators[expression["operator"]]
        requirements.append(
            Requirement(expression["key"], op, tuple(expression.get("values") or ()))
        )
    return tuple(requirements)


def format_selector(spec: Mapping[str, Any] | None) -> str:
    """The string form the scale subresource reports in `status.selector`."""
    parts = [f"{k}={v}" for k, v in sorted((spec or {}).get("matchLabels", {}).items())]
    for expression in (spec or {}).get("matchExpressions") or []:
        op, key, values = expression["operator"], expression["key"], expression.get("values") or []
        if op in ("In", "NotIn"):
            parts.append(f"{key} {op.lower()} ({','.join(sorted(values))})")
        else:
            parts.append(key if op == "Exists" else f"!{key}")
    return ",".join(parts)
