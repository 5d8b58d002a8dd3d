"""What a sample process does: run one test of the pytest session it was forked from, quietly.

The process is a fork of the zygote, itself a fork of the pytest process taken at session start.
It collects the test's module, runs the test's setup and body (the ``cnnperf`` fixture measures
the wanted benchmark there and ends the process), and reports through its report file only:
nothing may reach the terminal, the pytest process's capture files or, under pytest-xdist, the
controller.
"""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol  # the protocol without reporting, as xdist uses it

from .sampling import ChildReport, Job, write_report
from .state import STATE

#: plugins that report to someone outside the process
_REPORTERS = ("terminalreporter",)
_REPORTER_MODULES = ("xdist.remote",)  # an xdist worker's link to its controller


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


def run_job(session: pytest.Session, job: Job) -> None:
    """Run ``job``'s test; returning means the test never reached the wanted benchmark."""
    config = session.config
    config.stash[STATE].job = job
    _go_quiet(config)
    config.option.pyargs = False  # the job names a file
    collection_errors: list[str] = []

    class CollectionErrors:
        def pytest_collectreport(self, report: pytest.CollectReport) -> None:
            if report.failed:
                collection_errors.append(f"collection: {report.longreprtext}")

    config.pluginmanager.register(CollectionErrors(), "cnnperf-collection-errors")
    items = session.perform_collect([job.path])
    # node ids of files outside the rootdir depend on how they were collected: match the file
    # and the test's name within it
    name = job.nodeid.split("::", 1)[-1]
    item = next(
        (i for i in items if str(i.path) == job.path and i.nodeid.split("::", 1)[-1] == name),
        None,
    )
    failures = list(collection_errors)
    if item is None:
        error = f"the sample process could not find the test {job.nodeid} in {job.path}"
    else:
        reports = runtestprotocol(item, log=False, nextitem=None)
        failures += [f"{r.when}: {r.longreprtext}" for r in reports if r.failed]
        error = f"the test ended before it reached benchmark #{job.index + 1} ({job.key})"
    if failures:
        error += ":\n" + "\n".join(failures)
    write_report(job, ChildReport(error=error))
