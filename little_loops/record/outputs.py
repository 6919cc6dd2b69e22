"""A run's step outputs: one append-only file, `outputs.dat`, that state.json points into.

A finished step's output record (what `${prev.*}` and `${captured.NAME.*}` read) is written
once, when the step ends: its small fields as a JSON line, then its texts raw; an output the
run's `steps.log` holds whole is not copied: the line says where it lies there. state.json
keeps only where the record is (`{"ref": [offset, size]}`), so writing the state costs the
same whatever earlier steps captured. A record no state points to (a step cut off before its
state was written, or torn by a crash) is never read. Runs recorded before this file existed
keep their records inline in state.json; `is_ref` tells the two apart.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from little_loops.errors import RunError
from little_loops.record.events import ENCODE, json_string, json_value
from little_loops.record.store import LOG_NAME, RunLog

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

NAME = "outputs.dat"
_RAW = ("output", "stderr")  # the texts kept raw after a record's JSON line
_SIZES = "raw_sizes"
_IN_LOG = "output_at"  # [offset, size] of the output in the run's steps.log


def ref(offset: int, size: int) -> dict[str, list[int]]:
    """What state.json holds in place of a record."""
    return {"ref": [offset, size]}


def _counts(value: object, length: int) -> bool:
    """Whether `value` is a list of `length` whole numbers, none negative (an offset and a
    size, a record's text sizes) as a file read back must hold them."""
    return (
        isinstance(value, list)
        and len(value) == length
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value)
    )


def is_ref(value: object) -> bool:
    """A reference into outputs.dat, as opposed to a record written inline by an older ll."""
    return isinstance(value, dict) and set(value) == {"ref"} and _counts(value["ref"], 2)


def _meta(
    record: dict[str, Any], in_log: tuple[int, int] | None, sizes: list[int]
) -> dict[str, Any]:
    """A record's JSON line as fields: the small ones, where its output lies, the sizes of
    its raw texts."""
    meta = {k: v for k, v in record.items() if k not in _RAW}
    if in_log is not None:
        meta[_IN_LOG] = list(in_log)
    meta[_SIZES] = sizes
    return meta


# The fields of a step's record (`run/steps.remember`), in their order.
_STEP_FIELDS = (
    "output", "stderr", "exit_code", "duration_ms", "state", "verdict", "confidence", "reason"
)  # fmt: skip


def _step_line(
    record: dict[str, Any], in_log: tuple[int, int] | None, sizes: list[int]
) -> str | None:
    """`ENCODE(_meta(record, in_log, sizes))` for a step's record holding what a step gives
    its fields, written at once (every step writes one); None for any other record, which
    the encoder writes. tests/record/test_outputs.py compares the two."""
    if tuple(record) != _STEP_FIELDS:
        return None
    state, verdict, ms = record["state"], record["verdict"], record["duration_ms"]
    if not (state.__class__ is verdict.__class__ is str and ms.__class__ is int):
        return None
    at = ""
    if in_log is not None:
        offset, size = in_log
        if not offset.__class__ is size.__class__ is int:
            return None
        at = f',"output_at":[{offset},{size}]'
    return (
        f'{{"exit_code":{json_value(record["exit_code"])},"duration_ms":{ms},'
        f'"state":{json_string(state)},"verdict":{json_string(verdict)},'
        f'"confidence":{json_value(record["confidence"])},'
        f'"reason":{json_value(record["reason"])}{at},"raw_sizes":[{sizes[0]},{sizes[1]}]}}'
    )


