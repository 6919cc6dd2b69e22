"""The index of `.loops/runs/`: its names in order, so that the latest run and the newest runs
of `ll list` are found without listing a folder of thousands (issue 27: listing 10,000 names
and sorting them cost about 11 ms of every `ll status` and `ll list`).

`.loops/runs.index` is a 128-byte header, then every name under `.loops/runs/` in sorted
order, one a line, the newest (greatest) last; runs begun within the same second (the first
15 characters of their ids) may be in the order they were added, as `newest_first` orders
them by their state files anyway. The header holds what the folder's `stat` said
when the names were those (device, inode, modification time, link count), the number of names,
the number of names beginning with a dot among the lowest, and where the names end. A reader
trusts the index only when the folder's `stat` is the same now; otherwise it lists the folder
as before and writes the index afresh. It reads the names from the end, so the newest few
cost a read of a few KiB however many runs there are.

Two rules keep it true:
- Written from a listing only when the folder was not changed within `RACY_NS` before the
  listing: a change in the same tick of the file system's clock leaves the modification time
  as it was, and would go unseen (as git does for its index's "racy" entries).
- Brought up to date by `ll run` itself (`added`), in place (one name appended, the header
  rewritten; no file created), only when the index was true just before the run's `mkdir`
  and the folder then gained exactly one link: nothing else changed it in between.
  `ll prune` deletes the index when it renames a run aside (`forget`).

The index is a cache: one that is missing, damaged or cannot be written is never an error,
the folder is listed instead. Answers are the same either way (tests/record/test_run_index.py).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

INDEX_NAME = "runs.index"  # in `.loops/`, beside `runs/`
HEADER_BYTES = 128
_MAGIC = b"ll-runs-index 1"
RACY_NS = 2_000_000_000  # a folder changed within this long of its listing is not indexed
_TAIL = 8192  # the first read from the end: about 300 run ids


def _key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_nlink)


class Names:
    """The names under `.loops/runs/`, newest (greatest) first, read lazily (iterate once),
    and how many there are (`total`), of which `hidden` begin with a dot and sort lowest."""

    def __init__(self, total: int, hidden: int, newest: Iterator[str]) -> None:
        self.total = total
        self.hidden = hidden
        self._newest = newest

    def __iter__(self) -> Iterator[str]:
        return self._newest

    @classmethod
    def of(cls, ascending: list[str]) -> Names:
        hidden = 0
        while hidden < len(ascending) and ascending[hidden].startswith("."):
            hidden += 1
        return cls(len(ascending), hidden, reversed(ascending))


def names(runs: Path) -> Names:
    """The names under `runs` (`.loops/runs/`), from the index when it is true, else listed
    (and the index written for the next time). Raises OSError as `os.listdir` does."""
    index = os.path.join(os.path.dirname(runs), INDEX_NAME)
    try:
        before = os.stat(runs)
    except OSError:
        before = None
    if before is not None:
        found = _read(index, _key(before))
        if found is not None:
            return found
    started = time.time_ns()
    listed = sorted(os.listdir(runs))
    if before is not None and started - before.st_mtime_ns > RACY_NS:
        try:
            after = os.stat(runs)
        except OSError:
            after = None
        if after is not None and _key(after) == _key(before):
            _write(index, _key(after), listed)
    return Names.of(listed)


def _header(key: tuple[int, int, int, int], total: int, hidden: int, end: int) -> bytes:
    fields = b" ".join(str(n).encode() for n in (*key, total, hidden, end))
    line = _MAGIC + b" " + fields
    if len(line) >= HEADER_BYTES:
        raise ValueError("the runs' index header is too long")
    return line.ljust(HEADER_BYTES - 1) + b"\n"


def _parse(head: bytes) -> tuple[tuple[int, ...], int, int, int] | None:
    parts = head.split()
    if len(head) != HEADER_BYTES or len(parts) != 9 or b" ".join(parts[:2]) != _MAGIC:
        return None
    try:
        numbers = [int(p) for p in parts[2:]]
    except ValueError:
        return None
    return tuple(numbers[:4]), numbers[4], numbers[5], numbers[6]


def _read(index: str, key: tuple[int, int, int, int]) -> Names | None:
    try:
        fd = os.open(index, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        parsed = _parse(os.pread(fd, HEADER_BYTES, 0))
        if parsed is None or parsed[0] != key:
            return None
        _, total, hidden, end = parsed
        size = min(_TAIL, end - HEADER_BYTES)
        tail = os.pread(fd, size, end - size)
        inode = os.fstat(fd).st_ino
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if len(tail) != size or (tail and not tail.endswith(b"\n")):
        return None
    return Names(total, hidden, _newest(index, inode, end, tail))


def _newest(index: str, inode: int, end: int, tail: bytes) -> Iterator[str]:
    """The names from the end of the index: `tail` first, then the rest when asked for (the
    same file: it is only ever appended to in place, or replaced whole)."""
    start = end - len(tail)  # where `tail` begins in the file
    if start > HEADER_BYTES:  # its first line may be cut: it is read with the rest
        cut = tail.find(b"\n") + 1
        start, tail = start + cut, tail[cut:]
    given: list[str] = []
    try:
        for line in reversed(tail[:-1].split(b"\n") if tail else []):
            if not _name(line):
                raise _Replaced
            given.append(os.fsdecode(line))
            yield given[-1]
        if start > HEADER_BYTES:
            for name in _rest(index, inode, start):
                given.append(name)
                yield name
        return
    except _Replaced:
        pass
    yield from _listed_after(index, given)


def _name(line: bytes) -> bool:
    """Whether an index line can be a name in `runs/` (a damaged or forged index: listed)."""
    return bool(line) and line not in (b".", b"..") and b"/" not in line and b"\0" not in line


def _rest(index: str, inode: int, start: int) -> Iterator[str]:
    """The names before `start` in the index (the same file), newest first; it stops at the
    first line that cannot be a name, or when the file was replaced."""
    rest = b""
    try:
        fd = os.open(index, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            if os.fstat(fd).st_ino == inode:
                rest = os.pread(fd, start - HEADER_BYTES, HEADER_BYTES)
        finally:
            os.close(fd)
    except OSError:
        pass
    if len(rest) != start - HEADER_BYTES or not rest.endswith(b"\n"):
        raise _Replaced
    for line in reversed(rest[:-1].split(b"\n")):
        if not _name(line):
            raise _Replaced
        yield os.fsdecode(line)


class _Replaced(Exception):
    """The index is not what its header said: the folder is listed instead."""


def _listed_after(index: str, given: list[str]) -> Iterator[str]:
    """The folder itself, from the second of the last name given (an index replaced or
    damaged half way)."""
    try:
        listed = sorted(os.listdir(os.path.join(os.path.dirname(index), "runs")), reverse=True)
    except OSError:
        return
    second = given[-1][:15] if given else None
    for n in listed:
        if second is None or n < second or (n[:15] == second and n not in given):
            yield n


def _write(index: str, key: tuple[int, int, int, int], ascending: list[str]) -> None:
    """The index of these names, replacing any (a temporary file renamed over it)."""
    try:
        body = [os.fsencode(n) for n in ascending]
    except UnicodeError:
        return
    if any(b"\n" in n for n in body):
        return  # a name the index cannot hold: the folder is listed every time
    data = b"".join(n + b"\n" for n in body)
    hidden = Names.of(ascending).hidden
    try:
        head = _header(key, len(body), hidden, HEADER_BYTES + len(data))
    except ValueError:
        return
    spare = f"{index}.{os.getpid()}.tmp"
    try:
        fd = os.open(
            spare, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666
        )
        try:
            os.write(fd, head + data)
        finally:
            os.close(fd)
        os.rename(spare, index)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(spare)


def before_add(runs: Path) -> os.stat_result | None:
    """The folder's `stat` before `ll run` makes its run directory in it (None: none yet)."""
    try:
        return os.stat(runs)
    except OSError:
        return None


