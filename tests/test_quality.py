"""The quality gates run with the tests: mypy --strict, ruff check and ruff format."""

from __future__ import annotations

import os
import re
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
@pytest.mark.integration
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


def test_pre_commit_hooks_are_local_and_run_the_gates_above() -> None:
    import yaml

    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert [repo["repo"] for repo in config["repos"]] == ["local"]  # no network, no download
    hooks = config["repos"][0]["hooks"]
    assert {hook["language"] for hook in hooks} == {"system"}
    entries = [hook["entry"].removeprefix(".venv/bin/") for hook in hooks]
    assert entries == ["ruff check .", "ruff format --check .", "mypy", "lint-imports"]
    nox = (REPO / "noxfile.py").read_text(encoding="utf-8")
    gates = nox.split("def gates(", 1)[1]
    for tool in ('"ruff", "check"', '"ruff", "format", "--check"', '"mypy"', '"lint-imports"'):
        assert tool in gates


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
        "run/runner.py",
        "def _shown() -> None:\n    import rich\n",
        "little_loops.run is not allowed to import rich",
        id="core-imports-rich-lazily",
    ),
    pytest.param(
        "evaluators/deterministic.py",
        "def _run() -> None:\n    from little_loops.run import runner\n",
        "little_loops.evaluators.deterministic -> little_loops.run.runner",
        id="evaluator-imports-runner",
    ),
    pytest.param(
        "actions/process.py",
        "from little_loops import evaluators\n",
        "little_loops.actions.process -> little_loops.evaluators",
        id="process-layer-imports-evaluators",
    ),
    pytest.param(
        "cli/inspect.py",
        "import subprocess\n",
        "little_loops.cli.inspect -> subprocess",
        id="subprocess-outside-the-process-layer",
    ),
    pytest.param(
        "model/router.py",
        "from little_loops import errors\n",
        "little_loops.model.router -> little_loops.errors",
        id="router-imports-more-than-the-model",
    ),
    pytest.param(
        "run/runner.py",
        "def _judge() -> None:\n    import anthropic\n",
        "little_loops.run.runner -> anthropic",
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


# Third-party modules (and subprocess) the table names; the rest of the stdlib goes unsaid.
NAMED_EXTERNAL = {"anthropic", "click", "grandalf", "jsonschema", "rich", "subprocess", "yaml"}


def _table() -> dict[str, set[str]]:
    """docs/architecture.md's module table: `name.py` or `package/` -> the modules it may import."""
    rows: dict[str, set[str]] = {}
    for line in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0] != "`module`":
            name = cells[0].strip("`").removesuffix(".py").removesuffix("/")
            rows[name] = set() if cells[2] == "nothing" else set(re.findall(r"`([^`]+)`", cells[2]))
    return rows


def _imports() -> dict[str, set[str]]:
    """What each module (a subpackage counting as one) imports, at its top or in a function."""
    import grimp

    graph = grimp.build_graph("little_loops", include_external_packages=True, cache_dir=None)

    def unit(module: str) -> str:
        parts = module.split(".")
        if parts[0] != "little_loops":
            return parts[0]
        if len(parts) == 1:
            return "little_loops"
        return parts[1]

    found: dict[str, set[str]] = {}
    for module in graph.modules:
        if module == "little_loops" or not module.startswith("little_loops."):
            continue
        source = unit(module)
        found.setdefault(source, set())
        for imported in graph.find_modules_directly_imported_by(module):
            target = unit(imported)
            internal = imported.startswith("little_loops")
            if target != source and (internal or target in NAMED_EXTERNAL):
                found[source].add(target)
    found["__init__"] = found.pop("little_loops", set())
    return found


def test_architecture_table_matches_the_code() -> None:
    """Every module has a row, every row a module, and "may import" is what it imports."""
    table, code = _table(), _imports()
    assert sorted(table) == sorted(code), "rows of docs/architecture.md vs modules of the package"
    wrong = {
        name: f"add {sorted(code[name] - table[name])}, remove {sorted(table[name] - code[name])}"
        for name in code
        if code[name] != table[name]
    }
    assert not wrong, f'fix the "may import" column of docs/architecture.md: {wrong}'


def test_every_module_is_in_the_architecture() -> None:
    """Each module of a subpackage is named in docs/architecture.md (its path, or its name)."""
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    package = REPO / "little_loops"
    missing = [
        str(path.relative_to(package))
        for path in sorted(package.glob("*/*.py"))
        if f"`{path.relative_to(package).as_posix()}`" not in doc and f"`{path.name}`" not in doc
    ]
    assert not missing, f"add a row for each to docs/architecture.md: {missing}"
