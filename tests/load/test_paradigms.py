"""Paradigm files: compiled to states, checked at their own lines, run end to end for real."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from project import Project

from little_loops.load.composer import compose as _compose
from little_loops.load.loader import (
    compile_file,
    load,
    try_load,
)
from little_loops.load.paradigms import to_yaml
from little_loops.load.schema import (
    schema_issues,
    schema_text,
)
from little_loops.run.runner import (
    Runner,
    RunOptions,
    RunResult,
)

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads(schema_text())
PARADIGMS = ("fsm", "goal", "convergence", "invariants", "imperative")

INVARIANTS = """\
name: inv
paradigm: invariants
max_iterations: 20
finally: rm -rf work && echo cleaned
constraints:
  - name: dir
    check: test -d work
    fix: mkdir work
  - name: file
    check: test -f work/ok
    fix: touch work/ok
"""
GOAL = """\
name: g
paradigm: goal
goal: the marker exists
tools:
  - test -f marker
  - touch marker
"""
CONVERGENCE = """\
name: c
paradigm: convergence
check: cat count 2>/dev/null || echo 10
toward: 0
using: n=$(cat count 2>/dev/null || echo 10); echo $((n - 4)) > count
"""
IMPERATIVE = """\
name: i
paradigm: imperative
steps:
  - echo x >> lines
  - wc -l < lines
