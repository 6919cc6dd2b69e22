"""docs/getting-started.md's sample outputs are what `ll` prints today.

The guide's `first.yaml` is run for real, as the guide says to, and each output block that
follows a command is compared with what that command printed: run ids, times and dates are
the only parts that may differ.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "getting-started.md"

RUN_ID = re.compile(r"\b\d{8}-\d{6}-[A-Za-z0-9_.-]+?-[0-9a-f]{4}\b")
TIME = re.compile(r"\b\d+(?:\.\d+)? ?m?s\b")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\b")


def normal(text: str) -> list[str]:
    """The lines of an output with run ids, durations and dates made alike."""
    text = DATE.sub("DATE", TIME.sub("T", RUN_ID.sub("RUN", text)))
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def output_after(command: str) -> str:
    """The ```text block that follows the ```sh block whose last line is `command`."""
    guide = GUIDE.read_text(encoding="utf-8")
    match = re.search(
        rf"```sh\n(?:[^`]*\n)?{re.escape(command)}\n```\s*\n```text\n(.*?)\n```", guide, re.S
    )
    assert match, f"docs/getting-started.md has no output block after `{command}`"
    return match.group(1)


def first_loop() -> str:
    guide = GUIDE.read_text(encoding="utf-8")
    match = re.search(r"```yaml\n(name: first\n.*?)```", guide, re.S)
    assert match, "docs/getting-started.md has no first.yaml"
    return match.group(1)


def ll(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "LL_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "little_loops", *args],
        cwd=cwd,
        env={**env, "COLUMNS": "100", "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout
    return proc.stdout


@pytest.mark.slow
def test_the_guides_sample_outputs_are_todays(tmp_path: Path) -> None:
    (tmp_path / "first.yaml").write_text(first_loop(), encoding="utf-8")
    assert normal(ll(tmp_path, "init", "tidy")) == normal(output_after("ll init tidy"))
    assert normal(ll(tmp_path, "run", "first.yaml")) == normal(output_after("ll run first.yaml"))
    (tmp_path / "report.txt").unlink()
    verbose = ll(tmp_path, "run", "-v", "first.yaml")
    assert normal(verbose) == normal(output_after("ll run -v first.yaml"))
    assert normal(ll(tmp_path, "list")) == normal(output_after("ll list"))
