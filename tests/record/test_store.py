"""Run directories, atomic state files, loop locks across processes, and run lookup."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from little_loops.errors import EXIT_RUN_ERROR, RunError
from little_loops.record import store
from little_loops.record.store import (
    RUNS,
    STATE_VERSION,
    LoopLock,
    RunDir,
    atomic_write_text,
    find_run,
    list_runs,
    new_run_id,
    pid_alive,
)


def test_new_run_id_format() -> None:
    run_id = new_run_id("fix-lint", now=1_795_000_000.9)
    assert re.fullmatch(r"20261118-110640-fix-lint-[0-9a-f]{4}", run_id), run_id
    assert new_run_id("x", now=0).startswith("19700101-000000-x-")


def test_new_run_id_slug_is_safe_and_short() -> None:
    assert re.fullmatch(r"\d{8}-\d{6}-fix-lint-now-[0-9a-f]{4}", new_run_id("fix lint/now"))
    assert re.fullmatch(r"\d{8}-\d{6}-loop-[0-9a-f]{4}", new_run_id(""))
    long = new_run_id("a" * 100)
    assert re.fullmatch(r"\d{8}-\d{6}-a{40}-[0-9a-f]{4}", long)


def test_new_run_id_is_unique() -> None:
    ids = {new_run_id("same", now=0) for _ in range(50)}
    assert len(ids) > 40  # 4 hex digits of randomness: a few collisions are possible


@pytest.mark.parametrize("fsync", [False, True])
def test_atomic_write_text_replaces_content_and_leaves_no_temp_file(
    tmp_path: Path, fsync: bool
) -> None:
    target = tmp_path / "state.json"
    target.write_text("old", encoding="utf-8")
    atomic_write_text(target, "new ✓\n", fsync=fsync)
    assert target.read_text(encoding="utf-8") == "new ✓\n"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_atomic_write_text_with_a_bare_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    atomic_write_text(Path("plain.txt"), "text")
    assert (tmp_path / "plain.txt").read_text(encoding="utf-8") == "text"
    assert [p.name for p in tmp_path.iterdir()] == ["plain.txt"]


def test_create_makes_the_directory_and_refuses_an_existing_run(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1")
    assert run.root == tmp_path / RUNS / "r1"
    assert run.run_id == "r1"
    assert run.root.is_dir()
    assert list(run.root.iterdir()) == []  # no steps/ folder: the run's one log is steps.log
    # Before state.json exists the directory may be re-created (a start that failed early).
    RunDir.create(tmp_path, "r1")
    run.write_state({"status": "running"})
    with pytest.raises(RunError) as exc:
        RunDir.create(tmp_path, "r1")
    assert exc.value.message == f"run 'r1' already exists under {tmp_path / RUNS}"
    assert exc.value.exit_code == EXIT_RUN_ERROR


def test_open_needs_a_state_file(tmp_path: Path) -> None:
    with pytest.raises(RunError) as exc:
        RunDir.open(tmp_path, "nope")
    assert exc.value.message == (
        f"no run 'nope' under {tmp_path / RUNS}; see 'll list' for run ids"
    )
    RunDir.create(tmp_path, "r1").write_state({})
    assert RunDir.open(tmp_path, "r1").root == tmp_path / RUNS / "r1"


def test_write_and_read_state_round_trip(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1")
    data = {"status": "running", "step": 3, "captured": {"x": {"output": "é\n"}}, "cost": 0.25}
    run.write_state(data, fsync=True)
    assert run.read_state() == {"version": STATE_VERSION, **data}
    text = run.state_path.read_text(encoding="utf-8")
    assert text.startswith('{"version":2,')
    assert text.endswith("}\n")
    assert "é" in text  # not escaped
    assert sorted(p.name for p in run.root.iterdir()) == ["state.json"]


@pytest.mark.parametrize(
    "data", [{"run_id": "r1", "context": {"k": 'v\n"q"'}, "pid": 7, "step": 3}, {}]
)
def test_write_state_then_read_state_gives_the_state_back(
    tmp_path: Path, data: dict[str, object]
) -> None:
    run = RunDir.create(tmp_path, "r1")
    for _ in range(2):  # the first write is a plain one, the second a swap
        run.write_state(data)
        assert run.read_state() == {"version": STATE_VERSION, **data}
    assert run.state_path.read_text(encoding="utf-8").endswith("}\n")


@pytest.mark.parametrize(
    ("fixed", "data"),
    [
        ({"run_id": "r1", "options": {"cwd": "/é"}, "pid": 7}, {"step": 3, "prev": {"a": 1}}),
        ({"run_id": "r1", "loop_file": "/x/\udcff.yaml"}, {"step": 1}),  # not UTF-8: escaped
        ({"run_id": "r1"}, {"step": 1, "error": "bad \udcfe byte"}),
        ({}, {"step": 1}),
        ({"run_id": "r1"}, {}),
    ],
)
def test_write_state_with_its_fixed_part_made_once_writes_the_same_bytes(
    tmp_path: Path, fixed: dict[str, object], data: dict[str, object]
) -> None:
    """The per-run JSON of the fields no step changes (`FixedState`) gives the bytes the whole
    state encoded at once gives, on the first (plain) write and on the swaps after it."""
    whole, parts = RunDir.create(tmp_path, "whole"), RunDir.create(tmp_path, "parts")
    made = store.FixedState(fixed)
    for _ in range(3):
        whole.write_state({**fixed, **data})
        parts.write_state(data, fixed=made)
        assert parts.state_path.read_bytes() == whole.state_path.read_bytes()
    assert parts.read_state() == {"version": STATE_VERSION, **fixed, **data}


def test_a_state_read_back_and_written_again_has_one_version_key(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1")
    run.write_state({"step": 1})
    state = run.read_state()
    state["step"] = 2
    run.write_state(state)
    assert run.state_path.read_text(encoding="utf-8") == '{"version":2,"step":2}\n'


def test_read_state_missing(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1")
    with pytest.raises(RunError) as exc:
        run.read_state()
    assert exc.value.message == f"{run.state_path}: missing; the run directory is incomplete"


def test_read_state_truncated(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1")
    run.write_state({"status": "running", "step": 3})
    text = run.state_path.read_text(encoding="utf-8")
    run.state_path.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(RunError) as exc:
        run.read_state()
    message = exc.value.message
    assert message.startswith(f"{run.state_path}: corrupted or truncated state file (")
    assert message.endswith("); the run cannot be resumed")
    assert exc.value.exit_code == EXIT_RUN_ERROR


def test_read_state_not_utf8(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1")
    run.state_path.write_bytes(b'{"version": 1, "x": "\xff"}')
    with pytest.raises(RunError, match="corrupted or truncated state file"):
        run.read_state()


def test_read_state_not_an_object(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1")
    run.state_path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(RunError) as exc:
        run.read_state()
    assert exc.value.message == f"{run.state_path}: corrupted state file (not a JSON object)"


@pytest.mark.parametrize(
    ("version", "shown"), [(3, "3"), (None, "None"), ("1", "'1'"), (True, "True")]
)
def test_read_state_other_version(tmp_path: Path, version: object, shown: str) -> None:
    run = RunDir.create(tmp_path, "r1")
    run.state_path.write_text(json.dumps({"version": version, "status": "x"}), encoding="utf-8")
    with pytest.raises(RunError) as exc:
        run.read_state()
    assert exc.value.message == (
        f"{run.state_path}: state format version {shown}, this ll reads versions 1 and 2; "
        "use the ll version that started the run"
    )


def test_the_run_log_is_one_file_opened_once_and_cut_per_attempt(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1")
    log = run.log
    first = log.attempt()
    assert first.start == 0
    assert not (run.root / store.LOG_NAME).exists()  # a silent attempt creates nothing
    second = log.attempt(limit=5)
    assert second.start == 0
    second.write(b"abc")
    second.write(b"defgh")  # over the limit: kept up to it, then the marker
    second.write(b"more")
    third = log.attempt()
    third.write(b"xyz\n")
    data = (run.root / store.LOG_NAME).read_bytes()
    assert data.startswith(b"abcde\n[ll: log cut at 5 bytes (LL_MAX_LOG_BYTES)")
    assert third.start == len(data) - 4
    assert store.RunLog.read(run.root, third.start, None) == b"xyz\n"
    assert store.RunLog.read(run.root, 0, 5) == b"abcde"
    run.close()
    again = RunDir(run.root).log  # a resumed run appends after what is there
    assert again.attempt().start == len(data)


def test_the_run_log_is_never_written_through_a_link(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (run.root / store.LOG_NAME).symlink_to(victim)
    with pytest.raises(RunError, match="symbolic link"):
        run.log.attempt().write(b"x")
    assert victim.read_text() == "keep"


HOLDER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from little_loops.record.store import LoopLock
    lock = LoopLock(Path(sys.argv[1]), Path(sys.argv[2]))
    lock.acquire(sys.argv[3], Path(sys.argv[2]))
    print("held", flush=True)
    if sys.argv[4] == "die":
        os._exit(0)  # the kernel drops the flock; the file still names this owner
    sys.stdin.read()
    lock.release()
    """
)


