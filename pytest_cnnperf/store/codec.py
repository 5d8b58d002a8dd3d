"""Dataclasses to JSON data and back, derived from their type hints.

A dataclass is written as an object of its fields, leaving out those equal to their default,
with the properties its ``DERIVED`` names beside them (for a reader of the file; never read
back); a member of a union of dataclasses, or of a base that lists its subclasses
(``kinds()``: a decision's reasons), carries its ``kind``. A tuple of ``(name, value)``
pairs is written as an object. Reading checks each value against its type and against the
range check of its ``Annotated`` metadata (``model.values``), and refuses a bad one with its
path in the file: ``entries['test_a']['...'].measurement.samples[2].step_time_s: expected a
positive number, found float -0.04``, which is what a user needs to mend it.

(Written here rather than taken from cattrs or msgspec: those word their errors their own way,
and the path-bearing messages above are part of the product; msgspec does not tag unions of
dataclasses, which reasons are; and a reader of an older file version is simpler on top of a
codec whose every step we know.)
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, Union, cast

from ..model.values import Check

T = TypeVar("T")


class DataError(ValueError):
    """A value read from a file does not have the shape or range its field needs."""


class DocumentProblem(ValueError):
    """Why a JSON document cannot be read, as a reason; the caller names the file."""


class FileError(Exception):
    """A file of ours cannot be used: ``problem`` says why; the message, worded by the kind of
    file's ``WORDING``, names the file and the fix."""

    WORDING = "{path}: {problem}"

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(self.WORDING.format(path=path, problem=problem))


def json_data(text: str) -> Any:
    """``text`` as JSON data; :class:`DocumentProblem` where it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentProblem(f"it is not valid JSON ({exc})") from None
    except RecursionError:
        raise DocumentProblem("it is not valid JSON (nested too deeply)") from None


#: no number in a file of ours is this large (json reads ints of any size, floats up to inf)
LARGEST = 2**63


def kind_of(data: object) -> str:
    """How a message names a value found in a file: ``float -0.04``, ``list``, ``null``, ``an
    int of 30 digits``."""
    if data is None:
        return "null"
    if isinstance(data, (dict, list)):
        return type(data).__name__
    if isinstance(data, int) and not isinstance(data, bool) and abs(data) >= LARGEST:
        return f"an int of {len(str(abs(data)))} digits"
    return f"{type(data).__name__} {data!r}"


class Codec:
    """Writes one type's values as JSON data and reads them back, checking them."""

    def dump(self, value: Any) -> Any:
        return value

    def load(self, data: Any, path: str) -> Any:
        raise NotImplementedError


class Scalar(Codec):
    """A string, boolean or number (``bool`` is not an ``int`` here)."""

    def __init__(self, types_: tuple[type, ...], what: str, to_float: bool = False) -> None:
        self.types = types_
        self.what = what
        self.to_float = to_float

    def dump(self, value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"cannot store the non-finite number {value!r}")
        return value

    def load(self, data: Any, path: str) -> Any:
        bool_as_number = isinstance(data, bool) and bool not in self.types
        big = isinstance(data, int) and abs(data) >= LARGEST
        finite = not isinstance(data, float) or math.isfinite(data)
        if bool_as_number or big or not isinstance(data, self.types) or not finite:
            raise DataError(f"{path}: expected {self.what}, found {kind_of(data)}")
        return float(cast(float, data)) if self.to_float else data


STR = Scalar((str,), "str")
BOOL = Scalar((bool,), "bool")
INT = Scalar((int,), "int")
FLOAT = Scalar((int, float), "a finite float", to_float=True)
ANY_SCALAR = Scalar((bool, int, float, str), "a bool, number or string")


class Checked(Codec):
    """A value with a range check (``Annotated[float, POSITIVE]``)."""

    def __init__(self, inner: Codec, check: Check) -> None:
        self.inner = inner
        self.check = check

    def dump(self, value: Any) -> Any:
        return self.inner.dump(value)

    def load(self, data: Any, path: str) -> Any:
        if isinstance(self.inner, Scalar):  # a value of another type is refused as out of range
            try:
                value = self.inner.load(data, path)
            except DataError:
                raise DataError(
                    f"{path}: expected {self.check.what}, found {kind_of(data)}"
                ) from None
        else:
            value = self.inner.load(data, path)
        if not self.check.accepts(value):
            found = "an empty list" if data == [] else kind_of(data)  # a list that needs values
            raise DataError(f"{path}: expected {self.check.what}, found {found}")
        return value


