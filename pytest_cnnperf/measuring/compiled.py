"""Compiled benchmarks: ``torch.compile`` applied to a training step or a forward pass, and what
compiling did, read from Dynamo's own counters while the steps run.

The model is compiled together with its loss (one graph; AOTAutograd compiles the backward), and
the optimizer's step apart, as PyTorch's tutorial does, so the three timed phases stay apart.
The optimizer's step breaks its graph on purpose: PyTorch's own breaks (``GraphBreak.internal``)
are not counted against the benchmark. Everything compiles in the first step (one eager step
runs before, so the optimizer's state exists); a frame compiled after it is a recompile.

Sample processes of a benchmark share a compiler cache folder per thread count (older torch's
cache key lacks it): the first compiles cold, the others find it warm. Compile errors become
:class:`CompileFailed` with the compiler's message cut to what helps.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..model import Compilation, CompilerStack, CompileSetting, GraphBreak
from .timing import Phase, TimedSteps


@dataclass(frozen=True)
class CompileRequest:
    """How to compile a benchmark: the setting (its identity), the backend as given (a name,
    or a callable from the test) and the compiler cache folder its sample processes share."""

    setting: CompileSetting
    backend: str | Callable[..., Any] = "inductor"
    cache: str | None = None


#: the environment variable inductor reads its cache folder from, at every compile
CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
#: modes whose options turn on CUDA graphs (``torch._inductor.list_mode_options``)
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
#: how much of a compiler's own output a failure message keeps
MESSAGE_LINES = 12


class CompileFailed(RuntimeError):
    """torch.compile could not compile the benchmark; the message is the compiler's, trimmed."""


@dataclass(frozen=True)
class _Counts:
    """Dynamo's and inductor's counters at one moment."""

    frames: int
    graphs: int
    cache_hits: int
    cache_misses: int
    cudagraph_skips: int

    @classmethod
    def now(cls) -> _Counts:
        from torch._dynamo.utils import counters

        inductor, aot = counters["inductor"], counters["aot_autograd"]
        return cls(
            frames=counters["frames"]["total"],
            graphs=counters["stats"]["unique_graphs"],
            cache_hits=inductor["fxgraph_cache_hit"] + aot["autograd_cache_hit"],
            cache_misses=inductor["fxgraph_cache_miss"] + aot["autograd_cache_miss"],
            cudagraph_skips=inductor["cudagraph_skips"],
        )


def compile_cache_root() -> str:
    """A new, unused name for a session's compiler caches, in the temporary folder."""
    return os.path.join(
        tempfile.gettempdir(), f"pytest-cnnperf-compile-{os.getpid()}-{secrets.token_hex(4)}"
    )