class Outputs:
    """The append-only store of one run directory; one writer, the run that owns it."""

    def __init__(self, root: Path) -> None:
        self.path = root / NAME
        self._fd: int | None = None
        self._end = 0
        self._unsynced = False

    def append(
        self, record: dict[str, Any], in_log: tuple[int, int] | None = None
    ) -> dict[str, list[int]]:
        """Write `record`; its reference, for state.json.

        The record's small fields are one JSON line; its texts (`output`, `stderr`) follow it
        as raw UTF-8, their sizes in that line: encoding a megabyte as JSON would cost more
        than the rest of the step. `in_log` (offset, size): the output is those bytes of the
        run's log, `steps.log`, where the action wrote it; the line says so (`output_at`) and
        the bytes are not written a second time.
        """
        if in_log is not None:
            texts = [b"", str(record.get("stderr") or "").encode("utf-8", "surrogatepass")]
        else:
            texts = [str(record.get(k) or "").encode("utf-8", "surrogatepass") for k in _RAW]
        sizes = [len(t) for t in texts]
        try:
            text = _step_line(record, in_log, sizes)
            if text is None:
                text = ENCODE(_meta(record, in_log, sizes))
            line = (text + "\n").encode("utf-8")
        except UnicodeEncodeError:  # bytes that are not UTF-8 (a file name): JSON escapes
            meta = _meta(record, in_log, sizes)
            line = (json.dumps(meta, separators=(",", ":")) + "\n").encode("ascii")
        parts = [line, *texts, b"\n"]
        size = sum(map(len, parts))
        if self._fd is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            self._fd = os.open(self.path, flags, 0o644)
            self._end = os.fstat(self._fd).st_size
        offset = self._end
        try:
            written = os.writev(self._fd, parts)  # one call, no copy of the texts
            if written < size:  # a signal or a full disk cut it short: write the rest
                rest = memoryview(b"".join(parts))[written:]
                while rest:
                    rest = rest[os.write(self._fd, rest) :]
        except OSError as exc:
            try:  # a full disk took part of it: given back, so the run can record its stop
                os.ftruncate(self._fd, offset)
                self._end = offset
            except OSError:
                self._end = os.fstat(self._fd).st_size  # the torn record is skipped, never read
            raise OSError(exc.errno, exc.strerror, os.fspath(self.path)) from None
        self._end += size
        self._unsynced = True
        return ref(offset, size)

    def sync(self) -> None:
        """fsync what was appended, before a state.json that points to it is written."""
        if self._fd is not None and self._unsynced:
            os.fsync(self._fd)
            self._unsynced = False

    def read(self, where: dict[str, Any]) -> dict[str, Any]:
        """The record a reference points to; a missing or damaged one is a clear error."""
        offset, size = where["ref"]
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                raw = os.pread(fd, size, offset)
            finally:
                os.close(fd)
        except OSError as exc:
            raise RunError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        record = _decode(raw) if len(raw) == size else None
        if record is None:
            raise RunError(
                f"{self.path}: no step output at offset {offset} (the file was truncated or "
                "edited); the run cannot be resumed"
            )
        if _IN_LOG in record:
            found = self._from_log(record)
            if found is None:
                raise RunError(
                    f"{self.path.parent / LOG_NAME}: the output that the step record at "
                    f"offset {offset} of {NAME} points to is missing (the log was truncated "
                    "or edited); the run cannot be resumed"
                )
            record = found
        return record

    def following(self, offset: int) -> dict[str, list[int]] | None:
        """The reference of the whole record that starts at `offset` (where another ends);
        None when there is none, or it is torn. Resume reads with it the record of a step
        that no state.json points to yet (a run cut off after its end)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            end = os.fstat(fd).st_size
            head = b""
            while b"\n" not in head and offset + len(head) < end:
                head += os.pread(fd, 1 << 16, offset + len(head))
        finally:
            os.close(fd)
        line, newline, _ = head.partition(b"\n")
        try:
            meta = json.loads(line) if newline else None
        except (ValueError, RecursionError):
            return None
        sizes: Any = meta.get(_SIZES) if isinstance(meta, dict) else None
        if not _counts(sizes, len(_RAW)):
            return None
        size = len(line) + 1 + sum(sizes) + 1
        return ref(offset, size) if offset + size <= end else None

    def _from_log(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """`record` with its output read from where it points in the run's log."""
        where = record.pop(_IN_LOG)
        if not _counts(where, 2):
            return None
        start, size = where
        data = RunLog.read(self.path.parent, start, start + size)
        if len(data) != size:
            return None
        try:
            record["output"] = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return record

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def records_end(state: dict[str, Any]) -> int:
    """Where the records a state.json points to end in outputs.dat: the next record written
    after that state starts there (0: it points to none)."""
    values = [state.get("prev"), *(state.get("captured") or {}).values()]
    return max((sum(value["ref"]) for value in values if is_ref(value)), default=0)


def resolve(root: Path, state: dict[str, Any]) -> dict[str, Any]:
    """`captured` and `prev` of a state.json read from `root`, with the records themselves in
    place of references (as written: secrets stay sealed)."""
    store = Outputs(root)

    def record(value: Any) -> Any:
        return store.read(value) if is_ref(value) else value

    captured = state.get("captured") or {}
    return {
        "captured": {name: record(value) for name, value in captured.items()},
        "prev": record(state.get("prev") or {}),
    }


def _decode(raw: bytes) -> dict[str, Any] | None:
    head, newline, rest = raw.partition(b"\n")
    try:
        meta = json.loads(head) if newline else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(meta, dict):
        return None
    sizes = meta.pop(_SIZES, None)
    if not isinstance(sizes, list) or len(sizes) != len(_RAW) or sum(sizes) + 1 != len(rest):
        return None
    at = 0
    for key, n in zip(_RAW, sizes, strict=True):
        if not isinstance(n, int) or n < 0:
            return None
        meta[key] = rest[at : at + n].decode("utf-8", "surrogatepass")
        at += n
    return meta
