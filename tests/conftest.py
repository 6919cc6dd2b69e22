"""Shared fixtures: every test runs away from the real home, real API keys and the network."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

# With PYTHONDONTWRITEBYTECODE set (some CI images and sandboxes set it), every `ll` the tests
# start would compile the package from source again (about 0.25 s of CPU each, hundreds of
# times), and every xdist worker would rewrite every test module's asserts anew. The suite
# keeps the tree free of bytecode as asked, and writes it under .pytest_cache (ignored by git)
# instead: this process and every process it starts, as a user's `ll` runs, with bytecode.
# Before any other import here, so that what this file imports (hypothesis: 70 modules that
# pytest rewrites, as a plugin's) is cached too.
# The prefix mirrors every path compiled under it, the temporary venvs and pip build trees of
# the install tests included (about 300 MB a session): what mirrors a folder that is gone is
# dropped at the start of a session, so the cache does not grow from session to session.
PYCACHE = Path(__file__).resolve().parent.parent / ".pytest_cache" / "pycache"


def _prune_pycache(prefix: Path) -> None:
    for mirror, folders, _ in os.walk(prefix):
        source = Path("/", Path(mirror).relative_to(prefix))
        gone = [f for f in folders if not (source / f).is_dir()]
        for folder in gone:
            shutil.rmtree(Path(mirror, folder), ignore_errors=True)
            folders.remove(folder)


if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False
    prefix = os.environ.setdefault("PYTHONPYCACHEPREFIX", str(PYCACHE))
    sys.pycache_prefix = prefix
    if Path(prefix) == PYCACHE:  # ours, not one the caller chose
        _prune_pycache(PYCACHE)

import pytest  # noqa: E402 - after the bytecode settings above
from hypothesis import settings  # noqa: E402
from project import Project  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

# A process started in the background by a shell without job control (`pytest ... &` in a
# script, `nohup`) starts with SIGINT ignored, and an ignored signal stays ignored across exec:
# every `ll` a test starts would then shrug off the Ctrl-C the test sends it. A user's `ll` in a
# terminal never starts that way, so the suite puts Python's own handler back; a handler, unlike
# "ignore", is reset to the default in every process started from here.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# CI runs the same examples every time, so a red build is the code's doing and can be
# reproduced; a developer's runs keep exploring new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: WORKERS_PER_CPU workers per CPU this process may use, not one.

    Much of this suite waits rather than computes (a judge server's scripted delay, a
    timeout run out, a FIFO nobody writes, a child process's start-up), so one worker a CPU
    leaves the CPUs idle: a third of the time in a 2-worker run on 2 CPUs (vmstat).
    docs/performance.md ("Test suite") has the measured worker counts.
    PYTEST_XDIST_AUTO_NUM_WORKERS still wins, as xdist documents.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, round(cpus * WORKERS_PER_CPU))


WORKERS_PER_CPU = 2.0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist's workers, the tests marked `slow` are handed out first (see `slow_first`)."""
    if hasattr(config, "workerinput"):  # an xdist worker: each makes the same order
        items[:] = slow_first(items)


def slow_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests marked `slow` before the others, each part in its own order.

    xdist hands tests out in the order collected (`--dist loadgroup`: an `xdist_group` as one
    unit, the largest units first), so a long test collected near the end (`test_mypy_strict`
    in tests/test_quality.py, the fuzzers of tests/load) started when the other workers had
    little left, and the run waited for it alone. With the long tests first, the many short
    ones fill the workers up to the end. Not done without xdist: one process, one order."""
    return sorted(items, key=lambda item: item.get_closest_marker("slow") is None)


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
