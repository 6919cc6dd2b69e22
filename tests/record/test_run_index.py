"""The runs' index (record/run_index.py): `ll status`, `ll list` and `ll resume` find the
newest runs without listing `.loops/runs/`, and say exactly what a listing would.

Runs are made by a real `ll run` of a YAML file and copied under older ids (one a second), as
bench/lookup.py does. A folder changed within `RACY_NS` is never indexed from a listing, so
the tests date the folder back (`age`) where they want the index written.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from project import Project
from test_runs import many_runs

from little_loops.record import run_index
from little_loops.record.runs import list_text
from little_loops.record.store import find_run, newest_first


def age(project: Project) -> None:
    """Date `.loops/runs/` back a minute: a listing of it may be indexed."""
    then = time.time() - 60
    os.utime(project.path / ".loops" / "runs", (then, then))


def index_file(project: Project) -> Path:
    return project.path / ".loops" / run_index.INDEX_NAME


def test_status_list_and_resume_read_the_index_not_the_folder(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27: at 10,000 runs, listing the folder and sorting its names cost about 11 ms
    of every `ll status` and `ll list`. After one listing (which writes the index), a run
    adds itself to the index and the lookups read only its end."""
    ids = many_runs(project, 300)
    age(project)
    first = project.ll("list")
    assert first.returncode == 0, first.stderr
    assert index_file(project).is_file()
    again = project.ll("run", "ok.yaml", "--quiet")  # brings the index up to date itself
    assert again.returncode == 0, again.stderr
    (newest,) = set(os.listdir(project.path / ".loops" / "runs")) - set(ids)
    listed: list[str] = []
    real_listdir = os.listdir

    def listdir(path: str = ".") -> list[str]:
        if os.path.basename(os.fspath(path)) == "runs":
            listed.append(path)
            raise AssertionError(f"{path} was listed")
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", listdir)
    status = project.ll("status")
    assert status.returncode == 0, status.stderr
    assert f"run:     {newest}" in status.stdout
    shown = project.ll("list")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:21]] == [newest, *ids[:19]]
    assert lines[21:] == ["281 older runs not shown; see every run with: ll list --all"]
    assert project.ll("status", ids[-1]).returncode == 0  # an exact id: one folder
    refused = project.ll("resume")  # newest first, every run finished: none to resume
    assert "no resumable run" in refused.stderr, refused.stderr
    assert listed == []


def test_the_answers_are_those_of_a_listing_whatever_changed(project: Project) -> None:
    """Copied in (an older ll), deleted by hand, pruned, hidden, a damaged index: each
    lookup says what the listing says."""
    ids = many_runs(project, 40)
    runs = project.path / ".loops" / "runs"
    age(project)

    def same() -> None:
        listed = [n for n in sorted(os.listdir(runs), reverse=True) if not n.startswith(".")]
        shown = [r.run_id for r in newest_first(project.path)]
        assert shown == listed
        assert find_run(project.path, None).run_id == shown[0]
        assert f"\n{len(listed) - 20:,} older runs not shown" in list_text(project.path)

    same()
    assert index_file(project).is_file()
    newer = "29990101-000000-ok-beef"  # as an older ll, or `cp -r`, leaves one: not indexed
    shutil.copytree(runs / ids[0], runs / newer)
    same()
    assert find_run(project.path, None).run_id == newer
    shutil.rmtree(runs / newer)  # deleted by hand
    same()
    assert find_run(project.path, None).run_id == ids[0]
    (runs / ".DS_Store").write_text("", encoding="utf-8")  # hidden: not a run, not counted
    age(project)
    same()
    pruned = project.ll("prune", "--keep", "30")
    assert pruned.returncode == 0, pruned.stderr
    assert not index_file(project).exists()  # a prune renames runs aside: forgotten
    same()
    age(project)
    same()
    index_file(project).write_bytes(b"ll-runs-index 1 garbage\n")
    same()
    index_file(project).write_bytes(b"")
    same()


def test_a_folder_changed_just_now_is_not_indexed(project: Project) -> None:
    """Within `RACY_NS` of a change a later change could keep the folder's time: listed."""
    many_runs(project, 5)
    assert project.ll("list").returncode == 0
    assert not index_file(project).exists()
    age(project)
    assert project.ll("list").returncode == 0
    assert index_file(project).exists()


def test_a_run_appends_itself_only_to_a_true_index(project: Project) -> None:
    ids = many_runs(project, 10)
    age(project)
    assert project.ll("list").returncode == 0
    before = index_file(project).read_bytes()
    assert project.ll("run", "ok.yaml", "--quiet").returncode == 0
    after = index_file(project).read_bytes()
    added = after[len(before) :].decode().split()
    assert len(added) == 1
    assert added[0] not in ids
    assert added[0][:15] >= ids[0][:15]
    assert after[run_index.HEADER_BYTES : len(before)] == before[run_index.HEADER_BYTES :]
    assert after.split()[6] == b"11"  # the count of names
    # A change the index does not know (a copy): the next run leaves the index alone.
    runs = project.path / ".loops" / "runs"
    shutil.copytree(runs / ids[0], runs / "20000101-000000-ok-0bad")
    stale = index_file(project).read_bytes()
    assert project.ll("run", "ok.yaml", "--quiet").returncode == 0
    assert index_file(project).read_bytes() == stale
    assert len(list(newest_first(project.path))) == 13


def test_names_beyond_the_first_read_come_from_the_rest(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ll list -n 400`: more names than the first read from the end holds (8 KiB)."""
    ids = many_runs(project, 500)
    age(project)
    assert project.ll("list").returncode == 0
    runs = project.path / ".loops" / "runs"
    shown = project.ll("list", "-n", "400")
    assert [line.split()[0] for line in shown.stdout.splitlines()[1:401]] == ids[:400]
    names = run_index.names(runs)
    assert (names.total, names.hidden) == (500, 0)
    walked = iter(names)
    assert [next(walked) for _ in range(350)] == ids[:350]
    # The index replaced in between (a listing wrote it afresh): the folder, below.
    index_file(project).unlink()
    age(project)
    assert run_index.names(runs).total == 500  # written again: another file
    assert list(walked) == ids[350:]


def test_a_forged_name_in_the_index_is_never_followed(project: Project) -> None:
    """A line that cannot be a folder's name (`../x`, empty): the folder is listed instead."""
    ids = many_runs(project, 30)
    age(project)
    assert project.ll("list").returncode == 0
    raw = index_file(project).read_bytes()
    head, body = raw[: run_index.HEADER_BYTES], raw[run_index.HEADER_BYTES :]
    outside = project.path / "outside"
    outside.mkdir()
    (outside / "state.json").write_text("{}", encoding="utf-8")
    for forged in (b"../outside", b"", b".."):
        lines = body.split(b"\n")
        lines[-4] = forged  # among the newest, keeping the header's length
        new = b"\n".join(lines)
        fields = head.split()
        fields[-1] = str(run_index.HEADER_BYTES + len(new)).encode()  # where the names end
        index_file(project).write_bytes(b" ".join(fields).ljust(127) + b"\n" + new)
        assert run_index.names(project.path / ".loops" / "runs").total == 30  # trusted
        assert [r.run_id for r in newest_first(project.path)] == ids
