"""PyYAML imported without its slow pattern (load/composer.py `yaml_module`, issue 27).

`yaml.reader` compiles, at import, the characters YAML forbids as the complement of the allowed
ones, which costs `re` a table of 65,536 entries; `yaml_module` has it compile the same set
written directly. These tests prove the set is the same and that a file's first run, through
the real `ll`, gets the cheap pattern.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from project import Project

from little_loops.load import composer

EVERY_CHARACTER = "".join(map(chr, range(0x110000)))  # surrogates included, as str allows

IN_A_FRESH_PROCESS = (
    "from little_loops.load.composer import _FORBIDDEN, yaml_module\n"
    "yaml = yaml_module()\n"
    "print(yaml.reader.Reader.NON_PRINTABLE.pattern == _FORBIDDEN)\n"
    "from little_loops.load.composer import compose\n"
    "print(compose('a: 1\\n', 'x.yaml')[0])\n"
)


def test_the_direct_set_is_the_complement_of_the_allowed_one() -> None:
    slow = re.compile(composer._FORBIDDEN_AS_ALLOWED)
    fast = re.compile(composer._FORBIDDEN)
    assert slow.findall(EVERY_CHARACTER) == fast.findall(EVERY_CHARACTER)
    assert len(fast.findall(EVERY_CHARACTER)) == 61 + 2048 + 2  # C0 and C1, surrogates, FFFE-F


def test_yaml_module_gives_the_reader_the_direct_set(tmp_path: Path) -> None:
    """(False here: a PyYAML whose pattern changed, which `yaml_module` leaves alone.)"""
    proc = subprocess.run(
        [sys.executable, "-c", IN_A_FRESH_PROCESS],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert proc.stdout.splitlines() == ["True", "{'a': 1}"]


def test_the_pure_python_reader_finds_what_it_found() -> None:
    """Without libyaml, PyYAML's own reader uses the pattern: the same errors."""
    yaml = composer.yaml_module()
    slow = re.compile(composer._FORBIDDEN_AS_ALLOWED)
    for text in ("a: \x07\n", "a: b\x1f\n", "a: \ufffe\n", "ok: \U0001f600\x85\n"):
        try:
            yaml.load(text, Loader=yaml.SafeLoader)
            found = None
        except yaml.reader.ReaderError as exc:
            found = exc.character
        expect = slow.search(text)
        assert found == (ord(expect.group()) if expect else None), repr(text)


def test_a_control_character_is_still_a_located_error(project: Project) -> None:
    (project.path / "bell.yaml").write_bytes(
        b"name: bell\ninitial: a\nstates:\n  a: {action: '\x07'}\n"
    )
    result = project.ll("validate", "bell.yaml")
    assert result.returncode != 0
    assert "bell.yaml:4:" in result.stdout + result.stderr
    assert "control character" in result.stdout + result.stderr
