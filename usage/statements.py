"""The ledger's statements without model instances, for PostgreSQL and SQLite alike: rows read
as tuples, rows written as one JSON parameter, so a sync cycle's ledger runs the same few
statements whatever the number of rows (usage.ledger; docs/benchmarks.md, "GPU-hours ledger in
the sync cycle").

Why one JSON parameter rather than a placeholder per value: psycopg rewrites each `%s` of a
query in Python, some 2 µs apiece, so the multi-row VALUES of a cycle's 4,000 values cost more
than all the ledger's judging. Why binary results on PostgreSQL: as text, each date-time goes
through Django's time-zone loader in Python (some 1.5 µs apiece, 3,000 in a cycle's read); in
binary, psycopg loads them in C, in UTC as the connection's time zone is.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import orjson
from django.db import connection, models
from django.utils import timezone
from django.utils.dateparse import parse_datetime


def fetch(sql: str, params: Sequence[Any], datetimes: Collection[int]) -> list[tuple[Any, ...]]:
    """A raw SELECT's rows, the columns at `datetimes` as aware date-times (SQLite returns them
    naive, as Django stored them in UTC)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            from psycopg.pq import Format  # the driver of PostgreSQL only

            cursor.cursor.format = Format.BINARY
            cursor.execute(sql, params)
            return cursor.fetchall()
        cursor.execute(sql, params)
        return [_aware(row, datetimes) for row in cursor.fetchall()]


def _aware(row: Sequence[Any], datetimes: Collection[int]) -> tuple[Any, ...]:
    return tuple(
        _aware_value(value) if index in datetimes and value is not None else value
        for index, value in enumerate(row)
    )


def _aware_value(value: datetime | str) -> datetime:
    """As the ORM reads a date-time from SQLite (its converter, convert_datetimefield_value):
    text or naive, in the connection's time zone."""
    found = value if isinstance(value, datetime) else parse_datetime(value)
    assert found is not None
    return found if timezone.is_aware(found) else timezone.make_aware(found, connection.timezone)


def insert(model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence[Any]],
           on_conflict: str = "") -> None:  # fmt: skip
    """One INSERT ... SELECT of the rows (values in `columns`' order); `on_conflict`: its
    ON CONFLICT clause (SQLite needs the WHERE before it, or reads ON as a join's)."""
    fields = fields_of(model, columns)
    names = ", ".join(column(field) for field in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table(model)} ({names}) {rows_of(fields)} WHERE true {on_conflict}",
            [as_json(fields, rows)],
        )


def update(model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence[Any]],
           condition: str = "true") -> int:  # fmt: skip
    """One UPDATE ... FROM setting `columns` of the rows by pk (rows: pk, then the values in
    `columns`' order) where `condition` holds too; returns the rows updated."""
    fields = fields_of(model, ["pk", *columns])
    assigned = ", ".join(
        f"{column(field)} = v.c{index}" for index, field in enumerate(fields) if index
    )  # fmt: skip
    name, pk = table(model), column(fields[0])
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {name} SET {assigned} FROM ({rows_of(fields)}) AS v "
            f"WHERE {name}.{pk} = v.c0 AND {condition}",
            [as_json(fields, rows)],
        )
        return cursor.rowcount


def rows_of(fields: Sequence[models.Field[Any, Any]]) -> str:
    """A SELECT of the rows passed as its one parameter (`as_json`): columns c0, c1, ... one a
    field, of the field's type on PostgreSQL (SQLite stores what it is given). The same text
    every time, so psycopg parses it once and PostgreSQL prepares it."""
    return _rows_of(connection.vendor, tuple(fields))


@functools.cache
def _rows_of(vendor: str, fields: tuple[models.Field[Any, Any], ...]) -> str:
    if vendor == "postgresql":
        typed = (
            f"CAST(e.value ->> {index} AS {field.db_type(connection)}) AS c{index}"
            for index, field in enumerate(fields)
        )
        return f"SELECT {', '.join(typed)} FROM jsonb_array_elements(CAST(%s AS jsonb)) AS e"
    plain = (f"e.value ->> {index} AS c{index}" for index in range(len(fields)))
    return f"SELECT {', '.join(plain)} FROM json_each(%s) AS e"


def as_json(fields: Sequence[models.Field[Any, Any]], rows: Sequence[Sequence[Any]]) -> str:
    """The rows as one JSON array of arrays. Date-times as the database takes them as text:
    ISO 8601 with their offset on PostgreSQL, naive UTC on SQLite (as Django stores them)."""
    if connection.vendor == "postgresql":
        return orjson.dumps(rows).decode()
    at = [index for index, field in enumerate(fields) if isinstance(field, models.DateTimeField)]
    adapt = connection.ops.adapt_datetimefield_value
    converted = []
    for row in rows:
        values = list(row)
        for index in at:
            values[index] = adapt(values[index])
        converted.append(values)
    return orjson.dumps(converted).decode()


def fields_of(model: type[models.Model], names: Sequence[str]) -> list[models.Field[Any, Any]]:
    found = []
    for name in names:
        field = model._meta.pk if name == "pk" else model._meta.get_field(name)
        assert isinstance(field, models.Field)
        found.append(field)
    return found


def table(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def column(field: models.Field[Any, Any]) -> str:
    return connection.ops.quote_name(field.column or field.name)


def marks(count: int) -> str:
    """`count` placeholders, for an IN list."""
    return ", ".join(["%s"] * count)


def one_of(field: models.Field[Any, Any], values: Collection[Any]) -> tuple[str, str]:
    """What follows `IN` for many values of `field` as one parameter: (its SQL, the parameter)
    (where one condition alone selects: joined with OR, PostgreSQL no longer reads an index)."""
    listed = f"(SELECT c0 FROM ({rows_of([field])}) AS listed)"
    return listed, as_json([field], [[value] for value in values])
