"""Listeners of a real `ll run` are handed typed event records, and the run's events.jsonl is
written byte for byte as before (the wire dict the Emitter builds goes to the log unchanged;
each listener gets its `parse`d record)."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from project import Project
from test_tree import CHILD, GRAND  # the child and grandchild of the three-level tree

from little_loops.record.events import (
    CALLS,
    ENCODE,
    ChildStart,
    LoopComplete,
    RunEvent,
    journal_entry,
)

PARENT = """
name: parent
initial: build
states:
  build:
    action: "echo building; echo warn >&2"
    on_success: call
    on_failure: done
  call:
    loop: child.yaml
    with: {word: top}
    route: {fin: check}
  check:
    action: "exit 3"
    on_success: done
    on_failure: done
  done: {terminal: true}
"""

FLAT = """
name: flat
initial: build
states:
  build:
    action: "echo building; echo warn >&2"
    evaluate: {type: output_contains, pattern: building}
    on_success: check
    on_failure: done
  check:
    action: "exit 3"
    retry: {max_attempts: 2, interval: 0}
    on_success: done
    on_failure: done
  done: {terminal: true}
"""

# The three events.jsonl files `ll run parent.yaml` wrote on main before this change (3a70ec3),
# with the time stamps, run ids, durations and the directory masked.
ON_MAIN = Path(__file__).parent / "data" / "events_on_main.txt"


def _tree(root: Path) -> Path:
    for name, text in (("grand.yaml", GRAND), ("child.yaml", CHILD), ("parent.yaml", PARENT)):
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root / "parent.yaml"


def _masked(root: Path) -> str:
    (run,) = (root / ".loops" / "runs").iterdir()
    out = []
    logs = ("", "sub/0002-call/", "sub/0002-call/sub/0001-inner/")
    for rel in (f"{where}events.jsonl" for where in logs):
        text = _log_text(run / rel)
        text = re.sub(r'"ts":"[^"]*"', '"ts":"T"', text)
        text = re.sub(r"\d{8}-\d{6}-parent-[0-9a-f]{4}", "RUN", text)
        text = re.sub(r'"duration_ms":\d+', '"duration_ms":0', text)
        out += [f"# {rel}\n", text.replace(f"{root}/", "DIR/")]
    return "".join(out)


def _log_text(path: Path) -> str:
    """A run's events as its events.jsonl holds them; for a `loop:` child kept in memory (no
    directory of its own), the lines its journal entry holds: each event's bytes found as
    they are in the journal's line, one a line as a log would hold them."""
    if path.exists():
        return path.read_text(encoding="utf-8")
    entry = journal_entry(path.parent)
    assert entry is not None, path
    raw = next(
        line
        for run in _runs_up(path.parent)
        if (run / CALLS).is_file()
        for line in (run / CALLS).read_text(encoding="utf-8").splitlines()
        if json.loads(line) == entry
    )
    lines = [ENCODE(event) for event in entry["events"]]
    assert all(line in raw for line in lines)  # the bytes written, not re-encoded ones
    return "".join(f"{line}\n" for line in lines)


def _runs_up(child: Path) -> list[Path]:
    return [p for p in child.parents if (p / "state.json").is_file()]


def test_events_jsonl_bytes_are_those_main_wrote(project: Project, tmp_path: Path) -> None:
    _tree(tmp_path)
    done = project.ll("run", "parent.yaml")  # as main was run: the file named relatively
    assert done.returncode == 3, done.stdout + done.stderr
    assert _masked(tmp_path) == ON_MAIN.read_text(encoding="utf-8")


def test_a_listener_of_ll_run_is_handed_typed_records(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terminal renderer of a real `ll run` is wrapped: every event it is handed, the
    child's and grandchild's forwarded ones too, is a typed record with its `path`."""
    from little_loops.report import render

    seen: list[Any] = []
    real = render.make_renderer

    def recording(**options: Any) -> Any:
        inner = real(**options)

        class Recording(type(inner)):  # type: ignore[misc]
            def __call__(self, event: RunEvent) -> None:
                seen.append(event)
                super().__call__(event)

        inner.__class__ = Recording
        return inner

    monkeypatch.setattr(render, "make_renderer", recording)
    done = project.ll("run", _tree(tmp_path))
    assert done.returncode == 3, done.stdout + done.stderr
    assert seen
    assert all(isinstance(event, RunEvent) for event in seen)
    paths = {event.path for event in seen}
    assert paths == {(), ("call",), ("call", "inner")}
    starts = [e for e in seen if isinstance(e, ChildStart)]
    assert [(e.path, e.state, e.file) for e in starts] == [
        ((), "call", "child.yaml"),
        (("call",), "inner", "grand.yaml"),
    ]
    (end,) = [e for e in seen if isinstance(e, LoopComplete) and not e.path]
    assert (end.final_state, end.outcome, end.exit_code) == ("check", "error", 3)
    # the terminal read them as records: its lines are there, the child's indented
    assert "loop child.yaml" in done.stdout
    assert "ll: error at 'check' after 3 steps" in done.stdout


def test_a_listener_gets_the_records_the_log_reads_back(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without secrets, a listener is handed the record the run made (its `ts` and `run_id`
    filled in) instead of the wire form parsed back (issue 27: five parses a step): each is
    equal to what parsing its line of events.jsonl gives."""
    from little_loops.record import events
    from little_loops.record.secrets import secret_env_names

    parsed: list[int] = []
    real_parse = events.parse

    def counted(raw: Any) -> RunEvent:
        parsed.append(1)
        return real_parse(raw)

    seen: list[RunEvent] = []
    monkeypatch.setattr(events, "parse", counted)
    loop = project.write("flat.yaml", FLAT)
    with monkeypatch.context() as patch:
        for name in secret_env_names(os.environ):  # no secret to mask: no redaction
            patch.delenv(name)
        from little_loops.run import runner

        real_init = runner.Runner.__init__

        def listening(self: Any, *args: Any, **kwargs: Any) -> None:
            kwargs["listeners"] = [*kwargs.get("listeners", []), seen.append]
            real_init(self, *args, **kwargs)

        patch.setattr(runner.Runner, "__init__", listening)
        done = project.ll("run", loop, "-q")
    assert done.returncode == 3, done.stdout + done.stderr
    (run,) = (tmp_path / ".loops" / "runs").iterdir()
    lines = (run / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert seen == [real_parse(json.loads(line)) for line in lines]
    assert parsed == []


def test_json_lines_are_the_records_wire_form_byte_for_byte(
    project: Project, tmp_path: Path
) -> None:
    """`ll run --json` prints each record's `to_dict`: the root's lines are the log's lines."""
    done = project.ll("run", _tree(tmp_path), "--json")
    assert done.returncode == 3, done.stderr
    printed = [line for line in done.stdout.splitlines() if '"path":' not in line]
    (run,) = (tmp_path / ".loops" / "runs").iterdir()
    assert printed == (run / "events.jsonl").read_text(encoding="utf-8").splitlines()
    forwarded = [json.loads(line) for line in done.stdout.splitlines() if '"path":' in line]
    assert {tuple(e["path"]) for e in forwarded} == {("call",), ("call", "inner")}
    assert all(list(e)[-1] == "path" for e in forwarded)  # `path` last, as before