class Compiled:
    """A benchmark's compiled functions, and a watch over the steps that run them."""

    def __init__(self, request: CompileRequest, device: Any) -> None:
        import torch

        self.request = request
        if request.cache is not None:  # a folder per thread count
            folder = os.path.join(request.cache, f"{torch.get_num_threads()}t")
            os.makedirs(folder, exist_ok=True)
            os.environ[CACHE_VARIABLE] = folder
        # a second model of the same class would otherwise reuse what an earlier benchmark of
        # this process compiled, and compile nothing
        torch.compiler.reset()
        forget_stale_imports()
        self._check_options()
        setting = request.setting
        self._mark_steps = device.type == "cuda" and (
            setting.mode in CUDAGRAPH_MODES or dict(setting.options).get("triton.cudagraphs")
        )
        self.start()

    def _check_options(self) -> None:
        """Name an unknown inductor option here: torch.compile would list all 400 known ones."""
        setting = self.request.setting
        if setting.backend != "inductor" or not setting.options:
            return
        import torch._inductor

        known = set(torch._inductor.list_options())
        unknown = [name for name, _ in setting.options if name not in known]
        if unknown:
            raise CompileFailed(
                f"compile options {', '.join(map(repr, unknown))}: not an option of inductor "
                f"(torch {torch.__version__}); torch._inductor.list_options() lists them"
            )

    def function(self, fn: Callable[..., Any], *, optimizer: bool = False) -> Callable[..., Any]:
        """``fn`` compiled as the benchmark asks (the optimizer's step never with
        ``fullgraph``: it breaks its graph on purpose)."""
        import torch

        setting = self.request.setting
        kwargs: dict[str, Any] = {
            "backend": self.request.backend,
            "fullgraph": setting.fullgraph and not optimizer,
            "dynamic": setting.dynamic,
        }
        if setting.mode:
            kwargs["mode"] = setting.mode
        if setting.options:
            kwargs["options"] = dict(setting.options)
        return torch.compile(fn, **kwargs)

    # ---- watching the steps ----

    def start(self) -> None:
        """A new sample: forget the steps watched so far and count from here."""
        from torch._dynamo.utils import get_compilation_metrics, guard_failures

        self._before = _Counts.now()
        metrics = get_compilation_metrics()
        self._last_metric = metrics[-1] if metrics else None
        self._starts: list[float] = []
        self._frames: list[int] = []
        self._reasons: list[tuple[str, ...]] = []
        self._guards_seen = {code: len(reasons) for code, reasons in guard_failures.items()}

    def phases(self, phases: Sequence[Phase]) -> list[Phase]:
        """``phases`` with compile errors trimmed, and each step's start, the frames compiled
        by its end and the reasons for any recompile noted."""
        guarded = [(name, _guarded(run)) for name, run in phases]
        first_name, first = guarded[0]

        def begin() -> None:
            self._starts.append(time.perf_counter())
            if self._mark_steps:
                import torch

                torch.compiler.cudagraph_mark_step_begin()
            first()

        guarded[0] = (first_name, begin)
        last_name, last = guarded[-1]  # begin itself in a step of one phase

        def end() -> None:
            last()
            self._step_ended()

        guarded[-1] = (last_name, end)
        return guarded

    def _step_ended(self) -> None:
        from torch._dynamo.utils import counters

        frames = counters["frames"]["total"]
        previous = self._frames[-1] if self._frames else self._before.frames
        reasons: tuple[str, ...] = ()
        if frames != previous and self._frames:
            reasons = self._new_guard_failures()
        self._frames.append(frames)
        self._reasons.append(reasons)

    def _new_guard_failures(self) -> tuple[str, ...]:
        from torch._dynamo.utils import guard_failures

        found = []
        for code, reasons in guard_failures.items():
            seen = self._guards_seen.get(code, 0)
            found += [_guard_failure(reason) for reason in reasons[seen:]]
            self._guards_seen[code] = len(reasons)
        return tuple(found)

    def figures(self, timed: TimedSteps) -> Compilation:
        """What compiling did in this sample, its steps split as ``timed`` says: the first
        ``warmup_steps`` before the timed block, then ``len(step_times_s)`` timed ones."""
        after = _Counts.now()
        before = self._before
        frames = [before.frames, *self._frames]
        compiled = [frames[i + 1] - frames[i] for i in range(len(self._frames))]
        warmup, timed_steps = timed.warmup_steps, len(timed.step_times_s)
        compile_s = None
        if compiled and compiled[0]:
            last = max(i for i in range(min(warmup, len(compiled))) if compiled[i])
            end = self._starts[last + 1] if last + 1 < len(self._starts) else time.perf_counter()
            spent = end - self._starts[0] - (last + 1) * timed.step_time_s
            compile_s = max(spent, 0.0)
        hits, misses = (
            after.cache_hits - before.cache_hits,
            after.cache_misses - before.cache_misses,
        )
        return Compilation(
            compile_s=compile_s,
            cache=None if compile_s is None else _cache_state(hits, misses),
            graphs=after.graphs - before.graphs,
            graph_breaks=graph_breaks(),
            recompiles=sum(compiled[warmup : warmup + timed_steps]),
            warmup_recompiles=sum(compiled[1:warmup]),
            recompile_reasons=tuple(
                dict.fromkeys(r for reasons in self._reasons[1:] for r in reasons)
            ),
            eager_frames=self._given_up(),
            cudagraph_skips=after.cudagraph_skips - before.cudagraph_skips,
        )

    def _given_up(self) -> int:
        """Frames Dynamo stopped compiling in this sample because they hit the recompile limit
        (it runs them eagerly from then on, with no more than a warning in its log)."""
        from torch._dynamo.utils import get_compilation_metrics

        metrics = get_compilation_metrics()
        if self._last_metric is not None:
            at = next((i for i, m in enumerate(metrics) if m is self._last_metric), -1)
            metrics = metrics[at + 1 :]
        return sum(
            1
            for m in metrics
            if _RECOMPILE_LIMIT.search(str(getattr(m, "fail_reason", None) or ""))
        )


