"""Statements that write many rows at once: an UPDATE by key, an upsert and an insert of the
rows not there yet, each one statement for all the rows on PostgreSQL.

Django's bulk_update builds a CASE expression per row and field (about 1 ms a row: 1.5 s for
the 1,000 Workers of 100 touched Jobs), and a model instance per row costs more than the write
itself. Here the rows are plain values. On PostgreSQL they travel as one JSON parameter read
back by `jsonb_to_recordset`, serialized by orjson in C, where a statement per row would have the
driver quote every value one by one (a third of a watch cycle's writing); SQLite gets one
prepared statement sent with executemany.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, cast

import orjson
from django.db import connections, models, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.db.models.options import Options

# Field types whose database value is the Python value itself: Django's preparation of a str,
# int or bool for them returns it unchanged. Exact types: a subclass (an encrypted field) may
# prepare its values, so it is prepared as every other field (datetimes, JSON, keys).
PLAIN_FIELDS = (
    models.CharField, models.TextField, models.BooleanField, models.IntegerField,
    models.PositiveIntegerField, models.BigIntegerField, models.BigAutoField,
)  # fmt: skip
# Field types whose JSON form PostgreSQL reads back as their value: the plain ones, keys (ints,
# a one-to-one's too) and datetimes (aware, as every time of a cycle is: orjson writes their
# offset). Rows with a column of another type are written statement by statement, each value
# prepared by its field.
RECORD_FIELDS = (*PLAIN_FIELDS, models.DateTimeField, models.ForeignKey, models.OneToOneField)
Columns = Sequence["Field[Any, Any]"]


def update_rows(model: type[Model], fields: Sequence[str], rows: Sequence[Any]) -> int:
    """Writes `fields` of each row (a model instance or a named row with a `pk`) by primary
    key."""
    values = [[getattr(row, name) for name in fields] + [row.pk] for row in rows]
    update_where(model, fields, ["pk"], values)
    return len(rows)


def update_where(
    model: type[Model], fields: Sequence[str], keys: Sequence[str], values: Sequence[list[Any]]
) -> int:
    """`UPDATE ... SET fields WHERE keys` for each item of `values` (the fields' values, then
    the keys', distinct). Returns the rows the database changed (a conditional UPDATE whose row
    moved on changes none)."""
    if not values:
        return 0
    meta, connection = model._meta, connections[router.db_for_write(model)]
    columns = [_field(meta, name) for name in [*fields, *keys]]
    quote = connection.ops.quote_name
    table, names = quote(meta.db_table), [quote(str(column.column)) for column in columns]
    assigned, compared = range(len(fields)), range(len(fields), len(columns))
    if _as_records(connection, columns):
        # The record's columns are named by position: a conditional update compares a column
        # it also sets.
        sql = (
            f"UPDATE {table} SET {', '.join(f'{names[i]} = v.c{i}' for i in assigned)} "
            f"FROM {_recordset(connection, columns)} "
            f"WHERE {' AND '.join(f'{table}.{names[i]} = v.c{i}' for i in compared)}"
        )
        return _execute(connection, sql, [_records(values)])
    sql = (
        f"UPDATE {table} SET {', '.join(f'{names[i]} = %s' for i in assigned)} "
        f"WHERE {' AND '.join(f'{names[i]} = %s' for i in compared)}"
    )
    return _execute(connection, sql, _prepared(connection, columns, values), many=True)


def upsert(
    model: type[Model], key: Sequence[str], stored: Sequence[str], values: Sequence[Sequence[Any]],
    unchanged: Sequence[str] = (),
) -> None:  # fmt: skip
    """Inserts each row (the values of `key`, then of `stored`) or, where a row of that key
    exists (a unique constraint on `key`), replaces its `stored` columns, unless one of the
    `unchanged` columns (among `stored`) holds another value than the row's there (another
    writer moved it on meanwhile: that row is left as it is). The rows' keys must be
    distinct."""
    if not values:
        return
    meta, connection = model._meta, connections[router.db_for_write(model)]
    columns = [_field(meta, name) for name in [*key, *stored]]
    quote = connection.ops.quote_name
    table, names = quote(meta.db_table), [quote(str(column.column)) for column in columns]
    replaced = ", ".join(f"{name} = excluded.{name}" for name in names[len(key) :])
    conflict = f"ON CONFLICT ({', '.join(names[: len(key)])}) DO UPDATE SET {replaced}"
    if unchanged:
        kept = [quote(str(_field(meta, name).column)) for name in unchanged]
        conflict += " WHERE " + " AND ".join(f"{table}.{name} = excluded.{name}" for name in kept)
    into = f"INSERT INTO {table} ({', '.join(names)})"
    if _as_records(connection, columns):
        selected = ", ".join(f"v.c{i}" for i in range(len(columns)))
        sql = f"{into} SELECT {selected} FROM {_recordset(connection, columns)} {conflict}"
        _execute(connection, sql, [_records(values)])
        return
    sql = f"{into} VALUES ({', '.join(['%s'] * len(columns))}) {conflict}"
    _execute(connection, sql, _prepared(connection, columns, values), many=True)


def insert_new(model: type[Model], fields: Sequence[str], values: Sequence[Sequence[Any]]) -> int:
    """Inserts each row (the values of `fields`) unless a row with one of its unique keys exists
    (inserted by another worker meanwhile): `ON CONFLICT DO NOTHING`. Returns the rows the
    database inserted."""
    if not values:
        return 0
    meta, connection = model._meta, connections[router.db_for_write(model)]
    columns = [_field(meta, name) for name in fields]
    quote = connection.ops.quote_name
    names = ", ".join(quote(str(column.column)) for column in columns)
    into, ignored = f"INSERT INTO {quote(meta.db_table)} ({names})", "ON CONFLICT DO NOTHING"
    if _as_records(connection, columns):
        selected = ", ".join(f"v.c{i}" for i in range(len(columns)))
        sql = f"{into} SELECT {selected} FROM {_recordset(connection, columns)} {ignored}"
        return _execute(connection, sql, [_records(values)])
    sql = f"{into} VALUES ({', '.join(['%s'] * len(columns))}) {ignored}"
    return _execute(connection, sql, _prepared(connection, columns, values), many=True)


def _field(meta: Options[Any], name: str) -> Field[Any, Any]:
    return cast("Field[Any, Any]", meta.pk if name == "pk" else meta.get_field(name))


def _as_records(connection: BaseDatabaseWrapper, columns: Columns) -> bool:
    return connection.vendor == "postgresql" and all(type(c) in RECORD_FIELDS for c in columns)


def _recordset(connection: BaseDatabaseWrapper, columns: Columns) -> str:
    """The rows of the one parameter, their columns `c0`, `c1`... typed as the fields'."""
    return _typed_recordset(connection.alias, tuple(columns))


