"""The nets under every action: the guard process, and the reaper of escaped descendants.

An action runs in its own process group, which `process` kills when the step ends. Two things
escape that: a runner that dies by SIGKILL (the guard, a small process started once, kills the
groups still running for it) and descendants that leave the group (`setsid`, a daemon's double
fork), which `ll`, once a child subreaper, adopts and kills after each step.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping

from little_loops.record.store import libc_function

KILL_GRACE_S = 0.75  # between SIGTERM and SIGKILL of a process group
KILL_WAIT_S = 2.0  # for SIGKILLed members to be gone (bounded: a process stuck in D state)
MARK_VAR = "LL_ACTION_OWNER"
# Held from an action's start until the guard watches it: a sweep in another thread (a fork's
# branches run actions at once) then never takes a just-started action for an orphan.
SPAWNING = threading.Lock()

_PROC = "/proc"

# The guard: a small process that outlives us by a moment. It blocks reading a pipe only we
# hold (stdin); at end of file, i.e. once this process died, even by SIGKILL, it reads the groups
# still running from a shared file (fd 3) and kills them, so no action outlives the runner
# either. We update that file with pwrite, which wakes nobody: the guard costs a step ~2 µs.
_GUARD_CODE = """
import os, signal, sys, time
while os.read(0, 4096):
    pass
groups = [int(g) for g in os.pread(3, 1 << 16, 0).split()]
mark = ("\\0" + sys.argv[1] + "\\0").encode()
def marked():
    # Descendants that left their group (setsid, set -m) still carry the owner's mark.
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open("/proc/" + name + "/environ", "rb") as fh:
                    if mark in b"\\0" + fh.read():
                        found.append(int(name))
            except OSError:
                pass
    return found
for round in range(5):
    pids = marked()
    if round and not pids:
        break
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in groups if round == 0 else ():
            try:
                os.killpg(pgid, sig)
            except OSError:
                pass
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if (groups or pids) and sig == signal.SIGTERM:
            time.sleep(%r)
        pids = marked() if sig == signal.SIGTERM else pids