def hold_lock(base: Path, loop_file: Path, run_id: str, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(base), str(loop_file), run_id, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "held\n"
    return proc


def finish(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    proc.stdout.close()


def test_lock_acquire_and_release(tmp_path: Path) -> None:
    loop_file = tmp_path / "loop.yaml"
    lock = LoopLock(tmp_path, loop_file)
    assert lock.path.parent == tmp_path / ".loops" / "locks"
    lock.acquire("run-1", loop_file)
    assert json.loads(lock.path.read_text()) == {
        "run_id": "run-1",
        "pid": os.getpid(),
        "file": str(loop_file),
    }
    assert lock.reclaimed_from is None
    lock.release()
    assert json.loads(lock.path.read_text()) == {"released": True}
    lock.release()  # a second release is harmless
    again = LoopLock(tmp_path, loop_file)
    again.acquire("run-2", loop_file)
    assert again.reclaimed_from is None  # released cleanly: nothing to reclaim
    again.release()


def test_lock_key_is_the_resolved_loop_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert (
        LoopLock(tmp_path, Path("loop.yaml")).path
        == LoopLock(tmp_path, tmp_path / "loop.yaml").path
    )
    assert LoopLock(tmp_path, Path("a.yaml")).path != LoopLock(tmp_path, Path("b.yaml")).path


def test_lock_held_by_another_process_is_refused_with_its_owner(tmp_path: Path) -> None:
    loop_file = tmp_path / "loop.yaml"
    holder = hold_lock(tmp_path, loop_file, "run-held", "hold")
    try:
        lock = LoopLock(tmp_path, loop_file)
        with pytest.raises(RunError) as exc:
            lock.acquire("run-mine", loop_file)
        assert exc.value.message == (
            f"{loop_file}: already running as run run-held (pid {holder.pid}); wait for it, "
            "stop it with 'll stop run-held', or pass --allow-concurrent"
        )
        assert exc.value.exit_code == EXIT_RUN_ERROR
        # Another loop file in the same directory is not blocked.
        other = LoopLock(tmp_path, tmp_path / "other.yaml")
        other.acquire("run-other", tmp_path / "other.yaml")
        other.release()
    finally:
        finish(holder)
    lock.acquire("run-mine", loop_file)  # free again once the holder released it
    assert lock.reclaimed_from is None
    lock.release()


def test_lock_of_a_dead_owner_is_reclaimed(tmp_path: Path) -> None:
    loop_file = tmp_path / "loop.yaml"
    dead = hold_lock(tmp_path, loop_file, "run-dead", "die")
    assert dead.wait(timeout=10) == 0
    assert dead.stdout is not None
    assert dead.stdin is not None
    dead.stdout.close()
    dead.stdin.close()
    assert not pid_alive(dead.pid)
    lock = LoopLock(tmp_path, loop_file)
    lock.acquire("run-new", loop_file)
    try:
        assert lock.reclaimed_from == {
            "run_id": "run-dead",
            "pid": dead.pid,
            "file": str(loop_file),
        }
        assert json.loads(lock.path.read_text())["run_id"] == "run-new"
    finally:
        lock.release()


def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(0)
    assert not pid_alive(-1)
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert not pid_alive(proc.pid)


def make_run(base: Path, run_id: str, started_at: str | None = None) -> RunDir:
    run = RunDir.create(base, run_id)
    run.write_state({"status": "finished"} if started_at is None else {"started_at": started_at})
    return run


def test_list_runs_orders_by_second_then_started_at(tmp_path: Path) -> None:
    assert list_runs(tmp_path) == []
    make_run(tmp_path, "20260102-000000-x-0000", "2026-01-02T00:00:00.900Z")
    make_run(tmp_path, "20260102-000000-x-ffff", "2026-01-02T00:00:00.100Z")
    make_run(tmp_path, "20260102-000000-x-aaaa", "2026-01-02T00:00:00.500Z")
    make_run(tmp_path, "20260101-235959-x-ffff", "2026-01-01T23:59:59.999Z")
    make_run(tmp_path, "20260103-000000-x-0000")  # no started_at: sorts first within its second
    (tmp_path / RUNS / "20260101-000000-no-state").mkdir()  # no state.json: not a run
    assert [r.run_id for r in list_runs(tmp_path)] == [
        "20260101-235959-x-ffff",
        "20260102-000000-x-ffff",
        "20260102-000000-x-aaaa",
        "20260102-000000-x-0000",
        "20260103-000000-x-0000",
    ]


def test_list_runs_tolerates_a_corrupt_state_file(tmp_path: Path) -> None:
    make_run(tmp_path, "20260102-000000-x-bbbb", "2026-01-02T00:00:00.500Z")
    bad = RunDir.create(tmp_path, "20260102-000000-x-aaaa")
    bad.state_path.write_text("{trunc", encoding="utf-8")
    assert [r.run_id for r in list_runs(tmp_path)] == [
        "20260102-000000-x-aaaa",
        "20260102-000000-x-bbbb",
    ]


def test_a_lookup_reads_only_the_runs_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ll status`, `ll resume RUN`, a prefix: no state.json of another second is read."""
    for i in range(40):
        make_run(tmp_path, f"20260101-0000{i:02d}-x-0000", f"2026-01-01T00:00:{i:02d}.000Z")
    make_run(tmp_path, "20260102-000000-x-ffff", "2026-01-02T00:00:00.100Z")
    make_run(tmp_path, "20260102-000000-x-aaaa", "2026-01-02T00:00:00.500Z")
    read: list[str] = []
    real = store._started_at

    def counting(run: RunDir) -> str:
        read.append(run.run_id)
        return real(run)

    monkeypatch.setattr(store, "_started_at", counting)
    assert find_run(tmp_path, None).run_id == "20260102-000000-x-aaaa"
    assert sorted(read) == ["20260102-000000-x-aaaa", "20260102-000000-x-ffff"]
    read.clear()
    assert find_run(tmp_path, "20260101-000007-x-0000").run_id == "20260101-000007-x-0000"
    assert find_run(tmp_path, "20260101-000039").run_id == "20260101-000039-x-0000"
    assert read == []
    assert [r.run_id for r in store.newest_first(tmp_path)][:3] == [
        "20260102-000000-x-aaaa",
        "20260102-000000-x-ffff",
        "20260101-000039-x-0000",
    ]


def test_find_run(tmp_path: Path) -> None:
    with pytest.raises(RunError) as exc:
        find_run(tmp_path, None)
    assert exc.value.message == f"no runs under {tmp_path / RUNS}; start one with 'll run FILE'"
    for run_id in ("20260101-000000-a-1111", "20260101-000000-a-11112", "20260102-000000-b-2222"):
        make_run(tmp_path, run_id)
    assert find_run(tmp_path, None).run_id == "20260102-000000-b-2222"
    # An exact id wins over being a prefix of another id.
    assert find_run(tmp_path, "20260101-000000-a-1111").run_id == "20260101-000000-a-1111"
    assert find_run(tmp_path, "20260102").run_id == "20260102-000000-b-2222"
    with pytest.raises(RunError) as exc:
        find_run(tmp_path, "20260101-000000-a-1")
    assert exc.value.message == "'20260101-000000-a-1' matches 2 runs; give more of the run id"
    with pytest.raises(RunError) as exc:
        find_run(tmp_path, "2027")
    assert exc.value.message == f"no run '2027' under {tmp_path / RUNS}; see 'll list' for run ids"


def test_state_is_swapped_in_whole_every_step(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "20260101-000000-x-abcd")
    for step in range(1, 6):
        run.write_state({"step": step, "pad": "x" * (100 - step * 10)})
        assert run.read_state()["step"] == step
    spare = run.root / ".state.next"
    if store._EXCHANGE.usable:
        # the previous state is what the spare holds after the swap
        assert json.loads(spare.read_text())["step"] == 4
    leftovers = [p.name for p in run.root.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_state_falls_back_to_temp_and_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store._EXCHANGE, "usable", False)
    run = RunDir.create(tmp_path, "20260101-000000-x-abcd")
    run.write_state({"step": 1})
    run.write_state({"step": 2})
    assert run.read_state()["step"] == 2
    assert not (run.root / ".state.next").exists()


@pytest.mark.parametrize("left", ["file", "link"])
def test_atomic_write_text_replaces_a_left_temp_file_and_unlinks_only_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, left: str
) -> None:
    """A temp file a killed process left (or a planted link) is removed, never written
    through; a write that finds none makes no `unlink` call (one system call a branch's
    result, a child's first state)."""
    target = tmp_path / "result.json"
    unlinked: list[str] = []
    unlink = os.unlink

    def counted(path: str) -> None:
        unlinked.append(path)
        unlink(path)

    monkeypatch.setattr(os, "unlink", counted)
    atomic_write_text(target, "one\n")
    assert unlinked == []
    tmp = tmp_path / f".result.json.{os.getpid()}.tmp"
    victim = tmp_path / "victim"
    victim.write_text("keep")
    if left == "file":
        tmp.write_text("stale")
    else:
        tmp.symlink_to(victim)
    atomic_write_text(target, "two\n")
    assert unlinked == [str(tmp)]
    assert target.read_text() == "two\n"
    assert victim.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json", "victim"]
