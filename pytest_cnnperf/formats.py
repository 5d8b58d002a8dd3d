"""The files and messages pytest-cnnperf writes, mapped field by field to its dataclasses.

A results file (``--cnnperf-json``), a baseline file, and the messages between the pytest
process, its sample processes and its xdist workers are JSON documents with a ``schema`` and a
``schema_version``. Each is written and read through an explicit mapping: the name a value has
in the file, the dataclass attribute it belongs to, and a codec that checks it when read. So the
files do not change when an attribute is renamed, and a bad value is refused with the path of the
value in the file (``entries['test_a']['...'].step_time_s[2]: expected a positive number, found
-0.04``), which is what a user needs to mend it.

(Written here rather than taken from cattrs or pydantic: this module is all the project needs,
and the path-bearing messages are part of the product.)
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from .results import (
    BaselineEntry,
    BaselineFile,
    BenchConfig,
    BenchmarkResult,
    Comparison,
    Compilation,
    CompileComparison,
    CompilerStack,
    CompileSetting,
    Decision,
    DeviceHealth,
    Energy,
    Environment,
    Flags,
    GraphBreak,
    Measurement,
    MemoryPeak,
    OptionValue,
    Peak,
    Reason,
    Remark,
    ResultsFile,
    Sample,
    StepFlops,
    Verdict,
)

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


class DataError(ValueError):
    """A value read from a file does not have the shape or range its field needs."""


def _kind(data: object) -> str:
    if data is None:
        return "null"
    if isinstance(data, (dict, list)):
        return type(data).__name__
    return f"{type(data).__name__} {data!r}"


class Codec(Generic[T]):
    """Writes a value as JSON data and reads it back, checking it."""

    def dump(self, value: T) -> Any:
        raise NotImplementedError

    def load(self, data: object, path: str) -> T:
        raise NotImplementedError


#: no number in a file of ours is this large (json reads ints of any size, floats up to inf)
LARGEST = 2**63


class Scalar(Codec[T]):
    """A string, boolean or number, with a check of its range."""

    def __init__(
        self, types: tuple[type, ...], what: str, check: Callable[[Any], bool] = lambda _: True
    ) -> None:
        self.types = types
        self.what = what
        self.check = check

    def dump(self, value: T) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"cannot store the non-finite number {value!r}")
        return value

    def load(self, data: object, path: str) -> T:
        if isinstance(data, bool) and bool not in self.types:
            raise DataError(f"{path}: expected {self.what}, found {_kind(data)}")
        if isinstance(data, int) and not isinstance(data, bool) and abs(data) >= LARGEST:
            # json reads any number of digits; no figure of ours needs more than 64 bits
            digits = len(str(abs(data)))
            raise DataError(f"{path}: expected {self.what}, found an int of {digits} digits")
        if not isinstance(data, self.types) or not self.check(data):
            raise DataError(f"{path}: expected {self.what}, found {_kind(data)}")
        value: Any = float(cast(float, data)) if float in self.types else data
        result: T = value
        return result


def _finite(value: float) -> bool:
    return math.isfinite(value)


STR: Scalar[str] = Scalar((str,), "str")
BOOL: Scalar[bool] = Scalar((bool,), "bool")
INT: Scalar[int] = Scalar((int,), "int")
COUNT: Scalar[int] = Scalar((int,), "an int of at least 0", lambda v: v >= 0)
POSITIVE_INT: Scalar[int] = Scalar((int,), "a positive int", lambda v: v > 0)
FLOAT: Scalar[float] = Scalar((int, float), "a finite float", _finite)
NONNEGATIVE: Scalar[float] = Scalar(
    (int, float), "a number of at least 0", lambda v: _finite(v) and v >= 0
)
POSITIVE: Scalar[float] = Scalar((int, float), "a positive number", lambda v: _finite(v) and v > 0)


class OptionValueCodec(Codec[OptionValue]):
    """A value of an inductor option: a bool, number or string, kept as it is."""

    def dump(self, value: OptionValue) -> Any:
        return FLOAT.dump(value) if isinstance(value, float) else value

    def load(self, data: object, path: str) -> OptionValue:
        if isinstance(data, (bool, int, str)) or (isinstance(data, float) and _finite(data)):
            return data
        raise DataError(f"{path}: expected a bool, number or string, found {_kind(data)}")


class OptionsCodec(Codec[tuple[tuple[str, OptionValue], ...]]):
    """Inductor options as a JSON object, read back as sorted ``(name, value)`` pairs."""

    def dump(self, value: tuple[tuple[str, OptionValue], ...]) -> Any:
        return {name: OptionValueCodec().dump(v) for name, v in value}

    def load(self, data: object, path: str) -> tuple[tuple[str, OptionValue], ...]:
        options = MapOf(OptionValueCodec()).load(data, path)
        return tuple(sorted(options.items()))


class Nullable(Codec[T | None]):
    def __init__(self, inner: Codec[T]) -> None:
        self.inner = inner

    def dump(self, value: T | None) -> Any:
        return None if value is None else self.inner.dump(value)

    def load(self, data: object, path: str) -> T | None:
        return None if data is None else self.inner.load(data, path)


class ListOf(Codec[tuple[T, ...]]):
    """A tuple, as a JSON list; ``size`` fixes its length, ``nonempty`` refuses ``[]``."""

    def __init__(self, item: Codec[T], *, size: int | None = None, nonempty: bool = False) -> None:
        self.item = item
        self.size = size
        self.nonempty = nonempty

    def dump(self, value: tuple[T, ...]) -> Any:
        return [self.item.dump(v) for v in value]

    def load(self, data: object, path: str) -> tuple[T, ...]:
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a list, found {_kind(data)}")
        if self.size is not None and len(data) != self.size:
            raise DataError(f"{path}: expected a list of {self.size}, found {len(data)} values")
        if self.nonempty and not data:
            raise DataError(f"{path}: expected at least one value, found an empty list")
        return tuple(self.item.load(v, f"{path}[{i}]") for i, v in enumerate(data))


class MapOf(Codec[dict[str, T]]):
    """A dict with string keys, as a JSON object."""

    def __init__(self, value: Codec[T]) -> None:
        self.value = value

    def dump(self, value: Mapping[str, T]) -> Any:
        return {str(k): self.value.dump(v) for k, v in value.items()}

    def load(self, data: object, path: str) -> dict[str, T]:
        if not isinstance(data, dict):
            raise DataError(f"{path}: expected an object, found {_kind(data)}")
        return {k: self.value.load(v, f"{path}[{k!r}]") for k, v in data.items()}


class EnumOf(Codec[E]):
    def __init__(self, enum_type: type[E]) -> None:
        self.enum_type = enum_type

    def dump(self, value: E) -> Any:
        return value.value

    def load(self, data: object, path: str) -> E:
        try:
            return self.enum_type(data)
        except ValueError:
            accepted = ", ".join(repr(m.value) for m in self.enum_type)
            raise DataError(f"{path}: {data!r} is not one of {accepted}") from None


_REQUIRED = object()


@dataclass(frozen=True)
class Field:
    """A value's name in the file, its attribute in the dataclass (the same unless given) and
    its codec; a field without a default must be present in the file. ``omit``: the field is
    written only when it differs from its default."""

    key: str
    codec: Codec[Any]
    attribute: str = ""
    default: Any = _REQUIRED
    omit: bool = False

    @property
    def name(self) -> str:
        return self.attribute or self.key


class ObjectOf(Codec[T]):
    """A dataclass as a JSON object, field by field. Unknown keys in the file are ignored."""

    def __init__(self, cls: type[T], *fields: Field) -> None:
        self.cls = cls
        self.fields = fields

    def dump(self, value: T) -> Any:
        return {
            f.key: f.codec.dump(getattr(value, f.name))
            for f in self.fields
            if not (f.omit and getattr(value, f.name) == f.default)
        }

    def load(self, data: object, path: str) -> T:
        if not isinstance(data, dict):
            raise DataError(f"{path}: expected an object, found {_kind(data)}")
        kwargs: dict[str, Any] = {}
        for f in self.fields:
            if f.key in data:
                kwargs[f.name] = f.codec.load(data[f.key], f"{path}.{f.key}")
            elif f.default is _REQUIRED:
                raise DataError(f"{path}: the field {f.key!r} is missing")
            else:
                kwargs[f.name] = f.default
        return self.cls(**kwargs)


def optional(key: str, codec: Codec[Any], default: Any = None) -> Field:
    """A field that may be missing (files from before it was added)."""
    return Field(key, Nullable(codec) if default is None else codec, default=default)


def extension(key: str, codec: Codec[Any], default: Any = None) -> Field:
    """An optional field of a feature that most benchmarks do not use (compiling): written only
    when it holds something, so that the files of the others stay as they were."""
    return dataclasses.replace(optional(key, codec, default), omit=True)


# ---- the shared parts ----

FLAGS = ObjectOf(
    Flags,
    Field("cudnn_mode", Nullable(STR)),
    Field("cudnn_tf32", Nullable(BOOL)),
    Field("matmul_tf32", Nullable(BOOL)),
    Field("matmul_precision", STR),
    Field("deterministic_algorithms", BOOL),
    extension("fp32_precision", MapOf(STR), {}),
)
COMPILER_STACK = ObjectOf(
    CompilerStack,
    optional("triton", STR),
    optional("cxx", STR),
    optional("cxx_version", STR),
)
ENVIRONMENT = ObjectOf(
    Environment,
    Field("machine", STR),
    Field("device", STR),
    Field("device_name", STR),
    Field("driver", Nullable(STR)),
    Field("cuda", Nullable(STR)),
    Field("cudnn", Nullable(STR)),
    Field("torch", STR),
    Field("torchvision", Nullable(STR)),
    Field("python", STR),
    Field("platform", STR),
    Field("cpu", STR),
    Field("threads", POSITIVE_INT),
    Field("interop_threads", POSITIVE_INT),
    Field("flags", FLAGS),
    extension("compiler", COMPILER_STACK),
)
COMPILE_SETTING = ObjectOf(
    CompileSetting,
    optional("backend", STR, "inductor"),
    optional("mode", STR),
    optional("fullgraph", BOOL, False),
    Field("dynamic", Nullable(BOOL), default=False),
    optional("options", OptionsCodec(), ()),
)
CONFIG = ObjectOf(
    BenchConfig,
    Field("kind", STR),
    Field("model", STR),
    Field("batch_size", POSITIVE_INT),
    Field("image_size", Nullable(ListOf(POSITIVE_INT, size=2))),
    optional("amp", STR),
    optional("channels_last", BOOL, False),
    optional("optimizer", STR),
    optional("loss", STR),
    optional("cudnn_mode", STR),
    optional("world_size", POSITIVE_INT, 1),
    optional("unit", STR, "images"),
    optional("label", STR),
    extension("compile", COMPILE_SETTING),
    extension("cuda_graphs", BOOL, False),
)
MEMORY = ObjectOf(
    MemoryPeak,
    Field("allocated_bytes", COUNT),
    Field("reserved_bytes", Nullable(COUNT)),
    Field("source", STR),
    optional("alloc_retries", COUNT),
)
HEALTH = ObjectOf(
    DeviceHealth,
    Field("sm_clock_mhz", Nullable(INT)),
    Field("max_sm_clock_mhz", Nullable(INT)),
    Field("memory_clock_mhz", Nullable(INT)),
    Field("temperature_c", Nullable(INT)),
    Field("power_w", Nullable(FLOAT)),
    Field("power_limit_w", Nullable(FLOAT)),
    Field("clock_event_reasons", ListOf(STR)),
    Field("other_processes", Nullable(ListOf(INT))),
    Field("problems", ListOf(STR)),
    extension("throttled", MapOf(NONNEGATIVE), {}),
)
GRAPH_BREAK = ObjectOf(
    GraphBreak,
    Field("reason", STR),
    optional("location", STR),
    optional("code", STR),
    optional("internal", BOOL, False),
)
COMPILATION = ObjectOf(
    Compilation,
    Field("compile_s", Nullable(NONNEGATIVE)),
    Field("cache", Nullable(STR)),
    Field("graphs", COUNT),
    optional("graph_breaks", ListOf(GRAPH_BREAK), ()),
    optional("recompiles", COUNT, 0),
    optional("warmup_recompiles", COUNT, 0),
    optional("recompile_reasons", ListOf(STR), ()),
    optional("eager_frames", COUNT, 0),
    optional("cudagraph_skips", COUNT, 0),
)
FLOPS = ObjectOf(
    StepFlops,
    Field("phases", MapOf(COUNT)),
    Field("operators", MapOf(COUNT)),
    Field("items", POSITIVE_INT),
    Field("method", STR),
)
PEAK = ObjectOf(
    Peak,
    Field("precision", Nullable(STR)),
    Field("flops_per_s", Nullable(POSITIVE)),
    Field("source", STR),
    Field("detail", STR),
)
ENERGY = ObjectOf(
    Energy,
    Field("joules", NONNEGATIVE),
    Field("seconds", POSITIVE),
    Field("items", POSITIVE_INT),
    Field("source", STR),
)
SAMPLE = ObjectOf(
    Sample,
    Field("step_time_s", POSITIVE),
    Field("step_times_s", ListOf(POSITIVE)),
    Field("phases", MapOf(ListOf(NONNEGATIVE))),
    Field("cold_step_s", NONNEGATIVE),
    Field("warmup_steps", COUNT),
    Field("warmup_steady", BOOL),
    Field("calibration_s", Nullable(POSITIVE)),
    Field("memory", Nullable(MEMORY)),
    optional("health", HEALTH),
    optional("in_process", BOOL, False),
    optional("single_rank_step_s", POSITIVE),
    optional("cpu_contention", NONNEGATIVE),
    extension("compilation", COMPILATION),
    extension("calibration_unit", STR),
    optional("flops", FLOPS),
    optional("peak", PEAK),
    optional("energy", ENERGY),
)
MEASUREMENT = ObjectOf(
    Measurement,
    Field("items_per_step", POSITIVE_INT),
    Field("samples", ListOf(SAMPLE, nonempty=True)),
    optional("unit", STR, "images"),
)
COMPARISON = ObjectOf(
    Comparison,
    Field("metric", STR),
    Field("baseline", NONNEGATIVE),
    Field("current", NONNEGATIVE),
    Field("change", FLOAT),
    Field("threshold", POSITIVE),
    Field("verdict", EnumOf(Verdict)),
    optional("p_value", NONNEGATIVE),
    optional("low", FLOAT),
    optional("high", FLOAT),
    optional("baseline_samples", COUNT, 0),
    optional("current_samples", COUNT, 0),
    optional("machine_factor", POSITIVE, 1.0),
    optional("raw_change", FLOAT),
)


COMPILE_COMPARISON = ObjectOf(
    CompileComparison,
    Field("graph_breaks", COUNT),
    Field("baseline_graph_breaks", Nullable(COUNT)),
    Field("recompiles", COUNT),
    optional("eager_frames", COUNT, 0),
    optional("warmup_recompiles", COUNT, 0),
    optional("cache", STR),
    optional("compile_s", NONNEGATIVE),
    optional("baseline_compile_s", NONNEGATIVE),
    optional("threshold", POSITIVE),
    optional("verdict", EnumOf(Verdict), Verdict.OK),
)


class Notes(Codec[tuple[Reason, ...]]):
    """A decision's reasons, written as the sentences a reader gets (``explain``) and read
    back as those sentences."""

    def dump(self, value: tuple[Reason, ...]) -> Any:
        from .explain import reason_text

        return [reason_text(reason) for reason in value]

    def load(self, data: object, path: str) -> tuple[Reason, ...]:
        return tuple(Remark(text) for text in ListOf(STR).load(data, path))


DECISION = ObjectOf(
    Decision,
    Field("verdict", EnumOf(Verdict)),
    optional("throughput", COMPARISON),
    optional("memory", COMPARISON),
    optional("machine_speed", POSITIVE),
    optional("environment_changes", ListOf(STR), ()),
    Field("notes", Notes(), attribute="reasons", default=()),
    optional("baseline_file", STR),
    optional("failed", BOOL, False),
    optional("remeasure", BOOL, False),
    extension("compile", COMPILE_COMPARISON),
)
RESULT = ObjectOf(
    BenchmarkResult,
    Field("test_id", STR),
    Field("key", STR),
    Field("config", CONFIG),
    Field("decision", DECISION),
    optional("environment", ENVIRONMENT),
    optional("measurement", MEASUREMENT),
    optional("duration_s", NONNEGATIVE, 0.0),
    optional("error", STR),
)
ENTRY = ObjectOf(
    BaselineEntry,
    Field("recorded", STR),
    Field("config", CONFIG),
    Field("environment", ENVIRONMENT),
    Field("items_per_step", POSITIVE_INT),
    Field("step_time_s", ListOf(POSITIVE, nonempty=True)),
    optional("calibration_s", ListOf(POSITIVE), ()),
    extension("calibration_unit", STR),
    optional("peak_allocated_bytes", ListOf(COUNT), ()),
    optional("peak_reserved_bytes", COUNT),
    optional("memory_source", STR),
    optional("phases_s", MapOf(NONNEGATIVE), {}),
    optional("cold_step_s", NONNEGATIVE),
    optional("in_process", BOOL, False),
    extension("compile_cold_s", NONNEGATIVE),
    extension("compile_warm_s", NONNEGATIVE),
    extension("graph_breaks", ListOf(GRAPH_BREAK), ()),
)


# ---- documents: a body under a schema name and version ----


@dataclass(frozen=True)
class Document(Generic[T]):
    """A kind of JSON document: its ``schema`` name, the newest ``schema_version`` this
    version writes and reads, and the mapping of its body."""

    schema: str
    version: int
    body: ObjectOf[T]
    #: how the document is called in messages: ``results``, ``baseline``
    noun: str

    def dump(self, value: T) -> dict[str, Any]:
        data: dict[str, Any] = {"schema": self.schema, "schema_version": self.version}
        data.update(self.body.dump(value))
        return data

    def version_problem(self, data: Mapping[str, Any]) -> str | None:
        """Why a document of this schema cannot be read by this version, or ``None``."""
        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            return "its schema_version is missing or not a number"
        if version > self.version:
            return (
                f"it was written by a newer pytest-cnnperf ({self.noun}schema version {version}; "
                f"this one reads up to {self.version}); upgrade pytest-cnnperf"
            )
        return None

    def load(self, data: Mapping[str, Any], path: str = "file") -> T:
        """The body of a document whose schema is this one; ``DataError`` for a bad value (the
        caller checks the version first with :meth:`version_problem`)."""
        return self.body.load(dict(data), path)


RESULTS: Document[ResultsFile] = Document(
    "pytest-cnnperf/results",
    1,
    ObjectOf(
        ResultsFile,
        Field("created", STR),
        Field("machine", Nullable(STR)),
        optional("results", ListOf(RESULT), ()),
    ),
    "results ",
)
BASELINE: Document[BaselineFile] = Document(
    "pytest-cnnperf/baseline",
    1,
    ObjectOf(
        BaselineFile,
        Field("machine", STR),
        Field("entries", MapOf(MapOf(ENTRY))),
        optional("module", STR),
    ),
    "",
)

#: every record mapping, for the test that checks each maps all of its dataclass's fields
RECORDS: tuple[ObjectOf[Any], ...] = (
    FLAGS,
    COMPILER_STACK,
    ENVIRONMENT,
    COMPILE_SETTING,
    CONFIG,
    MEMORY,
    HEALTH,
    GRAPH_BREAK,
    COMPILATION,
    FLOPS,
    PEAK,
    ENERGY,
    SAMPLE,
    MEASUREMENT,
    COMPARISON,
    COMPILE_COMPARISON,
    DECISION,
    RESULT,
    ENTRY,
    RESULTS.body,
    BASELINE.body,
)


def unmapped(record: ObjectOf[Any]) -> set[str]:
    """Attributes of a record's dataclass that its mapping leaves out."""
    attributes = {f.name for f in dataclasses.fields(record.cls)}
    return attributes - {f.name for f in record.fields}
