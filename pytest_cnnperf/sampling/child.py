"""A sample process (``sampling.manager`` says how it is forked): run one test quietly, measure
the one benchmark call it was asked for (:class:`ChildSampler`), report and exit. It reports
through its report file only: nothing may reach the terminal, the pytest process's capture files
or, under pytest-xdist, the controller.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
from _pytest.runner import runtestprotocol  # the protocol without reporting, as xdist uses it

from ..model import Result
from .messages import (
    ANY_KEY,
    ChildReport,
    Job,
    Site,
    TakenSample,
    describe_error,
    write_report,
)

if TYPE_CHECKING:
    from .manager import Sampling, Target

#: plugins that report to someone outside the process
_REPORTERS = ("terminalreporter",)
_REPORTER_MODULES = ("xdist.remote",)  # an xdist worker's link to its controller


class ChildSampler:
    """The sampler of a sample process: measures one sample of the job's benchmark call and
    ends the process."""

    in_process = False

    def __init__(self, job: Job, device: Any, check: Callable[[], str | None]) -> None:
        self.job = job
        self.device = device
        self.check = check

    def replayed(self, site: Site) -> Result | None:
        if site.index < self.job.site.index:
            return self.job.replay[site.index]
        return None

    def take(self, target: Target, count: int) -> NoReturn:
        job = self.job
        leak = self.check()
        if leak is not None:
            report = ChildReport(error=leak, problem="leak")
        elif job.site.key not in (ANY_KEY, target.site.key):
            report = ChildReport(
                error=f"the test asked for {target.site.key!r} where the pytest process measured "
                f"{job.site.key!r}; a benchmark test must make the same calls in every run",
                problem="absent",
            )
        else:
            try:
                report = self._measure(target)
            except Exception as exc:
                report = ChildReport(error=describe_error(exc), failed_at=time.time())
        write_report(job, report)
        os._exit(0 if report.error is None else 1)

    def _measure(self, target: Target) -> ChildReport:
        from ..measuring.sample import take_sample

        job = self.job
        if job.world_size > 1:
            from .ranks import run_rank

            return run_rank(job, target, self.device)
        sample, environment = take_sample(
            target.build(self.device, 1),
            self.device,
            job.plan or target.plan,
            memory_pass=job.memory,
            in_process=False,
            ignore_pids=frozenset({job.parent_pid}),
            count_pass=job.counted,
            profile_pass=job.profile,
            trace=target.trace,
        )
        return ChildReport(taken=TakenSample(sample, environment), key=target.site.key)


def _go_quiet(config: pytest.Config) -> None:
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        # The inherited global capture writes to files shared with the pytest process; reading
        # or stopping it would take that process's captured output. Start a private one.
        capture._global_capturing = None
        capture.start_global_capturing()
        capture.suspend_global_capture()
    for plugin in list(config.pluginmanager.get_plugins()):
        name = config.pluginmanager.get_name(plugin)
        if name in _REPORTERS or type(plugin).__module__ in _REPORTER_MODULES:
            config.pluginmanager.unregister(plugin)


def current_device(device: Any, job: Job) -> Any | None:
    """The CUDA device a sample process makes current before the test runs, so that the test's
    CUDA calls without a device, the streams events are recorded on and the contexts it makes
    belong to the measured GPU (a rank's own), not to GPU 0; ``None`` on the CPU."""
    if device.type != "cuda":
        return None
    from .ranks import rank_device

    return rank_device(device, job.rank) if job.world_size > 1 else device


def run_job(
    session: pytest.Session,
    sampling: Sampling,
    job: Job,
    check: Callable[[], str | None] = lambda: None,
) -> None:
    """Run ``job``'s test; returning means the test never reached the wanted benchmark.
    ``check``: why the sample cannot stand (the project's code imported from elsewhere by a
    revision's process), or ``None``, asked before it reports."""
    import torch

    config = session.config
    device = torch.device(sampling.device)
    current = current_device(device, job)
    if current is not None:
        torch.cuda.set_device(current)
    sampling.use(ChildSampler(job, device, check))
    _go_quiet(config)
    config.option.pyargs = False  # the job names a file
    collection_errors: list[str] = []

    class CollectionErrors:
        def pytest_collectreport(self, report: pytest.CollectReport) -> None:
            if report.failed:
                collection_errors.append(f"collection: {report.longreprtext}")

    config.pluginmanager.register(CollectionErrors(), "cnnperf-collection-errors")
    site = job.site
    items = session.perform_collect([site.path])
    # node ids of files outside the rootdir depend on how they were collected: match the file
    # and the test's name within it
    name = site.nodeid.split("::", 1)[-1]
    item = next(
        (i for i in items if str(i.path) == site.path and i.nodeid.split("::", 1)[-1] == name),
        None,
    )
    failures = list(collection_errors)
    if item is None:
        error = f"the sample process could not find the test {site.nodeid} in {site.path}"
    else:
        reports = runtestprotocol(item, log=False, nextitem=None)
        failures += [f"{r.when}: {r.longreprtext}" for r in reports if r.failed]
        error = f"the test ended before it reached benchmark #{site.index + 1} ({site.key})"
    if failures:
        error += ":\n" + "\n".join(failures)
    leak = check()
    if leak is not None:
        write_report(job, ChildReport(error=leak, problem="leak"))
    else:
        write_report(job, ChildReport(error=error, problem=None if failures else "absent"))