#: the name under which Dynamo keeps a module that compiled code refers to, in the globals of the
#: compiled frame (``InstructionTranslator.import_source``)
_IMPORT_ALIAS = "__import_"


def forget_stale_imports() -> None:
    """Drop the module aliases Dynamo left in modules' globals (``torch.compiler.reset()`` keeps
    them) that name a module no longer imported under that name: torch 2.5 asserts they match,
    failing every compile of a model whose module was imported anew (pytester runs do it)."""
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for alias in [n for n in names if isinstance(n, str) and n.startswith(_IMPORT_ALIAS)]:
            value = names[alias]
            # a module's alias only (``builtins.__import__`` begins alike)
            if isinstance(value, ModuleType) and value is not sys.modules.get(
                alias[len(_IMPORT_ALIAS) :].replace("_dot_", ".")
            ):
                del names[alias]


#: how Dynamo's metrics name a frame given up at the recompile limit (``cache_size_limit``
#: before torch 2.6 renamed it)
_RECOMPILE_LIMIT = re.compile(r"recompile.?limit|cache.?size.?limit", re.IGNORECASE)


def _cache_state(hits: int, misses: int) -> str:
    if hits and misses:
        return "partial"
    if hits:
        return "warm"
    return "cold" if misses else "none"


def _first_line(text: str) -> str:
    """A reason's first line, squeezed and cut."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = re.sub(r"\s+", " ", line)
    return line if len(line) <= 200 else line[:199] + "…"


def _guard_failure(text: str) -> str:
    """A recompile's reason as Dynamo's guard failure gives it (``0/1: model.calls == 2  #
    self.calls += 1  # file:15 in forward (HINT: ...)`` and the user's stack), shortened to
    the guard, the line it came from and the first sentence of the hint."""
    first = re.sub(r"^\d+/\d+:\s*", "", text.strip().splitlines()[0] if text.strip() else "")
    guard = first.split(" # ", 1)[0].strip()
    stack = re.findall(r'File "(.+)", line (\d+)', text)
    if stack:
        filename, line = stack[-1]
        guard += f" at {_where(filename, _torch_dir())}:{line}"
    hint = re.search(r"\(HINT: (.+?\.)(?: |\))", first)
    if hint:
        guard += f" ({hint.group(1)})"
    return _first_line(guard)


def _torch_dir() -> str:
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _where(filename: str, torch_dir: str) -> str:
    path = os.path.abspath(filename)
    if path.startswith(torch_dir):
        return "torch" + os.sep + path[len(torch_dir) :]
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def graph_breaks() -> tuple[GraphBreak, ...]:
    """The graph breaks Dynamo recorded since it was reset, each once: the reason's first line
    and the innermost line of code it broke at (inside torch: PyTorch's own break)."""
    from torch._dynamo.utils import graph_break_reasons

    torch_dir = _torch_dir()
    found: dict[GraphBreak, None] = {}
    for compile_reason in graph_break_reasons:
        stack = list(getattr(compile_reason, "user_stack", None) or ())
        frame = stack[-1] if stack else None
        reason = _first_line(str(getattr(compile_reason, "reason", "")))
        if frame is None:
            found[GraphBreak(reason)] = None
            continue
        internal = os.path.abspath(frame.filename).startswith(torch_dir)
        found[
            GraphBreak(
                reason=reason,
                location=f"{_where(frame.filename, torch_dir)}:{frame.lineno}",
                code=(frame.line or "").strip() or None,
                internal=internal,
            )
        ] = None
    return tuple(found)


# ---- failures ----


def _guarded(run: Callable[[], None]) -> Callable[[], None]:
    def call() -> None:
        try:
            run()
            return
        except Exception as exc:
            if not while_compiling(exc):
                raise
            message = describe_failure(exc)
        raise CompileFailed(message)  # outside the except block: no chained traceback

    return call


#: Dynamo's frame compiler: an exception raised through it was raised while compiling
_FRAME_COMPILER = os.path.join("torch", "_dynamo", "convert_frame.py")


def while_compiling(exc: BaseException) -> bool:
    """Whether ``exc`` came out of torch.compile compiling, not out of the compiled code running:
    Dynamo's own exceptions, and those it lets through as they are (an ``AssertionError`` of its
    own with "from user code:" added), whose traceback passes through its frame compiler."""
    from torch._dynamo.exc import TorchDynamoException

    if isinstance(exc, TorchDynamoException):
        return True
    frame = exc.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code.co_filename.endswith(_FRAME_COMPILER):
            return True
        frame = frame.tb_next
    return False


_NOISE = (
    "Set TORCHDYNAMO_VERBOSE=1",
    "For more details about this graph break",
    "You can suppress this exception",
    "import torch._dynamo",
    "torch._dynamo.config.suppress_errors",
    "Developer debug context",
    "For even more developer context",
)


def describe_failure(exc: BaseException) -> str:
    """A compile error as the benchmark's reader needs it: its kind, the compiler's message up
    to a blank line (a C++ compiler's diagnostic kept), where Dynamo gave up, the known fix."""
    from torch._dynamo.exc import TorchDynamoException

    inner = getattr(exc, "inner_exception", None)
    cause = inner if isinstance(inner, BaseException) else exc
    kind = type(exc).__name__ + (f" ({type(inner).__name__})" if cause is not exc else "")
    # Dynamo appends the user's stack to the message; the stack's last line is said below
    text = str(cause).split("\nfrom user code:", 1)[0].strip()
    lines = text.splitlines()
    kept: list[str] = []
    for line in lines:
        if not line.strip():
            break
        if not line.startswith(_NOISE):
            kept.append(line.rstrip())
    if "Output:" in lines:  # a C++ compile error: the compiler's own words follow
        start = lines.index("Output:") + 1
        kept += [line.rstrip() for line in lines[start:] if line.strip()][:MESSAGE_LINES]
    kept = kept[:MESSAGE_LINES]
    message = f"torch.compile failed: {kind}: " + "\n".join(kept or [text[:300] or "(no message)"])
    stack = getattr(exc, "real_stack", None)
    if stack:
        frame = stack[-1]
        code = (frame.line or "").strip()
        message += f"\n  at {_where(frame.filename, _torch_dir())}:{frame.lineno}" + (
            f": {code}" if code else ""
        )
    if not isinstance(exc, TorchDynamoException):
        import torch

        message += (
            f"\n  raised inside torch.compile (torch {torch.__version__}) as it compiled the step; "
            "if the step runs eagerly (compile= left out), the error is torch.compile's: a newer "
            "torch may compile it"
        )
    if type(cause).__name__ == "InvalidCxxCompiler":
        message += (
            "\n  inductor compiles C++ on the CPU: install a C++ compiler (g++ or clang++), or "
            "point $CXX at one"
        )
    return message


# ---- the environment ----


@functools.cache
def compiler_stack(device_type: str) -> CompilerStack:
    """Triton's version where it is installed; on the CPU, the C++ compiler inductor uses."""
    triton = None
    if importlib.util.find_spec("triton") is not None:
        try:
            triton = importlib.metadata.version("triton")
        except importlib.metadata.PackageNotFoundError:
            triton = None
    cxx = version = None
    if device_type == "cpu":
        cxx, version = _cxx()
    return CompilerStack(triton=triton, cxx=cxx, cxx_version=version)


def _cxx() -> tuple[str | None, str | None]:
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        cxx = str(get_cpp_compiler())
    except Exception:  # no working compiler: the compile itself says so
        return None, None
    try:
        answer = subprocess.run(
            [cxx, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return cxx, None
    first = answer.stdout.strip().splitlines()
    return cxx, (first[0].strip() if first else None)