until: {type: output_numeric, operator: ge, target: 3}
"""


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run(path: Path) -> RunResult:
    loop = load(path)
    return Runner(loop, RunOptions(base_dir=path.parent), sleep=lambda s: None).run()


def visited(path: Path, result: RunResult) -> list[str]:
    events = path.parent / ".loops" / "runs" / result.run_id / "events.jsonl"
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    return [e["state"] for e in lines if e["event"] == "state_enter"]


def lines(tmp_path: Path, text: str) -> list[str]:
    _, diagnostics = try_load(write(tmp_path, text))
    return [d.format().removeprefix(str(tmp_path) + "/") for d in diagnostics]


# -- each paradigm compiles, validates and runs with real shell actions ------------------------


def test_invariants_fix_then_check_again_from_the_first(tmp_path: Path) -> None:
    path = write(tmp_path, INVARIANTS)
    result = run(path)
    assert result.exit_code == 0
    assert result.final_state == "all_valid"
    assert visited(path, result) == [
        "check_dir",
        "fix_dir",
        "check_dir",
        "check_file",
        "fix_file",
        "check_dir",
        "check_file",
        "all_valid",
    ]
    assert not (tmp_path / "work").exists()  # `finally` ran at the end state


def test_goal_fixes_until_the_check_passes(tmp_path: Path) -> None:
    path = write(tmp_path, GOAL)
    result = run(path)
    assert result.exit_code == 0
    assert visited(path, result) == ["evaluate", "fix", "evaluate", "done"]
    assert (tmp_path / "marker").exists()


def test_goal_routes_a_check_error_to_the_fix(tmp_path: Path) -> None:
    path = write(tmp_path, GOAL.replace("test -f marker", "test -f marker || exit 7"))
    result = run(path)
    assert result.exit_code == 0
    assert visited(path, result) == ["evaluate", "fix", "evaluate", "done"]


def test_convergence_on_a_counter_file(tmp_path: Path) -> None:
    path = write(tmp_path, CONVERGENCE)
    result = run(path)
    assert result.exit_code == 0
    assert result.final_state == "done"
    assert visited(path, result) == ["measure", "apply"] * 3 + ["measure", "done"]
    assert (tmp_path / "count").read_text() == "-2\n"


def test_convergence_that_stops_moving_ends_stalled(tmp_path: Path) -> None:
    path = write(tmp_path, CONVERGENCE.replace("$((n - 4))", "$n"))
    result = run(path)
    assert result.exit_code == 1
    assert visited(path, result) == ["measure", "apply", "measure", "stalled"]


def test_convergence_without_a_number_ends_failed(tmp_path: Path) -> None:
    path = write(tmp_path, CONVERGENCE.replace("cat count 2>/dev/null || echo 10", "echo none"))
    result = run(path)
    assert result.exit_code == 1
    assert result.final_state == "failed"


def test_imperative_steps_until(tmp_path: Path) -> None:
    path = write(tmp_path, IMPERATIVE)
    result = run(path)
    assert result.exit_code == 0
    assert visited(path, result) == ["step_0", "step_1", "check_done"] * 3 + ["done"]


def test_imperative_until_exit_code_reads_the_last_step(tmp_path: Path) -> None:
    text = IMPERATIVE.replace("wc -l < lines", 'test "$(wc -l < lines)" -ge 2')
    path = write(
        tmp_path,
        text.replace("{type: output_numeric, operator: ge, target: 3}", "{type: exit_code}"),
    )
    result = run(path)
    assert result.exit_code == 0
    assert visited(path, result) == ["step_0", "step_1", "check_done"] * 2 + ["done"]


def test_invariants_maintain_restarts_until_the_limit(tmp_path: Path) -> None:
    text = INVARIANTS + "maintain: true\n"
    path = write(tmp_path, text)
    result = run(path)
    assert result.exit_code == 4
    assert visited(path, result).count("all_valid") == 2


@pytest.mark.parametrize("text", [INVARIANTS, GOAL, CONVERGENCE, IMPERATIVE])
def test_every_paradigm_validates_without_warnings(tmp_path: Path, text: str) -> None:
    loop, diagnostics = try_load(write(tmp_path, text))
    assert loop is not None
    assert diagnostics == []


def test_compiled_goal_states(tmp_path: Path) -> None:
    compiled, _ = compile_file(write(tmp_path, GOAL.replace("touch marker", "/ll:fix it")))
    assert compiled is not None
    assert compiled.doc == {
        "name": "g",
        "description": "the marker exists",
        "initial": "evaluate",
        "states": {
            "evaluate": {
                "description": "the marker exists",
                "action": "test -f marker",
                "route": {"success": "done", "failure": "fix", "_error": "fix"},
            },
            "fix": {
                "action": "/ll:fix it",
                "evaluate": {"type": "exit_code"},
                "next": "evaluate",
                "on_failure": "evaluate",
                "on_error": "evaluate",
            },
            "done": {"description": "the goal is met", "terminal": True},
        },
    }


def test_compiled_states_point_at_paradigm_lines(tmp_path: Path) -> None:
    loop = load(write(tmp_path, INVARIANTS))
    assert loop.states["check_file"].pos.line == 10
    assert loop.states["fix_file"].pos.line == 11
    assert loop.states["all_valid"].pos.line == 2


# -- paradigm-level errors point at the paradigm file --------------------------------------------


ERRORS = {
    "unknown-key": (
        GOAL.replace("tools:", "tols:"),
        [
            "p.yaml:1:1: error: the loop is missing required key 'tools'",
            "p.yaml:4:1: error: unknown key 'tols' at the top level (did you mean 'tools'?); "
            "valid keys: action_timeout, backoff, context, description, finally, goal, judges, "
            "keep_runs, llm, max_cost_usd, max_iterations, metadata, name, paradigm, secrets, "
            "shell, timeout, tools, working_dir",
        ],
    ),
    "fsm-key-in-paradigm": (
        GOAL + "initial: evaluate\n",
        [
            "p.yaml:7:1: error: unknown key 'initial' at the top level; valid keys: "
            "action_timeout, backoff, context, description, finally, goal, judges, keep_runs, llm, "
            "max_cost_usd, max_iterations, metadata, name, paradigm, secrets, shell, timeout, "
            "tools, working_dir",
        ],
    ),
    "missing-tools": (
        "name: g\nparadigm: goal\ngoal: x\n",
        ["p.yaml:1:1: error: the loop is missing required key 'tools'"],
    ),
    "three-tools": (
        GOAL + "  - echo three\n",
        ["p.yaml:5:3: error: 'tools' must list at most 2 items, not 3"],
    ),
    "wrong-type": (
        CONVERGENCE + "tolerance: small\n",
        ["p.yaml:6:12: error: 'tolerance' must be a number, not text ('small')"],
    ),
    "bad-direction": (
        CONVERGENCE + "direction: down\n",
        [
            "p.yaml:6:12: error: 'direction' must be one of: minimize, maximize; got 'down'",
        ],
    ),
    "constraint-key": (
        INVARIANTS.replace("    fix: touch work/ok", "    fixx: touch work/ok"),
        [
            "p.yaml:9:5: error: 'constraints[1]' is missing required key 'fix'",
            "p.yaml:11:5: error: unknown key 'fixx' in 'constraints[1]' (did you mean 'fix'?); "
            "valid keys: check, fix, name",
        ],
    ),
    "duplicate-constraint": (
        INVARIANTS.replace("name: file", "name: dir"),
        [
            "p.yaml:9:11: error: constraint name 'dir' is used twice (first at line 6); each "
            "name must be unique, since it names the states check_dir and fix_dir",
        ],
    ),
    "judge-in-until": (
        IMPERATIVE.replace(
            "{type: output_numeric, operator: ge, target: 3}", "{type: llm_structured}"
        ),
        [
            "p.yaml:6:15: error: 'until' cannot be llm_structured: check_done runs no action, so "
            "the judge would see no output; judge the work in a 'goal' loop (a slash CHECK), or "
            "write the loop as states ('ll compile' prints a start)",
        ],
    ),
    "fsm-level-error-in-until": (
        IMPERATIVE.replace(
            "{type: output_numeric, operator: ge, target: 3}",
            "\n  type: output_contains\n  pattern: '(unclosed'",
        ),
        [
            "p.yaml:8:12: error: 'evaluate.pattern' of state 'check_done' is not a valid "
            "regular expression: missing ), unterminated subpattern at position 0; add "
            "'literal: true' to match it as plain text",
        ],
    ),
    "fsm-level-error-in-action": (
        GOAL.replace("touch marker", "touch ${context.nope}"),
        [
            "p.yaml:6:5: error: '${context.nope}' in 'action' of state 'fix': there is no "
            "context key 'nope'; define it under 'context:'",
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_paradigm_errors_point_at_the_paradigm_file(tmp_path: Path, case: str) -> None:
    text, expected = ERRORS[case]
    assert lines(tmp_path, text) == expected


# -- the schema describes paradigm files, and the fast interpreter agrees with jsonschema -------


@pytest.mark.parametrize(
    "text", [INVARIANTS, GOAL, CONVERGENCE, IMPERATIVE] + [t for t, _ in ERRORS.values()]
)
def test_schema_agrees_with_jsonschema_on_paradigm_files(text: str) -> None:
    doc = _compose(text, "x")[0]
    valid = jsonschema.Draft202012Validator(SCHEMA).is_valid(doc)
    assert (schema_issues(doc) == []) is valid


def test_fsm_branch_allows_exactly_the_top_level_keys() -> None:
    assert sorted(SCHEMA["$defs"]["fsm"]["properties"]) == sorted(SCHEMA["properties"])


def test_every_paradigm_key_has_hover_help() -> None:
    for name in ("goal", "convergence", "invariants", "imperative"):
        branch = SCHEMA["$defs"][f"paradigm_{name}"]
        assert branch["description"].startswith(f"paradigm: {name}.")
        own = {k for k, v in branch["properties"].items() if v}
        assert set(branch["properties"]) - own <= set(SCHEMA["properties"])
        assert all(
            branch["properties"][k].get("$ref") or branch["properties"][k].get("description")
            for k in own
        )


# -- ll compile ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [INVARIANTS, GOAL, CONVERGENCE, IMPERATIVE])
def test_compile_output_validates_and_runs_the_same(
    tmp_path: Path, text: str, project: Project
) -> None:
    src = write(tmp_path, text)
    result = project.ll("compile", str(src))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = tmp_path / "out" / "compiled.yaml"
    out.parent.mkdir()
    out.write_text(result.stdout)
    checked = project.ll("validate", "--strict", str(out))
    assert checked.returncode == 0, checked.stdout
    compiled, _ = compile_file(src)
    assert compiled is not None
    assert yaml.safe_load(result.stdout) == compiled.doc
    assert run(out).exit_code == 0


def test_compile_says_where_each_state_came_from(tmp_path: Path, project: Project) -> None:
    result = project.ll("compile", str(write(tmp_path, INVARIANTS)))
    comments = [line.strip() for line in result.stdout.splitlines() if line.startswith("  #")]
    assert comments == [
        "# from constraints[0] 'dir' check (line 7)",
        "# from constraints[0] 'dir' fix (line 8)",
        "# from constraints[1] 'file' check (line 10)",
        "# from constraints[1] 'file' fix (line 11)",
        "# added by 'paradigm: invariants' (line 2)",
    ]
    assert result.stdout.startswith(
        f"# Compiled by `ll compile` from {tmp_path}/p.yaml (paradigm: invariants).\n"
    )


def test_compile_keeps_multiline_actions_readable(tmp_path: Path) -> None:
    compiled, _ = compile_file(
        write(tmp_path, GOAL.replace("  - touch marker", "  - |\n    touch marker\n    echo done"))
    )
    assert compiled is not None
    assert "    action: |\n      touch marker\n      echo done\n" in to_yaml(compiled, "p.yaml")


def test_compile_errors_go_to_stderr_with_the_paradigm_line(
    tmp_path: Path, project: Project
) -> None:
    path = write(tmp_path, GOAL + "  - echo three\n")
    result = project.ll("compile", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"{path}:5:3: error: 'tools' must list at most 2 items, not 3\n"


def test_compile_prints_a_native_file_as_it_is(tmp_path: Path, project: Project) -> None:
    text = "name: n\ninitial: a\nstates:\n  a: {terminal: true}\n"
    result = project.ll("compile", str(write(tmp_path, text)))
    assert (result.returncode, result.stdout) == (0, text)


# -- ll run / ll validate on paradigm files --------------------------------------------------------


def test_ll_validate_and_run_accept_a_paradigm_file(tmp_path: Path, project: Project) -> None:
    path = write(tmp_path, INVARIANTS)
    checked = project.ll("validate", "--strict", str(path))
    assert (checked.returncode, checked.stdout) == (0, "")
    ran = project.ll("run", "-q", str(path), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "success at 'all_valid' after 8 steps" in ran.stdout + ran.stderr


def test_ll_run_reports_a_paradigm_error_at_its_line(tmp_path: Path, project: Project) -> None:
    path = write(tmp_path, CONVERGENCE + "tolerance: -1\n")
    result = project.ll("run", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"{path}:6:12: error: 'tolerance' must be at least 0, not -1\n"


def test_ll_run_stalled_convergence_exits_1(tmp_path: Path, project: Project) -> None:
    path = write(tmp_path, CONVERGENCE.replace("$((n - 4))", "$n"))
    assert project.ll("run", "-q", str(path), cwd=tmp_path).returncode == 1


# -- ll init ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("paradigm", PARADIGMS)
def test_init_writes_a_loop_that_validates_and_runs(
    tmp_path: Path, paradigm: str, project: Project
) -> None:
    made = project.ll("init", "starter", "--paradigm", paradigm, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert made.stdout == (
        f"ll: wrote starter.yaml (paradigm: {paradigm}) and loop.schema.json (for editors); "
        "try: ll run starter.yaml\n"
    )
    path = tmp_path / "starter.yaml"
    text = path.read_text()
    modeline = "# yaml-language-server: $schema="
    assert text.startswith(modeline)
    schema_path = Path(text.splitlines()[0].removeprefix(modeline))
    assert (tmp_path / schema_path).read_text() == schema_text()
    checked = project.ll("validate", "--strict", "starter.yaml", cwd=tmp_path)
    assert (checked.returncode, checked.stdout) == (0, "")
    ran = project.ll("run", "starter.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    leftovers = {p.name for p in tmp_path.iterdir()} - {
        "starter.yaml",
        "loop.schema.json",
        ".loops",
    }
    assert leftovers == set()


def test_init_default_name_is_loop_yaml(tmp_path: Path, project: Project) -> None:
    assert project.ll("init", cwd=tmp_path).returncode == 0
    text = (tmp_path / "loop.yaml").read_text()
    assert "\nname: loop\n" in text
    assert "\ninitial: check\n" in text


def test_init_refuses_to_overwrite_without_force(tmp_path: Path, project: Project) -> None:
    (tmp_path / "loop.yaml").write_text("mine\n")
    refused = project.ll("init", cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr == "ll: error: loop.yaml already exists; pass --force to overwrite it\n"
    assert (tmp_path / "loop.yaml").read_text() == "mine\n"
    assert project.ll("init", "--force", "--paradigm", "goal", cwd=tmp_path).returncode == 0
    assert "paradigm: goal" in (tmp_path / "loop.yaml").read_text()


def test_init_rejects_a_bad_name(tmp_path: Path, project: Project) -> None:
    result = project.ll("init", "my loop", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "ll: error: 'my loop' is not a valid loop name; use letters, digits, '-', '_' and '.'\n"
    )


# -- the shipped example -------------------------------------------------------------------------


def test_shipped_example_is_a_paradigm_loop_with_the_modeline() -> None:
    path = REPO / "loops" / "keep-invariants.yaml"
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=../schemas/loop.schema.json\n")
    assert "\nparadigm: invariants\n" in text
    loop, diagnostics = try_load(path)
    assert loop is not None
    assert diagnostics == []
