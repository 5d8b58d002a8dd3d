"""``python -m pytest_cnnperf.cli``: the ``cnnperf`` command."""

from __future__ import annotations

import sys

from .main import main

if __name__ == "__main__":
    sys.exit(main())
