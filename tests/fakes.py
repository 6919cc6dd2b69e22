"""Test doubles shared by several test modules: a fake `claude` CLI on PATH.

Use the fixture (import it into the test module) or call `install_fake_claude` yourself:

    from fakes import fake_claude  # noqa: F401  (a fixture)

    def test_x(fake_claude: FakeClaude) -> None:
        fake_claude.scenario("error_result")
        ...
        assert fake_claude.calls()[0]["argv"][:2] == ["-p", "..."]

The scenarios and variables are documented at the top of `tests/fake_claude.py`.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FAKE_CLAUDE = Path(__file__).resolve().parent / "fake_claude.py"


@dataclass
class FakeClaude:
    """A directory on PATH holding an executable `claude` that runs tests/fake_claude.py."""

    bin_dir: Path
    executable: Path
    argv_log: Path
    monkeypatch: pytest.MonkeyPatch

    def scenario(self, name: str, **env: str | int | float) -> None:
        """Choose the behaviour; `env` sets further FAKE_CLAUDE_* variables (key: lower-case
        suffix, e.g. text="hello" sets FAKE_CLAUDE_TEXT)."""
        self.monkeypatch.setenv("FAKE_CLAUDE_SCENARIO", name)
        for key, value in env.items():
            self.monkeypatch.setenv(f"FAKE_CLAUDE_{key.upper()}", str(value))

    def sequence(self, *names: str) -> None:
        """One scenario per call, in order; the last repeats."""
        self.monkeypatch.setenv("FAKE_CLAUDE_SCENARIO", ",".join(names))
        state = self.bin_dir / "calls.count"
        state.unlink(missing_ok=True)
        self.monkeypatch.setenv("FAKE_CLAUDE_STATE", str(state))

    def calls(self) -> list[dict[str, Any]]:
        """One record per call: argv (without the program), cwd, is_sandbox, scenario."""
        if not self.argv_log.exists():
            return []
        return [json.loads(line) for line in self.argv_log.read_text().splitlines() if line]


def install_fake_claude(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    """Write `bin_dir/claude` (running the fake with this interpreter) and put it first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "claude"
    exe.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{FAKE_CLAUDE}' \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    argv_log = bin_dir / "argv.jsonl"
    monkeypatch.setenv("FAKE_CLAUDE_ARGV_LOG", str(argv_log))
    monkeypatch.setenv("FAKE_CLAUDE_SCENARIO", "ok")
    for name in list(os.environ):
        if name.startswith("FAKE_CLAUDE_") and name not in (
            "FAKE_CLAUDE_ARGV_LOG",
            "FAKE_CLAUDE_SCENARIO",
        ):
            monkeypatch.delenv(name)
    return FakeClaude(bin_dir, exe, argv_log, monkeypatch)


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    """A fake `claude` first on PATH (scenario `ok`); see tests/fake_claude.py."""
    return install_fake_claude(tmp_path / "fake-bin", monkeypatch)
