"""Keep glibc's heap from being handed back to the kernel between training steps.

A train step with ``zero_grad(set_to_none=True)`` frees its gradients and allocates them again in
backward; glibc's self-raising trim threshold decides, from everything the process allocated before,
whether that memory is handed back to the kernel and faulted in again each step, which moves the
step time by several percent from one process to the next (figures in the manual's validation page).
Fixed thresholds end the lottery: every step reuses the memory the previous one freed, as it does
under jemalloc or tcmalloc or with ``MALLOC_TRIM_THRESHOLD_`` set. Blocks above 32 MiB are still
mapped and unmapped every step, as glibc always does for them (its dynamic threshold stops there).
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


def keep() -> str | None:
    """Fix glibc's mmap and trim thresholds for this process and the processes it forks.

    Returns a description of what was done, or ``None`` where the C library is not glibc or
    the user set a threshold (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``).
    Both thresholds must be set together: setting either turns glibc's dynamic mmap threshold
    off, and left at its 128 KiB start every activation would be mapped afresh each step."""
    global KEPT
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return None
    if any(name in os.environ for name in USER_SETTINGS):
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1:
        return None
    if mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
        return None
    KEPT = "glibc heap kept between steps (trim threshold 1 GiB, mmap threshold 32 MiB)"
    return KEPT
