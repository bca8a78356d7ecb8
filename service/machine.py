"""What this machine (or the container it runs in) allows: memory and open files; the defaults of the limits
in service.settings are made from these."""

from __future__ import annotations

import contextlib
import os
import resource
from pathlib import Path

__all__ = ["memory_bytes", "open_files_limit", "raise_open_files_limit"]

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_UNLIMITED = 1 << 62


def memory_bytes() -> int:
    """The machine's memory, or the cgroup's limit where that is lower (a container with ``--memory``)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(total, _cgroup_limit())


def _cgroup_limit() -> int:
    """The memory limit of this process's cgroup (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``), also of
    its ancestors as far as the container shows them; unlimited where none is set or none can be read."""
    limits = [_UNLIMITED]
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hierarchy, controllers, path = line.split(":", 2)
            if hierarchy == "0":
                candidates = [_CGROUP_ROOT / path.lstrip("/") / "memory.max", _CGROUP_ROOT / "memory.max"]
            elif "memory" in controllers.split(","):
                base = _CGROUP_ROOT / "memory"
                candidates = [base / path.lstrip("/") / "memory.limit_in_bytes", base / "memory.limit_in_bytes"]
            else:
                continue
            for candidate in candidates:
                with contextlib.suppress(OSError, ValueError):
                    value = candidate.read_text().strip()
                    if value != "max":
                        limits.append(int(value))
    return min(limits)


def open_files_limit() -> int:
    """The hard limit on open files, which ``raise_open_files_limit`` makes this process's own."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return _UNLIMITED if hard == resource.RLIM_INFINITY else hard


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard one (connections are files); returns the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return _UNLIMITED if soft == resource.RLIM_INFINITY else soft
