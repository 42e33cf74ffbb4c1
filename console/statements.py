"""ORM queries compiled once per process, then run again with new values.

A page poll or a signal asks the same few questions on every request (whose session, is the
reader an operator, which projects, which run of a Job), each a lookup the database answers in
a tenth of a millisecond. Django builds and compiles the query again each time, which costs
several times that in the web process (docs/benchmarks.md, "Load"). A `Statement` is written as
an ORM query, so table and column names, joins and each database's dialect stay Django's; it is
compiled the first time it runs, with stand-in values in place of the real ones, and from then
on executed with the real values, its rows converted as the ORM converts them.

Values are ints, strings, datetimes and lists of ints or strings: ints and strings are passed as
themselves (a primary key, a session key), datetimes as the database's backend adapts them (as
the ORM does for a datetime column), lists as the one parameter of an `any_of` lookup
(console.lookups; an empty list matches nothing, as there). A value the ORM would transform in
another way (a pattern for `contains`, a date in a datetime lookup) cannot be a stand-in:
compiling refuses a query whose stand-ins did not come through as expected.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, get_args, get_origin

from django.db import connections
from django.db.models import QuerySet

from console import lookups

# Stand-ins no query of ours compares with: near the top of a 32-bit id's range (the ORM makes
# a lookup by a value beyond its field's range an empty result, not a parameter), a string no
# key contains and a moment long before the console existed.
_INT, _STR = 2_147_480_000, "\x1fstand-in"
_MOMENT = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)
Value = int | str | datetime | Collection[int] | Collection[str]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    slots: tuple[int | None, ...]  # per parameter: which value goes there, None for a constant
    constants: tuple[Any, ...]
    converters: dict[int, tuple[list[Any], Any]]  # per column: the ORM's converters, its field


class Statement:
    """`Statement(lambda job_id: Job.objects.filter(pk=job_id).values_list("run"), int)`:
    the function builds the query from its values; the types (int, str, datetime, list[int],
    list[str]) say which stand-ins to build it with. `rows(*values)` runs it."""

    def __init__(self, build: Callable[..., QuerySet[Any]], *types: Any):
        self._build, self._types = build, types
        self._compiled: dict[str, _Compiled] = {}

    def _stand_ins(self) -> list[Value]:
        return [_stand_in(kind, n) for n, kind in enumerate(self._types)]

    def _compile(self, using: str) -> _Compiled:
        stand_ins = self._stand_ins()
        compiler = self._build(*stand_ins).query.get_compiler(using)
        sql, params = compiler.as_sql()
        expected = _adapted(stand_ins, self._types, using)
        slots = tuple(expected.index(p) if p in expected else None for p in params)
        if {slot for slot in slots if slot is not None} != set(range(len(stand_ins))):
            raise ValueError(f"every value must reach the query unchanged: {sql}")
        fields = [column[0] for column in compiler.select[: compiler.col_count]]
        return _Compiled(sql, slots, tuple(params), compiler.get_converters(fields))

    def rows(self, *values: Value, using: str = "default") -> list[Any]:
        compiled = self._compiled.get(using)
        if compiled is None:
            compiled = self._compiled[using] = self._compile(using)
        adapted = _adapted(values, self._types, using)
        params = [
            adapted[slot] if slot is not None else constant
            for slot, constant in zip(compiled.slots, compiled.constants, strict=True)
        ]
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        if not compiled.converters:
            return rows
        return [_converted(row, compiled.converters, connection) for row in rows]

    def first(self, *values: Value, using: str = "default") -> Any:
        rows = self.rows(*values, using=using)
        return rows[0] if rows else None


def _stand_in(kind: Any, n: int) -> Any:
    if get_origin(kind) is list:
        return [_stand_in(get_args(kind)[0], n)]
    if kind is int:
        return _INT + n
    if kind is str:
        return f"{_STR} {n}"
    return _MOMENT + timedelta(microseconds=n)


def _adapted(values: Sequence[Any], types: Sequence[Any], using: str) -> list[Any]:
    """Datetimes as the ORM passes them for a datetime column (a string on SQLite), lists as
    an `any_of` lookup passes them."""
    connection = connections[using]
    return [
        lookups.parameter(list(value), connection.vendor) if get_origin(kind) is list
        else connection.ops.adapt_datetimefield_value(value) if isinstance(value, datetime)
        else value
        for value, kind in zip(values, types, strict=True)
    ]  # fmt: skip


def _converted(row: Any, converters: dict[int, tuple[list[Any], Any]], connection: Any) -> tuple:
    """As the ORM's compiler converts a row it read (SQLCompiler.apply_converters)."""
    values = list(row)
    for index, (functions, field) in converters.items():
        for function in functions:
            values[index] = function(values[index], field, connection)
    return tuple(values)
