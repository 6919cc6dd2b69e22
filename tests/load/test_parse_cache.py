"""The parse cache (load/source.py `compose_cached`): a file's bytes composed once, read back
by the next run without PyYAML; an edit, a damaged entry or a cache that cannot be written
changes nothing but the time it takes."""

from __future__ import annotations

import marshal
import os
from pathlib import Path
from typing import Any

import pytest
from project import Project

from little_loops.load import source
from little_loops.load.loader import try_load

LOOP = """\
name: cached
initial: a
context: {who: world}
states:
  a:
    action: "echo hello ${context.who}"   # a comment the checks read
    next: b
  b: {terminal: true}
"""
BROKEN = LOOP.replace("next: b", "next: nowhere")


def entries() -> list[Path]:
    where = Path(os.environ["HOME"], ".cache", "little-loops", "parsed")
    return sorted(where.iterdir()) if where.is_dir() else []


def test_a_second_load_reads_the_cache_and_gives_the_same_loop(project: Project) -> None:
    path = project.write("cached.yaml", LOOP)
    first, found = try_load(path)
    assert first is not None
    assert not found
    assert len(entries()) == 1
    second, again = try_load(path)
    assert second == first
    assert again == found


def test_run_twice_and_after_an_edit(project: Project) -> None:
    project.write("cached.yaml", LOOP)
    for _ in range(2):
        result = project.ll("run", "cached.yaml", "-v")
        assert result.returncode == 0, result.stderr
        assert "hello world" in result.stdout + result.stderr
    project.write("cached.yaml", LOOP.replace("world", "there"))
    result = project.ll("run", "cached.yaml", "-v")
    assert "hello there" in result.stdout + result.stderr
    assert len(entries()) == 1  # one entry a file: the edit replaced it


def test_diagnostics_are_placed_the_same_from_the_cache(project: Project) -> None:
    project.write("broken.yaml", BROKEN)
    first = project.ll("run", "broken.yaml")
    assert entries(), "a file composed without a YAML problem is kept, whatever the checks say"
    second = project.ll("run", "broken.yaml")
    assert first.returncode == second.returncode == 2
    assert "broken.yaml:7:" in first.stderr
    assert second.stderr == first.stderr


def test_a_damaged_entry_is_a_miss(project: Project) -> None:
    project.write("cached.yaml", LOOP)
    assert project.ll("run", "cached.yaml").returncode == 0
    (entry,) = entries()
    for junk in (b"", b"\x00garbage", marshal.dumps(("other", "sha", {}, {}, {}, {}))):
        entry.write_bytes(junk)
        result = project.ll("run", "cached.yaml", "-v")
        assert result.returncode == 0, result.stderr
        assert "hello world" in result.stdout + result.stderr
        assert marshal.loads(entry.read_bytes())[0] == source._stamp()  # written again


def test_another_composer_or_pyyaml_is_a_miss(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = project.write("cached.yaml", LOOP)
    try_load(path)
    monkeypatch.setattr(source, "_STAMP", ["another PyYAML"])
    calls: list[str] = []
    real = source.compose  # type: ignore[attr-defined]

    def compose(text: str, file: str) -> Any:
        calls.append(file)
        return real(text, file)

    monkeypatch.setattr(source, "compose", compose)
    loop, _ = try_load(path)
    assert loop is not None
    assert calls == [str(path)]


def test_a_cache_that_cannot_be_written_changes_nothing(project: Project) -> None:
    project.write("cached.yaml", LOOP)
    blocker = project.path / "not-a-dir"
    blocker.write_text("a file where the cache directory would be")
    for _ in range(2):
        result = project.ll("run", "cached.yaml", "-v", env={"XDG_CACHE_HOME": str(blocker)})
        assert result.returncode == 0, result.stderr
        assert "hello world" in result.stdout + result.stderr


def test_xdg_cache_home_is_where_the_cache_is(project: Project) -> None:
    project.write("cached.yaml", LOOP)
    where = project.path / "xdg"
    assert project.ll("run", "cached.yaml", env={"XDG_CACHE_HOME": str(where)}).returncode == 0
    assert len(list((where / "little-loops" / "parsed").iterdir())) == 1
    assert not entries()


def test_a_value_marshal_cannot_keep_is_not_cached(project: Project) -> None:
    """A YAML timestamp is a `datetime.date`: composed every time, never an error."""
    project.write("dated.yaml", LOOP.replace("states:", "x-since: 2024-01-01\nstates:"))
    for _ in range(2):
        result = project.ll("run", "dated.yaml")
        assert result.returncode == 0, result.stderr
    assert not entries()


def test_an_entry_others_could_have_written_is_not_read(project: Project) -> None:
    """A shared XDG_CACHE_HOME: an entry writable by others (or another user's) is a miss,
    and the code cache (model/records.py) is not read either."""
    from little_loops.model.records import read_cache_file

    project.write("cached.yaml", LOOP)
    assert project.ll("run", "cached.yaml").returncode == 0
    (entry,) = entries()
    assert read_cache_file(str(entry)) is not None
    entry.chmod(0o666)
    assert read_cache_file(str(entry)) is None
    calls: list[str] = []
    real = source.compose  # type: ignore[attr-defined]

    def compose(text: str, file: str) -> Any:
        calls.append(file)
        return real(text, file)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(source, "compose", compose)
        loop, _ = try_load(project.path / "cached.yaml")
    assert loop is not None
    assert calls  # composed again: the entry was not trusted
