"""Dataclasses to plain JSON values and back: the one serialiser of every typed boundary
(the worker's spec and result, the Report).

`from_plain` rebuilds a dataclass tree from its type hints; keys it does not know are
ignored and missing ones take their defaults, so an older file still loads.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


def to_plain(obj: Any) -> Any:
    """A dataclass tree as dicts, lists and scalars (what json.dumps takes)."""
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj  # type: ignore[arg-type]


def from_plain(tp: type[T], value: Any) -> T:
    return typing.cast(T, _build(tp, value))


def to_json(obj: Any, indent: int | None = 1) -> str:
    return json.dumps(to_plain(obj), indent=indent)


def from_json(tp: type[T], text: str) -> T:
    return from_plain(tp, json.loads(text))


def _build(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(args[0], value) if len(args) == 1 else value
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_build(item, v) for v in value]
    if origin is dict:
        _, item = typing.get_args(tp)
        return {k: _build(item, v) for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = _hints(tp)
        known = {f.name for f in dataclasses.fields(tp) if f.init}
        return tp(**{k: _build(hints[k], v) for k, v in value.items() if k in known})
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            return value  # a value of a newer release (or '' of an older one): its text
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(tp: type) -> dict[str, Any]:
    if tp not in _HINTS:
        _HINTS[tp] = typing.get_type_hints(tp)
    return _HINTS[tp]
