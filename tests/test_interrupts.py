"""Signals to a real pytest process while a sample runs: SIGINT (Ctrl-C) once or twice,
SIGTERM or SIGKILL to the pytest process alone ends every process the plugin started within
seconds, with no traceback, and the next session removes the folder a kill left behind.

These run pytest in a subprocess, because that is the point: real signals to a real process
tree (the pytest process, its zygote, a sample process in a forward that never returns).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads processes from /proc"
)

INI = """
[pytest]
cnnperf_samples = 2
cnnperf_min_time = 0.02
cnnperf_attribution = off
cnnperf_calibration = false
cnnperf_sample_timeout = 600
"""

HANGS = """
import os
import time

from torch import nn


class Hangs(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(3, 2)

    def forward(self, x):  # runs in sample processes only: says so, and hangs
        open(os.path.join(os.environ["MARKERS"], f"sample-{os.getpid()}"), "w").close()
        time.sleep(3600)


def test_hangs(cnnperf):
    cnnperf.train_step(Hangs(), batch_size=2, image_size=8, num_classes=2)
"""


def running(pid: int) -> bool:
    """Whether the process runs (a zombie, killed and not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


class Run:
    """``pytest --cnnperf`` in a subprocess of its own, hanging in a sample process."""

    def __init__(self, pytester: pytest.Pytester, *args: str) -> None:
        self.markers = pytester.path / "markers"
        self.markers.mkdir(exist_ok=True)
        self.tmp = pytester.path / "tmp"
        self.tmp.mkdir(exist_ok=True)
        self.output = pytester.path / "output.txt"
        env = {**os.environ, "MARKERS": str(self.markers), "TMPDIR": str(self.tmp)}
        command = [sys.executable, "-m", "pytest", "--cnnperf", "-p", "no:randomly", *args]
        with self.output.open("w") as output:
            self.process = subprocess.Popen(
                command, cwd=pytester.path, env=env, stdout=output, stderr=subprocess.STDOUT
            )

    def sample(self) -> int:
        """The id of the sample process once it hangs in its forward."""
        found = wait_for(lambda: any(self.markers.iterdir()), timeout=240)
        assert found, self.output.read_text()
        return int(next(self.markers.iterdir()).name.removeprefix("sample-"))

    def text(self) -> str:
        return self.output.read_text()


@pytest.fixture
def hangs(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI)
    pytester.makepyfile(test_hangs=HANGS)
    return pytester


@pytest.mark.parametrize(
    ("signals", "says"),
    [
        pytest.param([signal.SIGINT], "*KeyboardInterrupt*", id="SIGINT"),
        # the same tree ended another way: minutes of the default run's time for little more
        pytest.param(
            [signal.SIGINT, signal.SIGINT], "*", id="SIGINT twice", marks=pytest.mark.slow
        ),
        pytest.param(
            [signal.SIGTERM],
            "*Terminated: the pytest process got SIGTERM*",
            id="SIGTERM",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_an_interrupt_ends_every_process_within_seconds(
    hangs: pytest.Pytester, signals: list[signal.Signals], says: str
) -> None:
    run = Run(hangs)
    sample = run.sample()
    zygote = parent_of(sample)
    assert zygote != run.process.pid
    sent = time.monotonic()
    for signum in signals:
        os.kill(run.process.pid, signum)
        time.sleep(0.2)
    try:
        status = run.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        run.process.kill()
        pytest.fail(f"pytest still ran 30 s after {signals}:\n{run.text()}")
    assert time.monotonic() - sent < 15
    assert wait_for(lambda: not running(sample) and not running(zygote), timeout=5)
    assert status == pytest.ExitCode.INTERRUPTED, run.text()
    text = run.text()
    assert "Traceback" not in text
    assert "During handling" not in text
    assert any(fnmatch(line, says) for line in text.splitlines()), text
    assert not list(run.tmp.glob("pytest-cnnperf-[0-9]*")), "the sample folder is left"


def test_a_killed_pytest_process_takes_its_processes_along(hangs: pytest.Pytester) -> None:
    """SIGKILL runs no cleanup: the kernel ends the zygote with the pytest process and the
    sample with the zygote; the next session removes the folder they left."""
    run = Run(hangs)
    sample = run.sample()
    zygote = parent_of(sample)
    os.kill(run.process.pid, signal.SIGKILL)
    run.process.wait(timeout=30)
    assert wait_for(lambda: not running(sample) and not running(zygote), timeout=10)
    left = list(run.tmp.glob("pytest-cnnperf-[0-9]*"))
    assert [p.name.split("-")[2] for p in left] == [str(run.process.pid)]
    hangs.makepyfile(test_hangs="def test_nothing():\n    pass\n")
    after = subprocess.run(
        [sys.executable, "-m", "pytest", "--cnnperf", "-q"],
        cwd=hangs.path,
        env={**os.environ, "TMPDIR": str(run.tmp)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert after.returncode == 0, after.stdout + after.stderr
    assert not list(run.tmp.glob("pytest-cnnperf-[0-9]*"))
