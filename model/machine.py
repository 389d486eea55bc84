"""Facts of the machine that need no torch: how many CPU cores this process may use.

Below every package (the command line sizes work with it before torch is imported).
"""

from __future__ import annotations

import os


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


__all__ = ["available_cores"]
