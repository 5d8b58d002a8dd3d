"""The keys under which a benchmark session keeps its state in ``config.stash``.

Apart from the modules that hold the state so that the plugin can look for it in every pytest
run, benchmarks or not, without importing them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .revision.against import AgainstRun
    from .revision.counting import CountingRun
    from .sampling.manager import Sampling
    from .sampling.stopping import Stopping
    from .session import Session

#: the session's results, baselines to save and settings (only in a ``--cnnperf`` run)
SESSION: pytest.StashKey[Session] = pytest.StashKey()
#: where the session's samples come from
SAMPLING: pytest.StashKey[Sampling] = pytest.StashKey()
#: how the session stops on SIGINT and SIGTERM
STOPPING: pytest.StashKey[Stopping] = pytest.StashKey()
#: the processes that count instructions (``--cnnperf-metric=instructions``): this checkout's,
#: and the revision's where a run is gated against one
COUNTING: pytest.StashKey[list[CountingRun]] = pytest.StashKey()
#: the revision every benchmark is gated against in this run (``--cnnperf-against``): its
#: worktree, and where samples are taken its process
AGAINST: pytest.StashKey[AgainstRun | None] = pytest.StashKey()
#: the ini values the other processes of a run are started with (``cnnperf_*``, by name)
INI: pytest.StashKey[dict[str, str]] = pytest.StashKey()
