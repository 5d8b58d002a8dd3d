"""Keep glibc's heap from being handed back to the kernel between training steps.

A step frees its gradients and allocates them again; glibc's self-raising trim threshold decides,
from the process's history, whether that memory is faulted in again each step, which moves the
step time from one process to the next (docs/validation.md). Fixed thresholds make every step
reuse what the previous one freed, as jemalloc does; blocks above 32 MiB stay mapped per step.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

#: mallopt's parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's own ceiling for its dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30

#: the environment variables by which a user sets the thresholds: theirs are left alone
USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")

#: what ``keep()`` did, for the report header; ``None`` until it succeeded
KEPT: str | None = None


def keep() -> None:
    """Fix glibc's mmap and trim thresholds for this process and those it forks, unless the C
    library is not glibc or the user set one. Both together: setting either turns the dynamic
    mmap threshold off, and at its 128 KiB start every activation would be mapped each step."""
    global KEPT
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return
    if any(name in os.environ for name in USER_SETTINGS):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    if (
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    ):
        KEPT = "glibc heap kept between steps (trim threshold 1 GiB, mmap threshold 32 MiB)"
