"""The quality gates run with the tests: mypy --strict, ruff check and ruff format."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _tool(name: str) -> list[str]:
    local = Path(sys.executable).parent / name
    if local.exists():
        return [str(local)]
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; install the test extra: pip install -e '.[test]'")
    return [found]


@pytest.mark.slow
def test_mypy_strict() -> None:
    proc = subprocess.run(
        # The files come from pyproject.toml: the package, the tests, bench/ and scripts/.
        [*_tool("mypy"), "--strict"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ours = sum(
        len(list((REPO / d).rglob("*.py"))) for d in ("little_loops", "tests", "bench", "scripts")
    )
    assert f"no issues found in {ours} source files" in proc.stdout


def test_ruff_check() -> None:
    proc = subprocess.run([*_tool("ruff"), "check", "."], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format() -> None:
    proc = subprocess.run(
        [*_tool("ruff"), "format", "--check", "."], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
