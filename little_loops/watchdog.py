"""A guard that ends the running action's process group if `ll` itself dies (even by kill -9).

Actions run in their own process group, so nothing the kernel does on our death reaches
them. One small `sh` per run, in a session of its own, reads process-group ids from a pipe:
we write the group of each action as it starts and `0` when it ends. When `ll` dies the pipe
closes, the guard reads end-of-file and kills the last group it was told about. Its cost is
one process per run and two short pipe writes per action, not per-action forks.
"""

from __future__ import annotations

import os
import subprocess

_SCRIPT = 'p=0; while read -r x; do p="$x"; done; [ "$p" -gt 0 ] && kill -KILL -- "-$p"; exit 0'


class Watchdog:
    """Kills the registered process group when this process exits without clearing it."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd: int | None = None

    def start(self) -> None:
        read_end, write_end = os.pipe()
        try:
            self._proc = subprocess.Popen(
                ["/bin/sh", "-c", _SCRIPT],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError:
            os.close(write_end)
            return  # no guard: a run without it still works, it just can't clean up after kill -9
        finally:
            os.close(read_end)
        os.set_inheritable(write_end, False)
        self._fd = write_end

    def guard(self, pgid: int) -> None:
        """The action in process group `pgid` has started."""
        self._send(pgid)

    def clear(self) -> None:
        """The action has ended; nothing to kill."""
        self._send(0)

    def _send(self, value: int) -> None:
        if self._fd is not None:
            try:
                os.write(self._fd, f"{value}\n".encode())
            except OSError:
                self._fd = None

    def stop(self) -> None:
        """Normal end of the run: the guard exits without killing anything."""
        if self._fd is not None:
            self._send(0)
            os.close(self._fd)
            self._fd = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
