"""The ``cnnperf`` command: results and baselines outside pytest (its subcommands: ``parser``).

Exit status: 0; 1 when ``compare --fail-on-regression`` found a regression or ``doctor`` a
warning; 2 for a usage error or a file that cannot be used, with a one-line message naming the
file and the problem (``bisect`` and ``noise`` say their own).
"""

from __future__ import annotations

from .main import main
from .parser import parser

__all__ = ["main", "parser"]
