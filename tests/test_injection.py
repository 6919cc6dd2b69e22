"""Hostile values through the real `ll`: never run, never leaked, any size (issue 11: 10-12, 15).

Each test writes a loop file, runs `python -m little_loops` in a subprocess and looks at what
the process left behind: files an injected command would create, exit codes, messages, and
every byte of the run directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

HOSTILE = "x; touch PWNED;"


def run_ll(
    ll_cmd: list[str], cwd: Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"NO_COLOR": "1"}
    return subprocess.run(
        [*ll_cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def pwned(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("PWNED"))


def captured(base: Path, name: str) -> str:
    """The output the last run captured as `name`, from its state.json."""
    (state,) = base.glob(".loops/runs/*/state.json")
    return str(json.loads(state.read_text())["captured"][name]["output"])


def capture_then(action: str, value: str = HOSTILE) -> str:
    """A loop that captures `value` as `p`, then runs `action` (YAML block text)."""
    body = textwrap.indent(action, " " * 6)
    return (
        "name: inject\n"
        "initial: p\n"
        "context:\n"
        f"  value: {json.dumps(value)}\n"
        "states:\n"
        "  p:\n"
        "    action: printf '%s' ${context.value|q}\n"
        "    capture: p\n"
        "    next: q\n"
        "  q:\n"
        "    action: |\n"
        f"{body}\n"
        "    capture: q\n"
        "    next: done\n"
        "  done: {terminal: true}\n"
    )


# ------------------------------------------------------------------ 10: the quoting lexer


def test_shift_in_arithmetic_is_not_a_here_document(tmp_path: Path, ll_cmd: list[str]) -> None:
    # the case: `<<` in $((...)) once made the value after it go in unquoted
    loop = write(tmp_path / "l.yaml", capture_then("echo $((1<<2))\necho ${captured.p.output}"))
    done = run_ll(ll_cmd, tmp_path, "run", str(loop), "--verbose")
    assert done.returncode == 0, done.stderr
    assert captured(tmp_path, "q") == f"4\n{HOSTILE}"
    assert pwned(tmp_path) == []


@pytest.mark.parametrize(
    ("action", "why"),
    [
        ("((1<<2)) || :\necho ${captured.p.output}", "'<' inside '((...))'"),
        ("echo $[1<<2]\necho ${captured.p.output}", "'<' inside $[...]"),
        ("printf %s $'a\\'b' ${captured.p.output} '", "\\' inside $'...'"),
        ("cat <<E\\\nOF\n${captured.p.output}\nEOF", "delimiter that spans lines"),
        ("cat <<EOF\nab\nEO\\\nF\necho ${captured.p.output}\nEOF", "continued into its delimiter"),
        ("x=; echo \"$${x:-'}'} ${captured.p.output} '}\"", 'single quote inside "${...}"'),
        ("echo $((echo a); echo b) ${captured.p.output}", "'$((' that does not end"),
    ],
)
def test_unsure_spots_are_a_run_error_naming_the_placeholder(
    tmp_path: Path, ll_cmd: list[str], action: str, why: str
) -> None:
    loop = write(tmp_path / "l.yaml", capture_then(action))
    done = run_ll(ll_cmd, tmp_path, "run", str(loop))
    out = done.stdout + done.stderr
    assert done.returncode == 3, out
    assert "cannot safely place '${captured.p.output}' in state 'q'" in out
    assert why in out
    assert "Traceback" not in out
    assert pwned(tmp_path) == []


@pytest.mark.parametrize(
    "action",
    [
        "cat <\\\n<EOF\n${captured.p.output}\nEOF",  # a continuation inside '<<'
        'printf %s "$\\\n(printf %s ${captured.p.output})"',  # inside '$('
        "cat <<EOF\nab\\\nEOF\n${captured.p.output}\nEOF",  # a continued body line
    ],
)
def test_line_continuations_keep_values_quoted(
    tmp_path: Path, ll_cmd: list[str], action: str
) -> None:
    value = "$(touch PWNED) `touch PWNED`; touch PWNED"
    loop = write(tmp_path / "l.yaml", capture_then(action, value))
    done = run_ll(ll_cmd, tmp_path, "run", str(loop), "--verbose")
    assert done.returncode == 0, done.stdout + done.stderr
    assert captured(tmp_path, "q").splitlines()[-1] == value
    assert pwned(tmp_path) == []
