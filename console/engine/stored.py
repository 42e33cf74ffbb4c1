"""Observations as the database keeps them: a cluster's objects are parsed once, when they
change, and stored as their observation's fields in JSON (about 400 bytes for a pod instead of
2.5 KB of object); reading one back builds the dataclass without parsing the object again.

The stored form follows the observation classes' fields: `SCHEMA` names them, and a cycle that
finds other stored fields forgets what is stored and relists (console.engine.cycle).
"""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import datetime
from functools import cache
from typing import Any

import orjson

from console.engine.streams import STREAMS
from console.kube.observations import Owner, TerminationCompletion


def freeze(observation: Any) -> str:
    return orjson.dumps(observation).decode()


@cache
def _fields(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind))


@cache
def _times(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind) if "datetime" in str(f.type))


def thaw(kind: type, data: str) -> Any:
    """The observation back from its JSON. Its fields are passed by position: a cycle thaws
    about ten objects per changed one, and keywords cost a frozen dataclass twice as much."""
    values: dict[str, Any] = orjson.loads(data)
    for name in _times(kind):
        if values[name] is not None:
            values[name] = datetime.fromisoformat(values[name])
    if "owner" in values:
        values["owner"] = Owner(**values["owner"])
    if values.get("completion") is not None:  # a pod's (PodObs.completion)
        values["completion"] = _completion(values["completion"])
    return kind(*[values[name] for name in _fields(kind)])


def _completion(values: dict[str, Any]) -> TerminationCompletion:
    finished_at = values["finished_at"]
    values["finished_at"] = datetime.fromisoformat(finished_at) if finished_at else None
    return TerminationCompletion(**values)


def _schema() -> str:
    kinds = sorted(
        {stream.observation for stream in STREAMS} | {Owner, TerminationCompletion},
        key=lambda kind: kind.__name__,
    )
    fields = [
        f"{kind.__name__}:{','.join(f.name for f in dataclasses.fields(kind))}" for kind in kinds
    ]
    return hashlib.blake2b(";".join(fields).encode(), digest_size=6).hexdigest()


SCHEMA = _schema()