"""


class _Guard:
    """Starts the guard process lazily (once per process) and records which groups run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pipe: int | None = None
        self.state: int | None = None
        self.owner = 0
        self.groups: set[int] = set()
        self.written = 0
        self.pid = 0  # the guard's
        self.mark = ""  # NAME=VALUE in the environment of every action of this process

    # `owner` is the pid the guard was started for, 0 until then and again in a forked child
    # (`_forked`): asked at every action, it spares a getpid() system call each time.
    def watch(self, pgid: int) -> None:
        with self.lock:
            if not self.owner:
                self._start()
            self.groups.add(pgid)
            self._save()

    def forget(self, pgid: int) -> None:
        with self.lock:
            if self.owner:
                self.groups.discard(pgid)
                self._save()

    def _forked(self) -> None:
        """In a child forked from this process: its guard is not ours (started afresh)."""
        self.owner = 0
        self.lock = threading.Lock()  # a lock held by another thread at the fork stays held

    def _save(self) -> None:
        if self.state is None:
            return
        data = " ".join(map(str, self.groups)).encode()
        os.pwrite(self.state, data.ljust(self.written), 0)
        self.written = len(data)

    def _start(self) -> None:
        for fd in (self.pipe, self.state):  # inherited from the process we were forked from
            if fd is not None:
                os.close(fd)
        self.pipe = self.state = None
        self.owner, self.groups, self.written = os.getpid(), set(), 0
        self.mark = f"{MARK_VAR}={os.getpid()}-{os.urandom(6).hex()}"
        # Inherited by every action and what it starts, so the guard can find the ones that
        # left their process group once this process is gone.
        os.environ[MARK_VAR] = self.mark.partition("=")[2]
        memfd = getattr(os, "memfd_create", None)
        state = memfd("ll-guard") if memfd else _temp_fd()
        read_end, write_end = os.pipe()
        devnull = os.open(os.devnull, os.O_RDWR)
        actions = [
            (os.POSIX_SPAWN_DUP2, read_end, 0),
            (os.POSIX_SPAWN_DUP2, devnull, 1),
            (os.POSIX_SPAWN_DUP2, devnull, 2),
            (os.POSIX_SPAWN_DUP2, state, 3),
        ]
        argv = [sys.executable, "-I", "-S", "-c", _GUARD_CODE % KILL_GRACE_S, self.mark]
        try:
            self.pid = os.posix_spawn(sys.executable, argv, {}, file_actions=actions, setsid=True)
        except OSError:  # no guard: actions still run, only a SIGKILLed runner leaks them
            os.close(write_end)
            os.close(state)
            return
        finally:
            os.close(read_end)
            os.close(devnull)
        self.pipe, self.state = write_end, state

    def ready(self) -> None:
        """Start the guard before the first action, so that action inherits the mark too."""
        if not self.owner:
            with self.lock:
                if not self.owner:
                    self._start()

    def marked(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` with this process's mark, for an action given an environment of its own."""
        self.ready()
        name, _, value = self.mark.partition("=")
        return {**env, name: value} if name else dict(env)


class _Orphans:
    """Descendants of actions that escaped their process group, once `ll` adopted them.

    As a child subreaper (Linux `prctl(PR_SET_CHILD_SUBREAPER)`), this process becomes the
    parent of every orphaned descendant instead of init; after each action, any child other
    than the guard is such an orphan, and it is killed with all its descendants. Elsewhere, or
    until `adopt` is called, `sweep` does nothing.
    """

    def __init__(self) -> None:
        self.enabled = False
        self._fd: int | None = None  # /proc's list of the main thread's children, kept open
        self._fd_owner = 0  # the pid it was opened in (0: not yet, or again after a fork)

    def _forked(self) -> None:
        """In a child forked from this process: the list open is the parent's."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self._fd_owner = None, 0

    def adopt(self) -> bool:
        """Become a child subreaper; False where the platform cannot."""
        if not sys.platform.startswith("linux"):
            return False
        pr_set_child_subreaper = 36
        try:
            prctl = libc_function("prctl")
            self.enabled = prctl(pr_set_child_subreaper, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            self.enabled = False
        return self.enabled

    def sweep(self, grace: float = KILL_GRACE_S) -> None:
        """Kill every adopted orphan and its descendants: SIGTERM, `grace`, SIGKILL; reap them."""
        if not self.enabled:
            return
        end = time.monotonic() + grace + KILL_WAIT_S
        while time.monotonic() < end:
            orphans = self._orphans()
            if not orphans:
                return
            tree = _descendants(orphans)
            for pid in tree:
                _kill(pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
            until = time.monotonic() + grace
            while grace > 0 and time.monotonic() < until and self._reap(tree):
                time.sleep(0.01)
            for pid in tree:
                _kill(pid, signal.SIGKILL)
            self._reap(tree)
            grace = 0.0  # what appears later is killed at once

    def _orphans(self) -> list[int]:
        with SPAWNING, GUARD.lock:
            running = set(GUARD.groups)  # actions of other threads, still running
            found = self._children()
        return [pid for pid in found if pid != GUARD.pid and pid not in running]

    def _children(self) -> list[int]:
        """This process's children that may be orphans, from /proc.

        Linux gives an adopted orphan (and the children of a thread that ended) to the first
        live thread of the process, its main thread: the main thread's list of children,
        kept open and read again from its start (one `pread` a sweep, no `getpid`), holds
        every orphan. The children of the other live threads are theirs to wait for.
        """
        if self._fd_owner == 0:
            self._fd_owner = os.getpid()
            try:
                path = f"{_PROC}/{self._fd_owner}/task/{self._fd_owner}/children"
                self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._fd = None
        if self._fd is None:
            return self._every_threads_children()
        data = b""
        try:
            while True:
                chunk = os.pread(self._fd, 1 << 16, len(data))
                data += chunk
                if len(chunk) < 1 << 16:
                    break
        except OSError:
            return self._every_threads_children()
        return [int(pid) for pid in data.split()]

    def _every_threads_children(self) -> list[int]:
        # /proc/self is this process (its every thread sees the same): no getpid() a step.
        found: list[int] = []
        try:
            tasks = os.listdir("/proc/self/task")
        except OSError:
            return []
        for task in tasks:
            try:
                with open(f"/proc/self/task/{task}/children", "rb") as fh:
                    found += [int(pid) for pid in fh.read().split()]
            except OSError:
                continue
        return found

    def _reap(self, pids: list[int]) -> bool:
        """Collect the exit of those that are our children; True while any is still alive."""
        alive = False
        for pid in pids:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours (a grandchild): ask /proc
                done = 0 if _running(pid) else pid
            if done == 0:
                alive = True
        return alive


def _descendants(roots: list[int]) -> list[int]:
    """`roots` and every process below them, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir(_PROC) if os.path.isdir(_PROC) else ():
        if not name.isdigit():
            continue
        try:
            with open(f"{_PROC}/{name}/stat", "rb") as fh:
                fields = fh.read().rpartition(b")")[2].split()
            children.setdefault(int(fields[1]), []).append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    out: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.append(pid)
            todo += children.get(pid, [])
    return out


def _running(pid: int) -> bool:
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


ORPHANS = _Orphans()


def adopt_orphans() -> bool:
    """Make this process the reaper of its actions' orphans, so none outlives its step."""
    return ORPHANS.adopt()


def kill_orphans() -> None:
    """Kill what was adopted since the last action ended (e.g. left behind by a judge's CLI)."""
    ORPHANS.sweep()


def _temp_fd() -> int:
    import tempfile

    fd, name = tempfile.mkstemp(prefix="ll-guard-")
    os.unlink(name)
    return fd


GUARD = _Guard()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=GUARD._forked)
    os.register_at_fork(after_in_child=ORPHANS._forked)


def group_alive(pgid: int) -> bool:
    """Whether any member of the group still runs. Zombies do not count: an init that does
    not reap orphans would otherwise make every group look alive forever."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir(_PROC):
        return True
    for name in os.listdir(_PROC):
        if not name.isdigit():
            continue
        try:
            with open(f"{_PROC}/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rpartition(b")")[2].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False