@lru_cache(maxsize=256)
def _typed_recordset(alias: str, columns: tuple[Field[Any, Any], ...]) -> str:
    """Asking each field its database type costs more than the rest of a statement's text: a
    cycle writes the same few kinds of row again and again."""
    connection = connections[alias]
    typed = ", ".join(f"c{i} {column.db_type(connection)}" for i, column in enumerate(columns))
    return f"jsonb_to_recordset(%s::jsonb) AS v({typed})"


def _records(values: Sequence[Sequence[Any]]) -> str:
    labels = [f"c{i}" for i in range(len(values[0]))]
    return orjson.dumps([dict(zip(labels, row, strict=True)) for row in values]).decode()


def _prepared(
    connection: BaseDatabaseWrapper, columns: Columns, values: Sequence[Sequence[Any]]
) -> list[list[Any]]:
    """The values as each field prepares them, the plain fields' as they are."""
    prepared = [i for i, column in enumerate(columns) if type(column) not in PLAIN_FIELDS]
    params = [list(row) for row in values]
    for row in params:
        for i in prepared:
            row[i] = columns[i].get_db_prep_save(row[i], connection)
    return params


def _execute(connection: BaseDatabaseWrapper, sql: str, params: Any, many: bool = False) -> int:
    with connection.cursor() as cursor:
        if many:
            cursor.executemany(sql, params)
        else:
            cursor.execute(sql, params)
        return max(cursor.rowcount, 0)
