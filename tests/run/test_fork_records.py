"""A fork's records on disk as typed records (`BranchRecord`, `join_record`, `items_record`):
written byte for byte as before, read back checked, a malformed one named in one line by the
real `ll` and resumable once repaired."""

from __future__ import annotations

import json

import pytest
from project import Project

from little_loops.errors import RecordError
from little_loops.model.fork import (
    BranchRecord,
    Item,
    items_json,
    items_record,
    join_record,
)

FINISHED = (
    '{"output": "a", "stderr": "", "exit_code": 0, "duration_ms": 26, "state": "a", '
    '"outputs": {}, "final_state": "a", "outcome": "success", "run_id": "R/0001-each/a", '
    '"steps": 1, "cost_usd": 0.0, "error": "", "verdict": "success", "key": "a", "index": 1, '
    '"item": "a"}'
)
CANCELLED = (
    '{"verdict": "cancelled", "outcome": "cancelled", "run_id": "R/0001-each/b", "key": "b", '
    '"index": 2, "item": "b"}'
)
READ_BACK = (
    '{"run_id": null, "final_state": "a", "exit_code": null, "verdict": "a", '
    '"outcome": "success", "key": "a", "index": 1, "item": "a", "outputs": {"x": "1"}}'
)
UNSTARTED = '{"verdict": "error", "error": "no such file", "key": "c", "index": 3}'


@pytest.mark.parametrize("text", [FINISHED, CANCELLED, READ_BACK, UNSTARTED, "{}"])
def test_a_branch_record_writes_again_byte_for_byte(text: str) -> None:
    record = BranchRecord.from_json(json.loads(text), "result.json")
    assert json.dumps(record.to_json()) == text


def test_a_changed_key_keeps_its_place_and_a_new_one_goes_last() -> None:
    record = BranchRecord.of(verdict="x", key="a", index=1).with_(verdict="y", item="a")
    assert record.to_json() == {"verdict": "y", "key": "a", "index": 1, "item": "a"}
    assert list(record.to_json()) == ["verdict", "key", "index", "item"]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ([1], "is a list, not a branch record (an object)"),
        ({"outcome": "success"}, "has no 'verdict'"),
        ({"verdict": 7}, "'verdict' is the number 7, not a string"),
        ({"verdict": "x", "index": "1"}, "'index' is a string, not a number"),
        ({"verdict": "x", "exit_code": True}, "'exit_code' is the boolean true, not a number"),
        ({"verdict": "x", "outputs": {"k": 1}}, "'outputs' holds a value that is not a string"),
    ],
)
def test_a_malformed_branch_record_is_one_located_error(data: object, said: str) -> None:
    with pytest.raises(RecordError) as caught:
        BranchRecord.from_json(data, "/r/result.json", need=("verdict",))
    assert caught.value.message == f"/r/result.json: {said}; repair it and run ll resume"


def test_a_join_record_and_an_items_record_read_back_checked() -> None:
    joined = join_record(json.loads(f'{{"a": {FINISHED}, "b": {CANCELLED}, "c": {{}}}}'), "j")
    assert [r.verdict for r in joined.values()] == ["success", "cancelled", None]
    with pytest.raises(RecordError, match=r"^j: branch 'a': 'steps' is a string"):
        join_record({"a": {"steps": "1"}}, "j")
    with pytest.raises(RecordError, match=r"^j: is a list, not the branches' records by key"):
        join_record([], "j")
    items = [Item("a", 1, "a"), Item("b", 2, {"n": 1})]
    assert items_record(items_json(items), "i", 10) == items
    with pytest.raises(RecordError, match=r"^i: two items have the same key; repair it \(or"):
        items_record(items_json([items[0], items[0]]), "i", 10)


TREE = """\
name: tree
initial: each
states:
  each:
    parallel:
      a: {action: "echo a"}
      b: {loop: ask.yaml}
    capture: fork
    on_success: done
    on_failure: done
  done: {action: "echo ${captured.fork.succeeded}", terminal: true}
"""
ASK = """\
name: ask
initial: q
states:
  q: {ask: "Go?", choices: [go], route: {go: ok}}
  ok: {terminal: true}
"""


@pytest.mark.parametrize("bad", ["[1]", '{"verdict": 7}', '{"outcome": "success"}'])
def test_a_malformed_branch_result_stops_the_resume_in_one_line_until_repaired(
    project: Project, bad: str
) -> None:
    project.write("tree.yaml", TREE)
    project.write("ask.yaml", ASK)
    assert project.ll("run", "tree.yaml", "--no-input").returncode == 6
    (run,) = (project.path / ".loops" / "runs").iterdir()
    journal = run / "sub" / "0001-each" / "branches.jsonl"
    [line] = journal.read_text().splitlines()  # the action branch; b waits
    entry = json.loads(line)
    assert entry["result"]["verdict"] == "success"
    entry["result"] = json.loads(bad)
    journal.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    out = project.ll("resume", run.name, "--answer", "go")
    assert out.returncode == 3, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    told = [line for line in out.stdout.splitlines() if f"{journal} (branch 'a'): " in line]
    assert len(told) == 1
    assert told[0].endswith("; repair it and run ll resume")
    journal.write_text("", encoding="utf-8")  # repaired: a branch not in it runs again
    again = project.ll("resume", run.name)
    assert again.returncode == 0, again.stdout + again.stderr
    joined = json.loads((run / "sub" / "0001-each" / "join.json").read_text())
    assert {k: v["verdict"] for k, v in joined.items()} == {"a": "success", "b": "ok"}
