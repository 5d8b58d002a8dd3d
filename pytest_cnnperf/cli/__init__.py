"""The ``cnnperf`` command: results and baselines outside pytest.

``compare`` two runs, ``show`` one file, tabulate ``modes``, project ``epoch`` times, ``plot`` a
results file, list the ``models`` that ``model_factory`` builds, check with ``doctor``
whether this machine is fit to benchmark on, and read the run ``history`` (``dashboard``,
``comment``); ``bisect`` and ``noise`` run pytest themselves. Exit status: 0; 1 when ``compare
--fail-on-regression`` found a regression or ``doctor`` a warning; 2 for a usage error or a file
that cannot be used, with a one-line message naming the file and the problem.
"""

from __future__ import annotations

from .main import main
from .parser import parser

__all__ = ["main", "parser"]
