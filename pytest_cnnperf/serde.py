"""Dataclasses to JSON-able data and back, with errors that name the path of a bad value.

Results and baselines are frozen dataclasses; files hold plain JSON. ``to_data`` and ``from_data``
convert between the two for the small set of types those dataclasses use (numbers, strings, bools,
``None | X``, ``tuple[X, ...]``, ``dict[str, X]``, enums and nested dataclasses). Reading is strict:
a value of the wrong type raises :class:`DataError` with a path such as
``entries['test_a'].samples[2].step_time_s``, which is what a user needs to mend a corrupt file.
(Written here rather than taken from cattrs or pydantic: these hundred lines are all the project
needs, and the path-bearing messages are part of the product.)
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from typing import Any, TypeVar, Union, get_args, get_origin

T = TypeVar("T")


class DataError(ValueError):
    """A value read from a file does not have the shape its dataclass needs."""


def version_problem(data: dict[str, Any], newest: int, kind: str = "") -> str | None:
    """Why a document's ``schema_version`` cannot be read by a reader of versions up to
    ``newest`` (``kind``: e.g. ``"results "``, for the message), or ``None``."""
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        return "its schema_version is missing or not a number"
    if version > newest:
        return (
            f"it was written by a newer pytest-cnnperf ({kind}schema version {version}; this "
            f"one reads up to {newest}); upgrade pytest-cnnperf"
        )
    return None


def to_data(value: object) -> Any:
    """Turn a dataclass (or a value inside one) into JSON-able data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [to_data(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_data(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"cannot store the non-finite number {value!r}")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot store a {type(value).__name__}: {value!r}")


def from_data(cls: type[T], data: object, path: str = "") -> T:
    """Build ``cls`` from JSON data, checking every field's type."""
    return typing.cast(T, _convert(cls, data, path or cls.__name__))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(tp: Any, data: object, path: str) -> object:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        options = get_args(tp)
        if data is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, data, path)
            except DataError as exc:
                errors.append(str(exc))
        raise DataError(errors[0] if len(errors) == 1 else f"{path}: unexpected value {data!r}")
    if origin is tuple:
        item_type = get_args(tp)[0]
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a list, found {_kind(data)}")
        return tuple(_convert(item_type, v, f"{path}[{i}]") for i, v in enumerate(data))
    if origin is dict:
        _, value_type = get_args(tp)
        if not isinstance(data, dict):
            raise DataError(f"{path}: expected an object, found {_kind(data)}")
        return {k: _convert(value_type, v, f"{path}[{k!r}]") for k, v in data.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _convert_dataclass(tp, data, path)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            accepted = ", ".join(repr(m.value) for m in tp)
            raise DataError(f"{path}: {data!r} is not one of {accepted}") from None
    return _convert_scalar(tp, data, path)


def _convert_dataclass(cls: type, data: object, path: str) -> object:
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected an object, found {_kind(data)}")
    hints = _hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):
        if field.name in data:
            kwargs[field.name] = _convert(
                hints[field.name], data[field.name], f"{path}.{field.name}"
            )
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise DataError(f"{path}: the field {field.name!r} is missing")
    return cls(**kwargs)


def _convert_scalar(tp: Any, data: object, path: str) -> object:
    if tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
    elif tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    elif tp is bool or tp is str:
        if isinstance(data, tp):
            return data
    elif tp is Any:
        return data
    else:
        raise TypeError(f"{path}: serde does not handle the type {tp!r}")
    raise DataError(f"{path}: expected {tp.__name__}, found {_kind(data)}")


def _kind(data: object) -> str:
    if data is None:
        return "null"
    return (
        f"{type(data).__name__} {data!r}"
        if not isinstance(data, (dict, list))
        else type(data).__name__
    )
