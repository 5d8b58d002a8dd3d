"""pytest-cnnperf: performance regression tests for CNN training in PyTorch.

Importing this package imports neither torch nor the measuring code; the pytest plugin lives in
``pytest_cnnperf.plugin``.
"""

from __future__ import annotations

__version__ = "0.1.0"
