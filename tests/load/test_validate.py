"""`ll validate` end to end, in a subprocess: exit codes, formats, and hostile files."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from project import Project, Result
from test_checks import HINTS

from little_loops.cli.validate import validate_files

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
name: good
initial: a
on_error: done
states:
  a: {action: 'true', next: done}
  done: {terminal: true}
"""
JUDGED = GOOD.replace(
    "next: done}",
    "evaluate: {type: llm_structured, prompt: Good?}, route: {success: done, _: done}}",
)
WARNS = GOOD + "  orphan: {terminal: true}\n"
BAD = GOOD.replace("next: done", "next: gone")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in (("good", GOOD), ("warns", WARNS), ("bad", BAD), ("judged", JUDGED)):
        out[name] = tmp_path / f"{name}.yaml"
        out[name].write_text(text)
    return out


def test_valid_file_exits_0_silently(files: dict[str, Path], project: Project) -> None:
    result = project.ll("validate", str(files["good"]), process=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_warnings_pass_unless_strict(files: dict[str, Path], project: Project) -> None:
    result = project.ll("validate", str(files["warns"]), process=True)
    assert result.returncode == 0
    assert result.stdout == (
        f"{files['warns']}:7:3: warning: state 'orphan' cannot be reached from initial state 'a'\n"
    )
    assert project.ll("validate", "--strict", str(files["warns"]), process=True).returncode == 2


def test_errors_exit_2_and_cover_every_file(files: dict[str, Path], project: Project) -> None:
    result = project.ll(
        "validate", str(files["bad"]), str(files["good"]), str(files["warns"]), process=True
    )
    assert result.returncode == 2
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        f"{files['bad']}:5:29: error: state 'a' has 'next' naming unknown state 'gone' "
        "(did you mean 'done'?)",
        f"{files['warns']}:7:3: warning: state 'orphan' cannot be reached from initial state 'a'",
    ]


def test_json_format(files: dict[str, Path], project: Project) -> None:
    result = project.ll("validate", "--format", "json", str(files["bad"]), process=True)
    assert result.returncode == 2
    assert json.loads(result.stdout) == [
        {
            "file": str(files["bad"]),
            "line": 5,
            "col": 29,
            "severity": "error",
            "code": "unknown-target",
            "message": "state 'a' has 'next' naming unknown state 'gone' (did you mean 'done'?)",
        }
    ]
    clean = project.ll("validate", "--format", "json", str(files["good"]), process=True)
    assert (clean.returncode, json.loads(clean.stdout)) == (0, [])


def test_shipped_loops_validate_strictly(project: Project) -> None:
    loops = sorted(str(p) for p in (REPO / "loops").glob("*.yaml"))
    assert loops
    result = project.ll("validate", "--strict", *loops, process=True)
    assert (result.returncode, result.stdout) == (0, "")


# The first loop a newcomer writes: no on_error, no `broken` state (SPEC section 6).
FIRST = """\
name: first
initial: check
states:
  check:
    action: test -f marker
    on_success: done
    on_failure: fix
  fix:
    action: touch marker
    next: check
  done: {terminal: true}
"""


