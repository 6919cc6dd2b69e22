"""What state.json keeps for `ll resume` as typed records (`SavedOptions`, the last route
`Routed`): written as before, read back checked, a malformed one refused in one line by the
real `ll`."""

from __future__ import annotations

import json

import pytest
from project import Project

from little_loops.errors import RecordError
from little_loops.model.progress import DEFAULT_CLAUDE_FLAGS, Progress, Routed, SavedOptions

LOOP = """\
name: opts
initial: a
context: {who: nobody}
states:
  a: {action: "echo ${context.who}", next: b}
  b: {action: "exit 1", on_success: done, on_failure: done}
  done: {terminal: true}
"""


def _run(project: Project, *args: str) -> dict[str, object]:
    project.write("opts.yaml", LOOP)
    out = project.ll("run", "opts.yaml", "--set", "who=ann", "--model", "m1", *args)
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = (project.path / ".loops" / "runs").iterdir()
    state: dict[str, object] = json.loads((run / "state.json").read_text(encoding="utf-8"))
    return state


def test_the_options_a_run_saves_read_back_and_write_again_as_they_were(
    project: Project,
) -> None:
    state = _run(project)
    saved = state["options"]
    typed = SavedOptions.from_json(saved, "state.json")
    assert typed.overrides == {"who": "ann"}
    assert typed.model == "m1"
    assert typed.claude_flags == DEFAULT_CLAUDE_FLAGS
    assert json.dumps(typed.to_json()) == json.dumps(saved)


def test_an_older_run_without_claude_flags_resumes_with_the_default() -> None:
    typed = SavedOptions.from_json({"cwd": "/x", "claude": ["claude"]}, "state.json")
    assert typed.claude_flags is None
    assert typed.to_json()["claude_flags"] == list(DEFAULT_CLAUDE_FLAGS)
    assert SavedOptions.from_json({"claude_flags": []}, "s").claude_flags == ()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"overrides": {"who": 3}}, "'options.overrides' should be an object of strings"),
        ({"claude": "claude"}, "'options.claude' should be a list of strings, not a string"),
        ({"cache": "yes"}, "'options.cache' should be true or false, not a string"),
        ({"cwd": 7}, "'options.cwd' should be a string, not the number 7"),
    ],
)
def test_a_malformed_saved_option_is_one_located_error(options: object, said: str) -> None:
    with pytest.raises(RecordError) as caught:
        Progress.from_dict({"options": options}, "/r/state.json")
    assert caught.value.message.startswith(f"/r/state.json: corrupted state file ({said}")


def test_ll_resume_refuses_a_malformed_saved_option_in_one_line(project: Project) -> None:
    project.write("opts.yaml", LOOP.replace('"exit 1"', '"kill -INT $PPID; sleep 5"'))
    project.ll("run", "opts.yaml", "--set", "who=ann", process=True)
    (run,) = (project.path / ".loops" / "runs").iterdir()
    state = json.loads((run / "state.json").read_text(encoding="utf-8"))
    assert state["status"] != "finished"
    state["options"]["claude"] = "claude"
    (run / "state.json").write_text(json.dumps(state), encoding="utf-8")
    out = project.ll("resume", run.name)
    assert out.returncode == 3, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.endswith(
        f"{run / 'state.json'}: corrupted state file ('options.claude' should be a list of "
        "strings, not a string); the run cannot be resumed"
    )


def test_the_last_route_reads_back_and_writes_again_as_it_was(project: Project) -> None:
    project.write("opts.yaml", LOOP.replace('"exit 1"', '"kill -INT $PPID; sleep 5"'))
    project.ll("run", "opts.yaml", process=True)
    (run,) = (project.path / ".loops" / "runs").iterdir()
    state = json.loads((run / "state.json").read_text(encoding="utf-8"))
    saved = state["last_route"]
    assert saved == {"from": "a", "to": "b", "verdict": "success", "via": "next"}
    routed = Routed.from_json(saved, "s")
    assert routed is not None
    assert json.dumps(routed.to_json()) == json.dumps(saved)
    state["last_route"]["to"] = 3
    (run / "state.json").write_text(json.dumps(state), encoding="utf-8")
    out = project.ll("resume", run.name)
    assert out.returncode == 3, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.endswith(
        f"{run / 'state.json'}: corrupted state file ('last_route.to' should be a string, not "
        "the number 3); the run cannot be resumed"
    )