def added(runs: Path, name: str, before: os.stat_result | None) -> None:
    """`ll run` made `runs/name`: append it to the index when the index was true before the
    `mkdir` (`before`) and the folder gained exactly one link since: no other change."""
    if before is None or name.startswith(".") or "\n" in name:
        return
    index = os.path.join(os.path.dirname(runs), INDEX_NAME)
    try:
        fd = os.open(index, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return  # no index yet: the next lookup lists the folder and writes one
    try:
        parsed = _parse(os.pread(fd, HEADER_BYTES, 0))
        if parsed is None or parsed[0] != _key(before):
            return
        _, total, hidden, end = parsed
        after = os.stat(runs)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            return
        if after.st_nlink != before.st_nlink + 1:
            return  # another change, or a file system whose folders count no links
        encoded = os.fsencode(name)
        last = os.pread(fd, min(256, end - HEADER_BYTES), max(HEADER_BYTES, end - 256))
        if last and encoded[:15] < last[:-1].rpartition(b"\n")[2][:15]:
            return  # an earlier second than the newest (a clock set back): listed next time
        line = encoded + b"\n"
        if os.pwrite(fd, line, end) != len(line):
            return
        os.pwrite(fd, _header(_key(after), total + 1, hidden, end + len(line)), 0)
    except (OSError, ValueError):
        return
    finally:
        os.close(fd)


def forget(runs: Path) -> None:
    """Delete the index (`ll prune` renames and removes runs): the next lookup lists."""
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(os.path.dirname(runs), INDEX_NAME))
