"""Reproducible installs: the README's test command (so CI) installs through the pins, which name
every package the project and its test extra ask for; the `minimums` session's lowest versions."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

from minimums import constraints, lowest, requirements  # noqa: E402

PINS = REPO / "constraints" / "test.txt"


def pinned() -> dict[str, str]:
    lines = [line for line in PINS.read_text().splitlines() if line and not line.startswith("#")]
    pairs = [line.split("==", 1) for line in lines]
    assert all(len(pair) == 2 for pair in pairs), "every line is NAME==VERSION"
    return {canonicalize_name(name): version for name, version in pairs}


def test_the_readme_test_command_installs_through_the_pins_and_runs_in_parallel() -> None:
    text = (REPO / "README.md").read_text()
    command = re.search(r"<!-- test-command -->\s*```sh\n(.+?)\n```", text, re.S)
    assert command is not None
    assert "pip install -q -c constraints/test.txt -e '.[test]'" in command.group(1)
    assert command.group(1).endswith("python -m pytest -q -n auto")
    assert "test-command" in (REPO / ".ci" / "run").read_text()  # CI runs that command


def test_every_dependency_and_test_tool_is_pinned_but_not_the_project() -> None:
    pins = pinned()
    wanted = {
        canonicalize_name(req.name) for req in requirements((REPO / "pyproject.toml").read_text())
    }
    assert wanted - set(pins) == set()
    assert "little-loops-fsm" not in pins
    for req in requirements((REPO / "pyproject.toml").read_text()):
        assert req.specifier.contains(pins[canonicalize_name(req.name)]), req


def test_minimums_pins_each_lower_bound_and_leaves_the_rest_free() -> None:
    assert lowest(Requirement("rich>=14.2")) == "rich==14.2"
    assert lowest(Requirement("ruamel.yaml>=0.18,<1")) == "ruamel.yaml==0.18"
    assert lowest(Requirement("types-PyYAML")) is None
    text = (
        '[project]\ndependencies = [\n  "click>=8.1",  # a comment\n  "pyyaml",\n]\n'
        '[project.optional-dependencies]\ntest = [\n  # the runner\n  "pytest>=7.4",\n]\n'
    )
    assert constraints(text) == ["click==8.1", "pytest==7.4"]
