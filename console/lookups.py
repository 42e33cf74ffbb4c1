"""`field__any_of=values`: membership in a list passed as one parameter.

Django's `__in` writes one placeholder per value and prepares each value: for the hundreds of
ids and names a sync cycle selects by, that is most of the statement's cost on the client (the
ORM's per-value preparation, then the driver parsing a statement whose text changes with every
length). `any_of` sends the whole list as one parameter, so the statement's text is the same for
every length and the driver parses it once: `= ANY(%s)` (an array) on PostgreSQL,
`IN (SELECT value FROM json_each(%s))` (a JSON array) on SQLite.

The values are plain ints or strings, passed as they are (no field preparation): use it for
primary keys, foreign-key ids and plain text columns, not for transformed values.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson
from django.core.exceptions import EmptyResultSet
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, ForeignObject, Lookup
from django.db.models.sql.compiler import SQLCompiler


@ForeignObject.register_lookup  # relations keep lookups of their own (not Field's)
@Field.register_lookup
class AnyOf(Lookup):  # type: ignore[type-arg]
    lookup_name = "any_of"
    prepare_rhs = False

    def get_prep_lookup(self) -> list[Any]:
        values = self.rhs
        if isinstance(values, str | bytes) or not isinstance(values, Collection):
            raise TypeError("any_of takes a collection of ints or strings")
        if not set(map(type, values)) <= {int, str}:
            raise TypeError("any_of takes plain ints or strings only")
        return list(values)

    def as_sql(  # type: ignore[override]
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper
    ) -> tuple[str, tuple[Any, ...]]:
        if not self.rhs:  # as `__in`: no row, and no query when nothing else is asked
            raise EmptyResultSet
        lhs, params = self.process_lhs(compiler, connection)
        values = parameter(self.rhs, connection.vendor)
        if connection.vendor == "postgresql":
            return f"{lhs} = ANY(%s)", (*params, values)
        return f"{lhs} IN (SELECT value FROM json_each(%s))", (*params, values)


def parameter(values: list[int | str], vendor: str) -> str | list[int | str]:
    """The one parameter the values travel as: an array on PostgreSQL, JSON on SQLite."""
    return array_literal(values) if vendor == "postgresql" else orjson.dumps(values).decode()


def array_literal(values: list[int | str]) -> str | list[int | str]:
    """The values as PostgreSQL's array literal, `{1,2}` or `{"a","b\\"c"}`, made from their
    JSON: both quote a string in double quotes and escape a quote and a backslash with a
    backslash. JSON escapes control characters too (`\\n`), which an array literal would read
    as the letter: a list holding one is passed as a list (the driver quotes each value)."""
    text = orjson.dumps(values)
    if b"\\" in text.replace(b"\\\\", b"").replace(b'\\"', b""):
        return values
    return "{" + text[1:-1].decode() + "}"