class Nullable(Codec):
    def __init__(self, inner: Codec) -> None:
        self.inner = inner

    def dump(self, value: Any) -> Any:
        return None if value is None else self.inner.dump(value)

    def load(self, data: Any, path: str) -> Any:
        return None if data is None else self.inner.load(data, path)


class ListOf(Codec):
    """A tuple as a JSON list: ``tuple[T, ...]``, or ``tuple[A, B]`` of a fixed length."""

    def __init__(self, items: tuple[Codec, ...], fixed: bool) -> None:
        self.items = items
        self.fixed = fixed

    def _item(self, i: int) -> Codec:
        return self.items[i] if self.fixed else self.items[0]

    def dump(self, value: Any) -> Any:
        return [self._item(i).dump(v) for i, v in enumerate(value)]

    def load(self, data: Any, path: str) -> Any:
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a list, found {kind_of(data)}")
        if self.fixed and len(data) != len(self.items):
            raise DataError(
                f"{path}: expected a list of {len(self.items)}, found {len(data)} values"
            )
        return tuple(self._item(i).load(v, f"{path}[{i}]") for i, v in enumerate(data))


class MapOf(Codec):
    """``dict[str, T]`` as a JSON object; with ``pairs``, a tuple of ``(name, value)`` pairs,
    read back sorted by name."""

    def __init__(self, value: Codec, pairs: bool = False) -> None:
        self.value = value
        self.pairs = pairs

    def dump(self, value: Any) -> Any:
        items = value if self.pairs else value.items()
        return {str(k): self.value.dump(v) for k, v in items}

    def load(self, data: Any, path: str) -> Any:
        if not isinstance(data, dict):
            raise DataError(f"{path}: expected an object, found {kind_of(data)}")
        loaded = {k: self.value.load(v, f"{path}[{k!r}]") for k, v in data.items()}
        return tuple(sorted(loaded.items())) if self.pairs else loaded


class EnumOf(Codec):
    def __init__(self, enum_type: type[enum.Enum]) -> None:
        self.enum_type = enum_type

    def dump(self, value: Any) -> Any:
        return value.value

    def load(self, data: Any, path: str) -> Any:
        try:
            return self.enum_type(data)
        except ValueError:
            accepted = ", ".join(repr(m.value) for m in self.enum_type)
            raise DataError(f"{path}: {data!r} is not one of {accepted}") from None


_MISSING = object()


