"""What tests read of other processes in /proc (Linux)."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie waiting for its parent, or a process being reaped, is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except OSError:
        return False
