"""The quality gates run with the tests: mypy --strict, ruff check and ruff format."""

from __future__ import annotations

import os
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


def _lint_imports(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_tool("lint-imports"), "--no-cache"], cwd=cwd, capture_output=True, text=True, env=env
    )


def test_import_contracts() -> None:
    """The layers of docs/architecture.md, as .importlinter states them, hold."""
    proc = _lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


# Each line added to a copy of the package breaks one contract; the lazy imports prove that an
# import inside a function counts like any other.
BREAKS = [
    pytest.param(
        "runner.py",
        "def _shown() -> None:\n    import rich\n",
        "little_loops.runner is not allowed to import rich",
        id="core-imports-rich-lazily",
    ),
    pytest.param(
        "evaluators/deterministic.py",
        "def _run() -> None:\n    from little_loops import runner\n",
        "little_loops.evaluators.deterministic -> little_loops.runner",
        id="evaluator-imports-runner",
    ),
    pytest.param(
        "process.py",
        "from little_loops import evaluators\n",
        "little_loops.process -> little_loops.evaluators",
        id="process-layer-imports-evaluators",
    ),
    pytest.param(
        "cli_inspect.py",
        "import subprocess\n",
        "little_loops.cli_inspect -> subprocess",
        id="subprocess-outside-the-process-layer",
    ),
    pytest.param(
        "router.py",
        "from little_loops import errors\n",
        "little_loops.router is not allowed to import little_loops.errors",
        id="router-imports-more-than-the-model",
    ),
    pytest.param(
        "runner.py",
        "def _judge() -> None:\n    import anthropic\n",
        "little_loops.runner -> anthropic",
        id="anthropic-outside-providers",
    ),
]


@pytest.mark.parametrize(("module", "added", "reported"), BREAKS)
def test_import_contracts_fail_on_a_forbidden_import(
    tmp_path: Path, module: str, added: str, reported: str
) -> None:
    shutil.copytree(REPO / "little_loops", tmp_path / "little_loops")
    shutil.copy(REPO / ".importlinter", tmp_path)
    with open(tmp_path / "little_loops" / module, "a", encoding="utf-8") as fh:
        fh.write("\n\n" + added)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # the copy, not the installed package
    proc = _lint_imports(tmp_path, env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 broken" in proc.stdout, proc.stdout
    assert reported in proc.stdout, proc.stdout
