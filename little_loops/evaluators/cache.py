"""Judge determinism on disk: the verdict cache and the record/replay cassette.

The cache is one small JSON file per key under the cache directory, written atomically;
only verdicts that are not errors are stored. The cassette is a JSONL file with one judge
exchange per line; replay hands back the recorded answers for a key in recorded order (the
last one again once they run out), so a recorded run replays exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from little_loops.model.details import Details, DetailsError

CACHE_VERSION = 1


def thaw(value: Any) -> Any:
    """Plain JSON data from the loader's frozen records: mappings become dicts, tuples lists.

    The judge calls this once on its configuration (the schema) before anything serialises
    it: cache keys, request bodies, the system prompt, the claude CLI's argv.
    """
    if isinstance(value, Mapping):
        return {str(k): thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def key_of(parts: Mapping[str, Any]) -> str:
    """A stable sha256 of everything that can change a judge's answer."""
    blob = json.dumps(thaw(parts), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class VerdictCache:
    """`<dir>/<key[:2]>/<key>.json` holding `{"version", "verdict", "details"}`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> tuple[str, Details] | None:
        """The cached verdict of `key`; None when there is none, or the file is torn or not
        one this version wrote (a miss: the judge is asked again)."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return None
        verdict, details = data.get("verdict"), data.get("details")
        if not isinstance(verdict, str):
            return None
        try:
            return verdict, Details.parse(details)
        except DetailsError:
            return None

    def put(self, key: str, verdict: str, details: Details) -> None:
        """Store atomically; a cache that cannot be written is skipped, never fatal."""
        path = self._path(key)
        data = {
            "version": CACHE_VERSION,
            "key": key,
            "verdict": verdict,
            "details": details.to_json(),
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(data, f, ensure_ascii=False)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            pass


class Cassette:
    """A JSONL record of judge exchanges, appended to while recording, read for replay."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._index: dict[str, deque[dict[str, Any]]] | None = None
        self._last: dict[str, dict[str, Any]] = {}

    def append(self, entry: Mapping[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line)

    def _load(self) -> dict[str, deque[dict[str, Any]]]:
        index: dict[str, deque[dict[str, Any]]] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            lines = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                index.setdefault(entry["key"], deque()).append(entry)
        return index

    def exists(self) -> bool:
        return self.path.is_file()

    def take(self, key: str) -> dict[str, Any] | None:
        """The next recorded exchange for `key`, the last one again when used up, or None."""
        with self._lock:
            if self._index is None:
                self._index = self._load()
            queue = self._index.get(key)
            if queue:
                self._last[key] = queue.popleft()
            return self._last.get(key)
