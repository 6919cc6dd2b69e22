"""Step outputs out of state.json: `captured` and `prev` live in outputs.dat, state.json points.

state.json is rewritten every step, so it must not grow with what steps captured; the records
are written once, read back on resume, and runs recorded with inline records still resume.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from project import Project

from little_loops.load.loader import load
from little_loops.record import outputs
from little_loops.record.events import ENCODE, RunEvent
from little_loops.record.store import RunDir
from little_loops.run.resume import prepare_resume
from little_loops.run.runner import (
    Runner,
    RunOptions,
)

MIB = 1 << 20

BIG = f"""\
name: big
initial: a
max_iterations: 6
on_max_iterations: count
states:
  a:
    action: head -c {MIB} /dev/zero | tr '\\0' a
    capture: a
    next: b
  b:
    action: head -c {MIB} /dev/zero | tr '\\0' b
    capture: b
    next: a
  count:
    action: printf %s ${{captured.a.output}} | wc -c
    capture: n
    next: done
  done:
    terminal: true
"""

STEPS = """\
name: steps
initial: a
states:
  a:
    action: echo first
    capture: x
    next: b
  b:
    action: echo second
    next: c
  c:
    action: echo "x=${captured.x.output} prev=${prev.output}"
    capture: c
    next: done
  done:
    terminal: true
"""


def write(tmp_path: Path, text: str, name: str = "loop.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def only_run(base: Path) -> Path:
    (run,) = (base / ".loops" / "runs").iterdir()
    return run


def kept(run: Path) -> dict[str, Any]:
    return outputs.resolve(run, json.loads((run / "state.json").read_text()))


def interrupt_at(step: int) -> Any:
    def listener(event: RunEvent) -> None:
        if event.name == "state_enter" and event.step == step:
            raise KeyboardInterrupt

    return listener


def test_state_json_stays_small_with_large_captures(tmp_path: Path, project: Project) -> None:
    write(tmp_path, BIG)
    proc = project.ll("run", "loop.yaml", "-q", process=True)
    assert proc.returncode == 4, proc.stderr  # max_iterations, after `count`
    run = only_run(tmp_path)
    assert (run / "state.json").stat().st_size < 64 * 1024
    records = kept(run)
    assert len(records["captured"]["a"]["output"]) == MIB
    assert records["captured"]["b"]["output"] == "b" * MIB
    assert records["captured"]["n"]["output"].strip() == str(MIB)
    # Each step's output written once: six steps of 1 MiB in the run's log, where the
    # records point, not copied again into outputs.dat.
    assert 6 * MIB < (run / "steps.log").stat().st_size < 7 * MIB
    assert (run / outputs.NAME).stat().st_size < 4096


def test_an_interrupted_run_reads_its_captures_back(tmp_path: Path) -> None:
    loop = load(write(tmp_path, STEPS))
    options = RunOptions(base_dir=tmp_path)
    first = Runner(loop, options, listeners=[interrupt_at(3)]).run()
    assert (first.outcome, first.steps) == ("interrupted", 2)
    loop, options, progress, run_dir = prepare_resume(tmp_path, first.run_id)
    runner = Runner(loop, options, progress=progress, run_dir=run_dir)
    assert runner.progress.captured["x"]["output"] == "first"
    assert runner.progress.prev["output"] == "second"
    assert "confidence" not in runner.progress.prev  # `prev` is the record without the verdict's
    result = runner.run()
    assert result.outcome == "success"
    assert kept(result.run_dir)["captured"]["c"]["output"] == "x=first prev=second"


def test_a_run_recorded_with_inline_captures_still_resumes(
    tmp_path: Path, project: Project
) -> None:
    first = Runner(
        load(write(tmp_path, STEPS)), RunOptions(base_dir=tmp_path), listeners=[interrupt_at(3)]
    ).run()
    # As an older ll left it: the records inside state.json, no outputs.dat.
    run_dir = RunDir.open(tmp_path, first.run_id)
    state = run_dir.read_state()
    state.update(outputs.resolve(run_dir.root, state))
    state["version"] = 1  # the format before outputs.dat
    run_dir.state_path.write_text(json.dumps(state), encoding="utf-8")
    (run_dir.root / outputs.NAME).unlink()
    proc = project.ll("resume", first.run_id, "-q", process=True)
    assert proc.returncode == 0, proc.stderr
    state = json.loads(run_dir.state_path.read_text())
    assert all(outputs.is_ref(v) for v in state["captured"].values())
    assert kept(run_dir.root)["captured"]["c"]["output"] == "x=first prev=second"


def test_a_damaged_outputs_file_is_one_clear_line(tmp_path: Path, project: Project) -> None:
    first = Runner(
        load(write(tmp_path, STEPS)), RunOptions(base_dir=tmp_path), listeners=[interrupt_at(3)]
    ).run()
    (first.run_dir / outputs.NAME).write_text("")
    proc = project.ll("resume", first.run_id, "-q", process=True)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "outputs.dat: no step output at offset" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    # The failed start let go of the loop: a new run of it starts.
    assert project.ll("run", "loop.yaml", "-q", process=True).returncode == 0


WHERE = """\
name: where
initial: a
states:
  a:
    action: {action}
    capture: a
    next: done
  done:
    terminal: true
