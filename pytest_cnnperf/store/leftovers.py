"""What a killed process leaves behind, and how it is recognised: temporary files and folders
carry the id of the process that made them, and are removed once that process is gone.

A kill (SIGKILL, a power cut, an out-of-memory killer) leaves a baseline save's temporary file
beside the baseline, or the sample processes' working folder in the temporary directory; nothing
in the killed process can remove them. The next save of the same file, and the next session,
remove those whose process no longer runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether a process with this id runs (as anyone's)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except PermissionError:  # another user's
        return True
    return True


def owner(name: str, prefix: str) -> int | None:
    """The process id in a name ``<prefix><pid><separator>...`` (separator ``.`` or ``-``),
    or ``None`` when the name has none."""
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix) :].replace("-", ".").split(".", 1)[0]
    return int(digits) if digits.isdigit() and int(digits) > 0 else None


def remove_folders_of_dead(parent: Path, prefix: str) -> None:
    """Remove this user's folders ``<prefix><pid>-...`` in ``parent`` whose process is gone."""
    uid = getattr(os, "getuid", lambda: None)()
    with contextlib.suppress(OSError):
        for path in parent.glob(f"{prefix}*"):
            pid = owner(path.name, prefix)
            if pid is None or alive(pid) or not path.is_dir() or path.is_symlink():
                continue
            if uid is not None and path.stat().st_uid != uid:
                continue
            shutil.rmtree(path, ignore_errors=True)
