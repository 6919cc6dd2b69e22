"""Questions and answers as typed records: written as the run always wrote them, read back
checked, and a malformed one named in one line by the real `ll`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from project import Project

from little_loops.errors import RecordError
from little_loops.model.progress import Progress
from little_loops.record import questions as qs

ASK = """\
name: gate
initial: approve
states:
  approve:
    ask: "Ship it?"
    choices: [ship, hold]
    timeout: 3600
    route: {ship: done, hold: done, timeout: done}
  done: {terminal: true}
"""


def test_a_question_reads_back_what_it_writes_in_the_same_keys() -> None:
    q = qs.Question.new("approve@3", "approve", 3, "Ship it?", ("yes", "no"), 0.0, 60.0)
    data = q.to_json()
    assert list(data) == ["id", "state", "step", "prompt", "choices", "asked_at", "expires_at"]
    assert data["asked_at"] == "1970-01-01T00:00:00.000Z"
    assert data["expires_at"] == "1970-01-01T00:01:00.000Z"
    assert qs.Question.from_json(json.loads(json.dumps(data)), "state.json") == q
    assert not q.expired(59.0)
    assert q.expired(60.0)
    assert q.remaining(45.0) == 15.0


def test_an_answer_reads_back_and_binds_to_one_occurrence() -> None:
    a = qs.answer_record("approve@3", "yes", note=None, by="ann", via="answer", now=0.0)
    assert list(a.to_json()) == ["id", "answer", "note", "by", "via", "at", "asked_at"]
    assert qs.Answer.from_json(a.to_json(), "a.json") == a
    q = qs.Question.new("approve@3", "approve", 3, "?", (), 5.0, None)
    assert a.is_for(q)
    assert not qs.Answer("approve@3", "yes", asked_at="earlier").is_for(q)


@pytest.mark.parametrize(
    ("pending", "said"),
    [
        ({"id": "a@1"}, "'pending' is an object, not a list of questions"),
        (["a@1"], "a pending question is a string, not an object"),
        ([{"id": "a@1", "state": "a", "step": "1"}], "'step' is a string, not a whole number"),
        ([{"id": 3}], "'id' is the number 3, not a string"),
    ],
)
def test_a_malformed_pending_question_is_one_located_error(pending: object, said: str) -> None:
    with pytest.raises(RecordError) as caught:
        Progress.from_dict({"pending": pending}, "/runs/x/state.json")
    assert caught.value.message.startswith(f"/runs/x/state.json: {said}; repair")


def test_expiry_is_a_typed_reply_not_a_marker() -> None:
    reply = qs.Expired("approve@3", "1970-01-01T00:01:00.000Z")
    assert not isinstance(reply, qs.Answer)


def _suspended(project: Project) -> Path:
    project.write("gate.yaml", ASK)
    first = project.ll("run", "gate.yaml", "--no-input")
    assert first.returncode == 6, first.stderr
    (root,) = (project.path / ".loops" / "runs").iterdir()
    return root


def test_ll_answer_and_resume_name_a_malformed_question_in_state_json(project: Project) -> None:
    root = _suspended(project)
    state = json.loads((root / "state.json").read_text(encoding="utf-8"))
    assert [q["id"] for q in state["pending"]] == ["approve@1"]
    state["pending"][0]["choices"] = "yes"
    (root / "state.json").write_text(json.dumps(state), encoding="utf-8")
    for args in (("answer", root.name, "ship"), ("resume", root.name, "--answer", "ship")):
        out = project.ll(*args)
        assert out.returncode == 3, out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert f"{root / 'state.json'}: the choices of question 'approve@1' are not a list" in line
        assert "Traceback" not in out.stderr


def test_a_malformed_answer_file_is_named_when_the_run_resumes(project: Project) -> None:
    root = _suspended(project)
    answers = root / "answers"
    answers.mkdir()
    (answers / "approve@1.json").write_text('{"id": "approve@1", "answer": 7}\n', "utf-8")
    out = project.ll("resume", root.name)
    assert out.returncode == 3, out.stdout + out.stderr
    said = f"{answers / 'approve@1.json'}: 'answer' is the number 7, not a string; repair"
    assert [line for line in out.stdout.splitlines() if said in line]
    assert "Traceback" not in out.stdout + out.stderr
    assert f"resume with: ll resume {root.name}" in out.stderr