def test_a_first_loop_without_error_routes_is_silent(tmp_path: Path, project: Project) -> None:
    path = tmp_path / "first.yaml"
    path.write_text(FIRST)
    result = project.ll("validate", str(path), process=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_strict_reports_each_verdict_that_would_stop_the_run(
    tmp_path: Path, project: Project
) -> None:
    path = tmp_path / "first.yaml"
    path.write_text(FIRST)
    result = project.ll("validate", "--strict", str(path), process=True)
    assert result.returncode == 2
    hint = "(or a loop-wide 'on_error')"
    assert result.stdout.splitlines() == [
        f"{path}:4:3: warning: state 'check' can give verdict 'error', which nothing routes, so "
        f"the run would stop there (exit 3); add 'on_error: STATE' {hint}",
        f"{path}:4:3: warning: state 'check' can give verdict 'timeout', which nothing routes, "
        f"so the run would stop there (exit 3); add 'on_timeout: STATE' {hint}",
        f"{path}:8:3: warning: state 'fix' can give verdict 'error', which nothing routes, so "
        f"the run would stop there (exit 3); add 'on_error: STATE' {hint}",
        f"{path}:8:3: warning: state 'fix' can give verdict 'failure', which nothing routes, so "
        f"the run would stop there (exit 1); add 'on_failure: STATE' {hint}",
        f"{path}:8:3: warning: state 'fix' can give verdict 'timeout', which nothing routes, "
        f"so the run would stop there (exit 3); add 'on_timeout: STATE' {hint}",
    ]
    # a loop-wide on_error routes every one of them
    covered = FIRST.replace("initial: check\n", "initial: check\non_error: done\n")
    path.write_text(covered)
    assert project.ll("validate", "--strict", str(path), process=True).returncode == 0


def test_strict_finds_nothing_to_add_to_a_paradigms_routes(
    tmp_path: Path, project: Project
) -> None:
    path = tmp_path / "goal.yaml"
    path.write_text("name: g\nparadigm: goal\ngoal: a marker exists\ntools: [test -f m, touch m]\n")
    result = project.ll("validate", "--strict", str(path), process=True)
    assert (result.returncode, result.stdout) == (0, "")


def deep_flow(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


HOSTILE: dict[str, bytes] = {
    "empty": b"",
    "only-comment": b"# nothing here\n",
    "top-list": b"- a\n- b\n",
    "top-scalar": b"just words\n",
    "binary": bytes(range(256)) * 8,
    "nul": b"name: x\x00\n",
    "latin1": "name: caf\u00e9\n".encode("latin-1"),
    "tabs": b"name: x\n\tinitial: a\n",
    "deep-flow": deep_flow(200_000),
    "deep-block": b"- " * 100_000 + b"x\n",
    "deep-mapping": b"".join(b"  " * i + b"k:\n" for i in range(300)),
    "unclosed": b"name: [a, b\n",
    "complex-key": b"? [a]\n: b\n",
    "tags": b"name: !!python/object:os.system ls\n",
    "bad-int": b"name: !!int nope\n",
    "huge-int": b"max_iterations: " + b"9" * 5000 + b"\n",
    "many-docs": b"a: 1\n---\nb: 2\n",
    "states-list": b"name: x\ninitial: a\nstates: [a, b]\n",
    "state-scalar": b"name: x\ninitial: a\nstates: {a: 1}\n",
    "evaluate-list": b"name: x\ninitial: a\nstates: {a: {evaluate: [1]}}\n",
    "of-scalars": b"name: x\ninitial: a\nstates: {a: {evaluate: {type: all, of: [1, x]}}}\n",
    "null-keys": b"~: 1\nnull: 2\n",
    "date": b"name: 2024-01-01\ninitial: a\nstates: {a: {terminal: true}}\n",
    "nan": b"name: x\ninitial: a\ntimeout: .nan\nstates: {a: {terminal: true}}\n",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_content_gives_located_errors_not_tracebacks(tmp_path: Path, case: str) -> None:
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(HOSTILE[case])
    out = io.StringIO()
    code = validate_files([str(path)], strict=False, fmt="json", out=out)
    found = json.loads(out.getvalue())
    assert code == 2
    for d in found:
        assert d["file"] == str(path)
        assert d["line"] >= 1
        assert d["col"] >= 1
        assert "Traceback" not in d["message"]


def test_ten_megabyte_file(tmp_path: Path, project: Project) -> None:
    path = tmp_path / "big.yaml"
    chunk = b"  s: {action: echo hello world, next: s}\n"
    path.write_bytes(b"name: big\ninitial: s\nstates:\n" + chunk * (10_000_000 // len(chunk)))
    result = project.ll("validate", str(path), process=True)
    assert result.returncode == 2
    assert result.stderr == ""
    assert result.stdout == (
        f"{path}:1:1: error: the file is larger than 1 MiB; a loop file is far smaller\n"
    )


def test_deep_nesting_in_a_subprocess_does_not_crash(tmp_path: Path, project: Project) -> None:
    """libyaml's own composer recurses in C and can overflow the stack; ours does not."""
    path = tmp_path / "deep.yaml"
    path.write_bytes(deep_flow(200_000))
    result = project.ll("validate", str(path), process=True)
    # Which of PyYAML's scanner (6.0.4 and later stop at 1,000 levels, in their own words) or our
    # composer (100 levels) stops the file first depends on the PyYAML release: pin our behaviour,
    # not the wording. Exit 2, one line located in the file, nothing on stderr, no traceback.
    assert (result.returncode, result.stderr) == (2, "")
    assert re.fullmatch(rf"{re.escape(str(path))}:1:\d+: error: [^\n]+\n", result.stdout)
    assert "Traceback" not in result.stdout


def test_missing_file_and_directory(tmp_path: Path, project: Project) -> None:
    result = project.ll("validate", str(tmp_path / "nope.yaml"), str(tmp_path), process=True)
    assert result.returncode == 2
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        f"{tmp_path / 'nope.yaml'}:1:1: error: no such file",
        f"{tmp_path}:1:1: error: this is a directory; give the path of a loop file",
    ]


def test_unreadable_file(tmp_path: Path, project: Project) -> None:
    if os.geteuid() == 0:
        # root reads any mode; a FIFO-free way to fail a read is a path through a file
        path = tmp_path / "a-file" / "loop.yaml"
        (tmp_path / "a-file").write_text("x")
        expected = "the file cannot be read: Not a directory"
    else:
        path = tmp_path / "locked.yaml"
        path.write_text(GOOD)
        path.chmod(0)
        expected = "permission denied: the file cannot be read"
    result = project.ll("validate", str(path), process=True)
    assert result.returncode == 2
    assert result.stdout == f"{path}:1:1: error: {expected}\n"


def test_paradigm_file_is_one_clear_line(tmp_path: Path, project: Project) -> None:
    path = tmp_path / "goal.yaml"
    path.write_text(
        "name: g\nparadigm: convergence\ncheck: wc -l\ntoward: 0\nusing: /fix\ntolerance: -1\n"
    )
    result = project.ll("validate", str(path), process=True)
    assert result.returncode == 2
    assert result.stdout == f"{path}:6:12: error: 'tolerance' must be at least 0, not -1\n"


def test_fsm_paradigm_is_the_native_form(tmp_path: Path, project: Project) -> None:
    path = tmp_path / "fsm.yaml"
    path.write_text("paradigm: fsm\n" + GOOD)
    assert project.ll("validate", str(path), process=True).returncode == 0


def test_no_arguments_is_a_usage_error(project: Project) -> None:
    result = project.ll("validate", process=True)
    assert result.returncode == 2
    assert "Missing argument" in result.stderr


def _modules_after(argv: list[str], tmp_path: Path) -> set[str]:
    code = (
        "import sys, runpy\n"
        f"sys.argv = {['ll', *argv]!r}\n"
        "try:\n"
        "    runpy.run_module('little_loops', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"open({str(tmp_path / 'mods')!r}, 'w').write('\\n'.join(sys.modules))\n"
    )
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=False, timeout=60)
    return set((tmp_path / "mods").read_text().split())


@pytest.mark.parametrize(
    "argv", [["--help"], ["--version"], ["validate", "GOOD"], ["validate", "JUDGED"]]
)
def test_fast_start_imports_neither_anthropic_nor_rich(
    tmp_path: Path, files: dict[str, Path], argv: list[str]
) -> None:
    argv = [str(files[a.lower()]) if a.isupper() else a for a in argv]
    loaded = _modules_after(argv, tmp_path)
    assert "little_loops.entry" in loaded
    # These three are answered without click too (little_loops/entry.py).
    heavy = {m.split(".")[0] for m in loaded} & {
        "anthropic",
        "rich",
        "jsonschema",
        "httpx",
        "click",
        "typing",  # the type checker's names are imported under `TYPE_CHECKING = False`
    }
    assert heavy == set()
    if argv[-1].endswith("judged.yaml"):  # the judge's checks ran, its model priced
        assert "little_loops.providers.prices" in loaded


def test_schema_command_prints_the_packaged_schema(project: Project) -> None:
    result = project.ll("schema", process=True)
    assert result.returncode == 0
    assert result.stdout == (REPO / "schemas" / "loop.schema.json").read_text()


# -- authoring hints and one-pass diagnostics, through the real `ll validate` ----------------------


def _validate_here(project: Project, text: str) -> Result:
    # in this process: what is printed and the exit code are under test here, not the process
    # (the tests above start `ll validate` in one of its own)
    (project.path / "loop.yaml").write_text(text)
    return project.ll("validate", "loop.yaml")


@pytest.mark.parametrize("case", sorted(HINTS))
def test_every_hint_is_printed_by_ll_validate(tmp_path: Path, case: str, project: Project) -> None:
    text, expected = HINTS[case]
    result = _validate_here(project, text)
    assert result.stdout.splitlines() == expected
    assert result.stderr == ""
    assert result.returncode == (2 if any(": error: " in line for line in expected) else 0)


def test_a_warning_hint_fails_only_under_strict(tmp_path: Path, project: Project) -> None:
    (tmp_path / "loop.yaml").write_text(HINTS["cut-by-comment-slash"][0])
    assert (
        project.ll("validate", "--strict", "loop.yaml", cwd=tmp_path, process=True).returncode == 2
    )


def test_one_schema_error_and_two_semantic_errors_in_one_run(
    tmp_path: Path, project: Project
) -> None:
    text = """\
name: demo
initial: check
on_error: failed
states:
  check:
    action: make test ${context.target}
    on_success: done
    descripton: run the tests
  fix:
    action: make fix
    next: chekc
  done: {terminal: true}
  failed: {terminal: true, outcome: failure}
"""
    result = _validate_here(project, text)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "loop.yaml:5:3: error: state 'check' can give verdict 'failure' but nothing routes it; "
        "add 'failure: STATE' under 'route:', or a default '_: STATE'",
        "loop.yaml:6:13: error: '${context.target}' in 'action' of state 'check': there is no "
        "context key 'target'; define it under 'context:'",
        "loop.yaml:8:5: error: unknown key 'descripton' in state 'check' (did you mean "
        "'description'?); valid keys: action, action_type, ask, capture, choices, description, "
        "evaluate, fail_fast, for_each, join, loop, max_concurrency, next, on_error, "
        "on_failure, on_maintain, on_success, on_timeout, outcome, parallel, retry, route, "
        "terminal, timeout, with",
        "loop.yaml:11:11: error: state 'fix' has 'next' naming unknown state 'chekc' (did you "
        "mean 'check'?)",
    ]


EXTENDED = """\
name: extended
initial: check
on_error: done
metadata:
  category: ci
  labels: [nightly, lint]
  owner: {team: platform}
x-defaults: &quick {timeout: 30}
states:
  check:
    <<: *quick
    action: echo checked
    x-note: the first state
    evaluate: {type: output_contains, pattern: checked, x-why: any text would do}
    retry: {max_attempts: 2, x-reason: flaky network}
    on_success: done
    on_failure: done
  done: {terminal: true, x-tags: [end]}
llm: {x-budget-owner: platform}
"""


def test_metadata_and_x_keys_validate_and_run(tmp_path: Path, project: Project) -> None:
    path = tmp_path / "extended.yaml"
    path.write_text(EXTENDED)
    checked = project.ll("validate", "--strict", "extended.yaml", cwd=tmp_path, process=True)
    assert (checked.returncode, checked.stdout) == (0, "")
    ran = project.ll("run", "-q", "extended.yaml", cwd=tmp_path, process=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_paradigm_files_take_metadata_and_x_keys_and_compile_them(
    tmp_path: Path, project: Project
) -> None:
    path = tmp_path / "goal.yaml"
    path.write_text(
        "name: greet\nparadigm: goal\ngoal: a greeting exists\n"
        "metadata: {category: demo}\nx-note: kept\n"
        "tools:\n  - test -f .greeting && rm .greeting\n  - touch .greeting\n"
    )
    assert (
        project.ll("validate", "--strict", "goal.yaml", cwd=tmp_path, process=True).returncode == 0
    )
    compiled = project.ll("compile", "goal.yaml", cwd=tmp_path, process=True)
    assert compiled.returncode == 0
    assert "\nmetadata:\n  category: demo\nx-note: kept\n" in compiled.stdout
    assert project.ll("run", "-q", "goal.yaml", cwd=tmp_path, process=True).returncode == 0


UPSTREAM = REPO.parent / "shared" / "upstream-loops"


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="the upstream corpus is not beside the repo")
def test_upstream_loops_get_messages_naming_the_key_to_use(project: Project) -> None:
    result = project.ll("validate", "general-task.yaml", cwd=UPSTREAM, process=True)
    assert result.returncode == 2
    found = result.stdout.splitlines()
    for line in [
        "general-task.yaml:3:1: error: unknown key 'category' at the top level; labels go under "
        "'metadata:' (metadata: {category: harness})",
        "general-task.yaml:7:1: error: unknown key 'max_steps' at the top level; 'max_steps' is "
        "upstream little-loops' name: write 'max_iterations: 500'",
        "general-task.yaml:185:5: error: unknown key 'on_yes' in state 'resume_check'; 'on_yes' "
        "is upstream little-loops' name: write 'on_success: mark_done'",
        "general-task.yaml:186:5: error: unknown key 'on_no' in state 'resume_check'; 'on_no' is "
        "upstream little-loops' name: write 'on_failure: select_step'",
    ]:
        assert line in found


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="the upstream corpus is not beside the repo")
def test_no_upstream_name_gets_a_did_you_mean() -> None:
    import re

    from little_loops.load.loader import try_load

    upstream = {
        "on_yes",
        "on_no",
        "on_partial",
        "on_blocked",
        "on_handoff",
        "max_steps",
        "max_retries",
        "failure",
        "category",
        "visibility",
        "import",
        "fragment",
    }
    seen: set[str] = set()
    files = sorted(UPSTREAM.glob("*.yaml"))
    assert len(files) > 50
    for path in files:
        _, diagnostics = try_load(path, digest=False)
        for d in diagnostics:
            m = re.match(r"unknown key '([^']+)'", d.message)
            if m and m.group(1) in upstream:
                seen.add(m.group(1))
                assert "did you mean" not in d.message, d.format()
            if "action_type" in d.message and "'prompt'" in d.message:
                assert "write 'action_type: slash'" in d.message, d.format()
    assert seen == upstream


def test_a_temperature_the_judge_never_gets_is_a_located_warning(
    project: Project, tmp_path: Path
) -> None:
    project.write(
        "judged.yaml",
        """\
        name: judged
        initial: check
        states:
          check:
            action: "echo ok"
            evaluate: {type: llm_structured, prompt: "Is it ok?", temperature: 0.2}
            route: {success: done, failure: done, blocked: done, partial: done, error: done}
          done: {terminal: true}
        """,
    )
    result = project.ll("validate", "judged.yaml")
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    assert "judged.yaml:6:72: warning: 'evaluate.temperature' of state 'check'" in out
    assert (
        "is not sent to this judge: the Anthropic API refuses sampling parameters. "
        "Remove it, or use an openai:// or ollama:// judge"
    ) in out