class ObjectOf(Codec):
    """A dataclass as a JSON object. Unknown keys in the file are ignored; a field without a
    default must be present."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.fields: list[tuple[str, Any]] = []  # (name, default), codecs resolved lazily
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = _MISSING
            self.fields.append((f.name, default))
        self.derived: tuple[str, ...] = getattr(cls, "DERIVED", ())

    @functools.cached_property
    def codecs(self) -> dict[str, Codec]:
        hints = typing.get_type_hints(self.cls, include_extras=True)
        return {name: codec_for(hints[name]) for name, _ in self.fields}

    def dump(self, value: Any) -> Any:
        data = {
            name: self.codecs[name].dump(getattr(value, name))
            for name, default in self.fields
            if default is _MISSING or getattr(value, name) != default
        }
        for name in self.derived:
            derived = getattr(value, name)
            if derived is not None:
                data[name] = dump(derived)
        return data

    def load(self, data: Any, path: str) -> Any:
        if not isinstance(data, dict):
            raise DataError(f"{path}: expected an object, found {kind_of(data)}")
        values: dict[str, Any] = {}
        for name, default in self.fields:
            if name in data:
                values[name] = self.codecs[name].load(data[name], f"{path}.{name}")
            elif default is _MISSING:
                raise DataError(f"{path}: the field {name!r} is missing")
            else:
                values[name] = default
        return self.cls(**values)


class OneOf(Codec):
    """A member of a union of dataclasses, or a subclass of a base that lists them
    (``kinds()``), each with its ``kind``."""

    def __init__(self, classes: tuple[type, ...]) -> None:
        self.classes = {cls.kind: cls for cls in classes}  # type: ignore[attr-defined]

    def dump(self, value: Any) -> Any:
        hint: Any = type(value)
        return {"kind": hint.kind, **codec_for(hint).dump(value)}

    def load(self, data: Any, path: str) -> Any:
        if not isinstance(data, dict):
            raise DataError(f"{path}: expected an object, found {kind_of(data)}")
        cls = self.classes.get(data.get("kind"))
        if cls is None:
            accepted = ", ".join(repr(k) for k in self.classes)
            raise DataError(f"{path}.kind: {data.get('kind')!r} is not one of {accepted}")
        hint: Any = cls
        return codec_for(hint).load(data, path)


@functools.cache
def codec_for(tp: Any) -> Codec:
    """The codec of a type as a field's hint spells it."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        check = next((a for a in tp.__metadata__ if isinstance(a, Check)), None)
        inner = codec_for(args[0])
        return Checked(inner, check) if check else inner
    if origin in (Union, types.UnionType):
        members = tuple(a for a in args if a is not type(None))
        if len(members) < len(args):
            rest = members[0] if len(members) == 1 else Union[members]  # noqa: UP007 (a value)
            return Nullable(codec_for(rest))
        if all(dataclasses.is_dataclass(m) for m in members):
            return OneOf(members)
        if all(m in (bool, int, float, str) for m in members):
            return ANY_SCALAR
        raise TypeError(f"no codec for the union {tp!r}")
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = typing.get_args(args[0])
            if typing.get_origin(args[0]) is tuple and len(item) == 2 and item[0] is str:
                return MapOf(codec_for(item[1]), pairs=True)  # (name, value) pairs
            return ListOf((codec_for(args[0]),), fixed=False)
        return ListOf(tuple(codec_for(a) for a in args), fixed=True)
    if origin is dict:
        return MapOf(codec_for(args[1]))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return EnumOf(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return ObjectOf(tp)
    if isinstance(tp, type) and hasattr(tp, "kinds"):  # a base whose subclasses name a kind
        return OneOf(tp.kinds())
    scalars = {str: STR, bool: BOOL, int: INT, float: FLOAT}
    if tp in scalars:
        return scalars[tp]
    raise TypeError(f"no codec for {tp!r}")


def dump(value: Any) -> Any:
    """A dataclass (or a value of a field's type) as JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        hint: Any = type(value)
        return codec_for(hint).dump(value)
    if isinstance(value, (list, tuple)):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {str(k): dump(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    return value


def load(cls: type[T], data: Any, path: str = "file") -> T:
    """A ``cls`` from JSON data; :class:`DataError` names the path of a bad value."""
    hint: Any = cls
    value: T = codec_for(hint).load(data, path)
    return value


# ---- documents: a body under a schema name and version ----


@dataclass(frozen=True)
class Document(Generic[T]):
    """A kind of JSON document: its ``schema`` name, the newest ``schema_version`` this version
    writes (and reads: no other), its body's dataclass."""

    schema: str
    version: int
    body: type[T]
    #: how the document is called in messages: ``results``, ``baseline``
    noun: str

    def dump(self, value: T) -> dict[str, Any]:
        data: dict[str, Any] = {"schema": self.schema, "schema_version": self.version}
        data.update(dump(value))
        return data

    def version_problem(self, data: Mapping[str, Any], again: str = "") -> str | None:
        """Why a document of this schema cannot be read by this version, or ``None``; ``again``
        says how to get one it reads, where upgrading pytest-cnnperf would not."""
        version = data.get("schema_version")
        noun = f"{self.noun} " if self.noun else ""
        fix = f"; {again}" if again else ""
        if not isinstance(version, int) or isinstance(version, bool):
            return f"its schema_version is missing or not a number{fix}"
        if version > self.version:
            return (
                f"it was written by a newer pytest-cnnperf ({noun}schema version {version}; "
                f"this one reads up to {self.version}); upgrade pytest-cnnperf"
            )
        if version < 1:
            return f"its schema_version {version} was never written by pytest-cnnperf{fix}"
        if version != self.version:
            return (
                f"its schema_version {version} is older than this pytest-cnnperf reads ({noun}"
                f"schema version {self.version}){fix}"
            )
        return None

    def parse(self, text: str, what: str) -> T:
        """The body of ``text``, a document of this schema; :class:`DocumentProblem` says what
        is wrong with it (``what`` is the kind of file a message names: ``baseline file``)."""
        data = json_data(text)
        if not isinstance(data, dict) or data.get("schema") != self.schema:
            raise DocumentProblem(
                f'it is not a pytest-cnnperf {what} (it lacks "schema": "{self.schema}")'
            )
        problem = self.version_problem(data)
        if problem:
            raise DocumentProblem(problem)
        try:
            return self.load(data)
        except DataError as exc:
            raise DocumentProblem(f"it is malformed: {exc}") from None

    def load(self, data: Mapping[str, Any], path: str = "file") -> T:
        """The body of a document of this schema (the caller checks the version first with
        :meth:`version_problem`); ``DataError`` for a bad value."""
        return load(self.body, dict(data), path)
