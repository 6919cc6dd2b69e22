"""The equivalence harness's own rules (scripts/migrate_equiv.py), which must be fair to both
runners: inputs only for keys a loop leaves without a value, values each runner accepts, and
upstream's `-n` limit not held against `ll`."""

from __future__ import annotations

import textwrap
from pathlib import Path

from test_migrate_equiv import harness  # scripts/migrate_equiv.py, loaded as a module


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_inputs_skip_keys_an_inherited_file_gives_a_value(tmp_path: Path) -> None:
    write(
        tmp_path / "lib" / "base.yaml",
        """
        name: base
        context: {threshold: 90, prompt_file: system.md}
        """,
    )
    loop = write(
        tmp_path / "child.yaml",
        """
        name: child
        from: lib/base
        description: sets ${context.mode} for the loops it calls
        parameters:
          depth: {type: integer, required: true}
          node: {type: string, required: true}
          run_dir: {type: path, required: true}
        states:
          go:
            action: echo ${context.threshold} ${context.prompt_file} ${context.topic}
            terminal: true
        """,
    )
    assert harness().inputs_of(loop) == {"depth": "1", "node": "demo", "topic": "demo"}


def test_the_state_upstreams_step_limit_sent_to_is_not_compared(tmp_path: Path) -> None:
    eq = harness()
    up = {
        "path": ["a", "b"] * 10 + ["summary"],
        "final": "summary",
        "outcome": "limit",
    }
    ours = eq.Run(["a", "b"] * 30, "b", "limit")
    assert eq.same(up, ours, {"a", "b", "summary"})[0]
    assert not eq.same(up, eq.Run(["a"] * 60, "a", "limit"), {"a", "b", "summary"})[0]
