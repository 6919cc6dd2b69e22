"""Shared fixtures: every test runs away from the real home, real API keys and the network."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import settings
from project import Project

REPO = Path(__file__).resolve().parent.parent

# A process started in the background by a shell without job control (`pytest ... &` in a
# script, `nohup`) starts with SIGINT ignored, and an ignored signal stays ignored across exec:
# every `ll` a test starts would then shrug off the Ctrl-C the test sends it. A user's `ll` in a
# terminal never starts that way, so the suite puts Python's own handler back; a handler, unlike
# "ignore", is reset to the default in every process started from here.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# With PYTHONDONTWRITEBYTECODE set (some CI images and sandboxes set it), every `ll` the tests
# start would compile the package from source again (about 0.25 s of CPU each, hundreds of
# times), and every xdist worker would rewrite every test module's asserts anew. The suite
# keeps the tree free of bytecode as asked, and writes it under .pytest_cache (ignored by git)
# instead: this process and every process it starts, as a user's `ll` runs, with bytecode.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False
    prefix = os.environ.setdefault("PYTHONPYCACHEPREFIX", str(REPO / ".pytest_cache" / "pycache"))
    sys.pycache_prefix = prefix

# CI runs the same examples every time, so a red build is the code's doing and can be
# reproduced; a developer's runs keep exploring new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)  # the parse cache: under HOME too
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "OPENAI_", "LL_", "CLAUDE_")) or name in (
            "GITHUB_ACTIONS",
            "GITHUB_STEP_SUMMARY",
        ):
            monkeypatch.delenv(name, raising=False)
    # Any stray request to a real provider fails fast instead of reaching the network.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture
def ll_cmd() -> list[str]:
    """The argv prefix that runs the real `ll` in a subprocess."""
    return [sys.executable, "-m", "little_loops"]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A temporary directory (the test's tmp_path) to write loop files in and run `ll` in:
    `project.ll("validate", "loop.yaml")` in process, `process=True` for a subprocess."""
    return Project(tmp_path)