"""


@pytest.mark.parametrize(
    ("action", "env", "output", "in_log"),
    [
        # stdout alone, whole: the record points at its bytes in steps.log
        ("printf 'hello\\nworld\\n\\n'", {}, "hello\nworld", True),
        ("printf 'caf\\303\\251'", {}, "caf\u00e9", True),
        # stderr between two pieces of stdout: the log's bytes are not the output's
        ("printf out; sleep 0.2; printf err >&2; sleep 0.2; printf more", {}, "outmore", False),
        # not UTF-8: the output is the text decoded with replacement, kept in the record
        ("printf 'bad\\377'", {}, "bad\ufffd", False),
        # the log was cut: the output is whole only in the record
        ("printf 0123456789", {"LL_MAX_LOG_BYTES": "4"}, "0123456789", False),
    ],
)
def test_a_steps_output_is_written_once_where_the_log_holds_it(
    tmp_path: Path,
    project: Project,
    action: str,
    env: dict[str, str | None],
    output: str,
    in_log: bool,
) -> None:
    """Issue 27: a printing step wrote its output to steps.log and again to outputs.dat.
    Where the log holds stdout whole and as read, the record points there instead."""
    write(tmp_path, WHERE.format(action=json.dumps(action)))
    proc = project.ll("run", "loop.yaml", "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    run = only_run(tmp_path)
    assert kept(run)["captured"]["a"]["output"] == output
    data = (run / outputs.NAME).read_bytes()
    assert (b'"output_at":' in data) is in_log
    if in_log:
        assert output.encode() not in data
        assert (run / "steps.log").read_bytes().count(output.encode()) == 1


def test_a_truncated_log_under_an_output_record_is_one_clear_line(
    tmp_path: Path, project: Project
) -> None:
    first = Runner(
        load(write(tmp_path, STEPS)), RunOptions(base_dir=tmp_path), listeners=[interrupt_at(3)]
    ).run()
    assert b'"output_at":' in (first.run_dir / outputs.NAME).read_bytes()
    (first.run_dir / "steps.log").write_bytes(b"")
    proc = project.ll("resume", first.run_id, "-q", process=True)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "steps.log: the output that the step record at offset" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


_TEXT = st.text(max_size=8)  # lone surrogates included: not UTF-8, the slow path's
_ANY = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | _TEXT


@settings(max_examples=200)
@given(
    values=st.fixed_dictionaries(
        {
            "exit_code": st.none() | st.integers(-300, 300),
            "duration_ms": st.integers(0, 10**9),
            "state": _TEXT,
            "verdict": _TEXT,
            "confidence": st.none() | st.floats(0, 1),
            "reason": st.none() | _TEXT,
        }
    ),
    odd=st.none() | st.tuples(st.sampled_from(list(outputs._STEP_FIELDS[2:])), _ANY),
    in_log=st.none() | st.tuples(st.integers(0, 2**40), st.integers(0, 2**20)),
    extra=st.booleans(),
)
def test_a_steps_record_line_is_what_the_encoder_gives_its_fields(
    tmp_path_factory: pytest.TempPathFactory,
    values: dict[str, Any],
    odd: tuple[str, Any] | None,
    in_log: tuple[int, int] | None,
    extra: bool,
) -> None:
    """A step's record is written as one f-string where its fields hold what a step gives
    them: the line the encoder makes of its fields, whatever they hold, and the record
    reads back. `odd`: a field given a value of another type (a bool, a float...)."""
    # In a step's order (hypothesis draws the fields in any order).
    record: dict[str, Any] = {"output": "out", "stderr": "err"}
    record.update((key, values[key]) for key in outputs._STEP_FIELDS[2:])
    if odd is not None:
        record[odd[0]] = odd[1]
    if extra:
        record["output_cut"] = True  # another shape: the encoder's
    sizes = [0 if in_log else 3, 3]
    made = outputs._step_line(record, in_log, sizes)
    if made is not None:
        assert made == ENCODE(outputs._meta(record, in_log, sizes))
    store = outputs.Outputs(tmp_path_factory.mktemp("outputs"))
    assert store.read(store.append(record)) == record


def test_a_steps_record_takes_the_quick_line() -> None:
    record = {
        "output": "x", "stderr": "", "exit_code": 0, "duration_ms": 3, "state": "say",
        "verdict": "success", "confidence": None, "reason": None,
    }  # fmt: skip
    line = outputs._step_line(record, (10, 1), [0, 0])
    assert line == (
        '{"exit_code":0,"duration_ms":3,"state":"say","verdict":"success","confidence":null,'
        '"reason":null,"output_at":[10,1],"raw_sizes":[0,0]}'
    )


def test_the_record_after_a_state_s_records_is_found_whole_or_not_at_all(tmp_path: Path) -> None:
    """`Outputs.following(records_end(state))`: the record of a step written after the state
    (resume reads it for a run cut off after its end); a torn or missing one is None."""
    store = outputs.Outputs(tmp_path)
    assert store.following(0) is None  # no file
    first = store.append({"output": "one", "stderr": "", "state": "a"})
    second = store.append({"output": "x" * 100_000, "stderr": "e\n", "state": "b"})
    store.close()
    state = {"prev": first, "captured": {"kept": first}}
    assert outputs.records_end(state) == first["ref"][1]
    assert outputs.records_end({"prev": {"output": "inline"}, "captured": {}}) == 0
    assert store.following(0) == first
    assert store.following(outputs.records_end(state)) == second
    assert store.read(second)["state"] == "b"
    assert store.following(sum(second["ref"])) is None  # nothing after
    with store.path.open("r+b") as fh:  # the second record torn by a crash
        fh.truncate(sum(second["ref"]) - 10)
    assert store.following(first["ref"][1]) is None
    assert store.following(3) is None  # not where a record starts
