"""Run directories under `.loops/runs/<run-id>/`: atomic state.json, the event log, step logs."""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from .errors import RunError

STATE_VERSION = 1
RUNS = Path(".loops") / "runs"


def new_run_id(loop_name: str, now: float | None = None) -> str:
    """A sortable, unique id: `20261122-041430-fix-lint-3fa2`."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", loop_name)[:40] or "loop"
    return f"{stamp}-{slug}-{secrets.token_hex(2)}"


def atomic_write_text(path: Path, text: str, *, fsync: bool = False) -> None:
    """Write to a temp file beside `path`, then rename over it: readers see old or new, never half.

    Without fsync a power cut may lose the newest write (the rename survives a killed process
    either way); `fsync=True` trades a few milliseconds per step for surviving that too.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)


class RunDir:
    """One run's directory and the files in it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def create(cls, base: Path, run_id: str) -> RunDir:
        root = base / RUNS / run_id
        (root / "steps").mkdir(parents=True, exist_ok=False)
        return cls(root)

    @classmethod
    def open(cls, base: Path, run_id: str) -> RunDir:
        root = base / RUNS / run_id
        if not (root / "state.json").is_file():
            raise RunError(f"no run '{run_id}' under {base / RUNS}; see 'll list' for run ids")
        return cls(root)

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    @property
    def events_path(self) -> Path:
        return self.root / "events.jsonl"

    def step_log(self, step: int, state: str, attempt: int = 1) -> Path:
        suffix = f"-attempt{attempt}" if attempt > 1 else ""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", state)
        return self.root / "steps" / f"{step:04d}-{safe}{suffix}.log"

    def write_state(self, data: dict[str, Any], *, fsync: bool = False) -> None:
        data = {"version": STATE_VERSION, **data}
        atomic_write_text(
            self.state_path, json.dumps(data, ensure_ascii=False, indent=1) + "\n", fsync=fsync
        )

    def read_state(self) -> dict[str, Any]:
        """The run's state; a corrupt, truncated or future-version file is a clear error."""
        path = self.state_path
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunError(f"{path}: missing; the run directory is incomplete") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunError(
                f"{path}: corrupted or truncated state file ({exc}); the run cannot be resumed"
            ) from None
        if not isinstance(data, dict):
            raise RunError(f"{path}: corrupted state file (not a JSON object)")
        version = data.get("version")
        if version != STATE_VERSION:
            raise RunError(
                f"{path}: state format version {version!r}, this ll reads version "
                f"{STATE_VERSION}; use the ll version that started the run"
            )
        return data
