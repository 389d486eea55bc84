"""The C allocator keeps freed memory for the next arrays (model.machine.keep_freed_memory), and sizing
counts what it keeps as available."""

import subprocess
import sys
import textwrap

import pytest

from model.budget import sizing
from model.machine import _libc

glibc = pytest.mark.skipif(_libc() is None, reason="glibc's malloc only")

CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from model.machine import held_free_bytes, keep_freed_memory
    from model.budget.sizing import available_memory

    if sys.argv[1] == "keep":
        assert keep_freed_memory()
    before = available_memory().bytes
    a = np.ones(300 * 2**20, dtype=np.uint8)  # 300 MiB, written
    del a
    print(held_free_bytes(), available_memory().bytes - before)
    """
)


def _child(mode: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120, check=True
    )
    held, gained = out.stdout.split()
    return int(held), int(gained)


@glibc
def test_freed_memory_is_kept_and_counted_as_available():
    held, gained = _child("keep")
    assert held >= 300 * 2**20  # the freed array stays in the heap for the next one
    # MemAvailable fell by the 300 MiB the process holds, and sizing adds them back (other processes
    # move MemAvailable by some MB meanwhile)
    assert gained > -150 * 2**20
    plain_held, _ = _child("plain")
    assert plain_held < 300 * 2**20  # by default glibc returns a block that large to the kernel


def test_available_memory_names_what_the_process_holds_free(monkeypatch):
    monkeypatch.setattr(sizing, "held_free_bytes", lambda: 5 * 2**30)
    monkeypatch.setattr(sizing, "_meminfo_available", lambda: 2 * 2**30)
    monkeypatch.setattr(sizing, "_cgroup_room", lambda: None)
    monkeypatch.setattr(sizing, "_rlimit_room", lambda: None)
    have = sizing.available_memory()
    assert have.bytes == 7 * 2**30 and "5.00 GiB this process holds free" in have.source
    monkeypatch.setattr(sizing, "held_free_bytes", lambda: 0)
    assert sizing.available_memory().bytes == 2 * 2**30
