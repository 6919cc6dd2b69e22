"""`ll migrate` (issue 16): upstream little-loops files converted with their behaviour, notes
per file, exit codes; `ll validate`'s upstream hint; `${...:default=}` placeholders. The corpus
tests read ../shared/upstream-loops when it exists (never copied into the project)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from project import Project, Result, shared_dir

from little_loops.load.loader import try_load
from little_loops.migrate.convert import migrate
from little_loops.templates.interpolate import (
    Placeholder,
    render,
    scan,
)

LL = [sys.executable, "-m", "little_loops"]
REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "upstream-loops"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def path_of(proc: Result) -> list[str]:
    """The states a run visited, from the `path:` line `ll run` prints."""
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.strip().startswith("path:"):
            return [s.strip() for s in line.split("path:", 1)[1].split("->")]
    raise AssertionError(f"no path line in:\n{proc.stdout}\n{proc.stderr}")


def migrated(project: Project, text: str) -> Path:
    """An upstream file converted by the real `ll migrate` (stdout), ready to run."""
    source = write(project.path / "upstream" / "loop.yaml", text)
    proc = project.ll("migrate", source)
    assert proc.returncode == 0, proc.stderr
    return write(project.path / "loop.yaml", proc.stdout)


# -- 1. the command: printing, notes, exit codes ----------------------------------------------

UPSTREAM = """
    name: tidy
    category: maintenance
    description: Lint, fix, report.
    initial: lint
    max_steps: 7
    scope: ["src/"]
    states:
      lint:
        # keep me: why this check comes first
        action: "true"
        action_type: shell
        on_yes: done
        on_no: fix
      fix:
        action_type: prompt
        action: Fix the lint errors in src/.
        next: lint
      done:
        terminal: true
      broken:
        terminal: true
        failure: true
"""


def test_migrate_prints_the_loop_with_its_comments_and_notes_on_stderr(
    tmp_path: Path, project: Project
) -> None:
    source = write(tmp_path / "tidy.yaml", UPSTREAM)
    proc = project.ll("migrate", source, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "# keep me: why this check comes first" in out
    for expected in (
        "on_success: done",
        "on_failure: fix",
        "max_iterations: 7",
        "action_type: slash",
        "outcome: failure",
        "category: maintenance",  # under metadata:
    ):
        assert expected in out, expected
    assert "on_yes" not in out
    assert "max_steps" not in out
    assert "line 6" in proc.stderr
    assert "`scope`" in proc.stderr
    assert "lines 12, 13 · **carried**: `on_yes`/`on_no`" in proc.stderr
    converted = write(tmp_path / "out.yaml", out)
    assert project.ll("validate", converted, cwd=tmp_path).returncode == 0


def test_exit_codes_hand_work_and_unreadable_never_a_traceback(
    tmp_path: Path, project: Project
) -> None:
    hand = write(
        tmp_path / "hand.yaml",
        """
        name: hand
        initial: score
        states:
          score:
            action: "true"
            action_type: shell
            evaluate: {type: house_scorer}
            on_yes: done
            on_no: done
          done: {terminal: true}
        """,
    )
    proc = project.ll("migrate", hand, cwd=tmp_path)
    assert proc.returncode == 1
    assert "evaluator 'house_scorer' has no equivalent" in proc.stderr
    bad = write(tmp_path / "bad.yaml", "name: [unclosed\n")
    for args in ([bad], [tmp_path / "missing.yaml"], [hand, bad, "--out", tmp_path / "o"]):
        proc = project.ll("migrate", *args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr + proc.stdout
        assert proc.stderr.startswith("ll: ")
    assert re.search(
        r"bad\.yaml:\d+: not valid YAML", project.ll("migrate", bad, cwd=tmp_path).stderr
    )
    odd = write(
        tmp_path / "odd.yaml",
        """
        name: odd
        input_key: [topic]
        initial: a
        states:
          a: [1, 2]
          b: {route: [x], on_yes: {c: 1}, evaluate: {type: classify}}
        """,
    )
    proc = project.ll("migrate", odd, cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    before = hand.read_text()
    proc = project.ll("migrate", hand, "--out", tmp_path, cwd=tmp_path)  # the sources' own folder
    assert proc.returncode == 2
    assert "--out would overwrite" in proc.stderr
    assert hand.read_text() == before


def test_ll_help_and_validate_do_not_load_ruamel(tmp_path: Path) -> None:
    good = write(tmp_path / "g.yaml", "name: g\ninitial: a\nstates:\n  a: {terminal: true}\n")
    for argv in (["--help"], ["validate", str(good)]):
        code = (
            "import sys, runpy\n"
            f"sys.argv = {['ll', *argv]!r}\n"
            "try:\n    runpy.run_module('little_loops', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('RUAMEL' if any(m.startswith('ruamel') for m in sys.modules) else 'NONE')\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert proc.stdout.strip().endswith("NONE"), argv


# -- 2. behaviour carried: runs of converted files go where upstream went ----------------------


def test_a_next_state_moves_on_whatever_its_step_gave_as_upstream(
    tmp_path: Path, project: Project
) -> None:
    loop = migrated(
        project,
        """
        name: mover
        initial: first
        states:
          first:
            action: "exit 1"
            action_type: shell
            next: second
          second:
            action: "exit 3"
            action_type: shell
            next: done
          done: {terminal: true}
        """,
    )
    proc = project.ll("run", loop, cwd=tmp_path)
    assert path_of(proc) == ["first", "second", "done"]
    assert proc.returncode == 0


def test_default_route_catches_errors_and_a_terminal_named_failed_fails(
    tmp_path: Path, project: Project
) -> None:
    loop = migrated(
        project,
        """
        name: catcher
        initial: probe
        states:
          probe:
            action: "exit 2"
            action_type: shell
            evaluate: {type: exit_code}
            route: {yes: done, _: failed}
          done: {terminal: true}
          failed: {terminal: true}
        """,
    )
    proc = project.ll("run", loop, cwd=tmp_path)
    assert path_of(proc) == ["probe", "failed"]
    assert proc.returncode == 1


def test_max_retries_over_a_route_to_itself_becomes_retry(tmp_path: Path, project: Project) -> None:
    loop = migrated(
        project,
        """
        name: flaky
        initial: call
        states:
          call:
            action: "echo try >> tries.txt; exit 1"
            action_type: shell
            on_yes: done
            on_no: $current
            max_retries: 2
            on_retry_exhausted: gave_up
          done: {terminal: true}
          gave_up: {terminal: true, failure: true}
        """,
    )
    assert "max_attempts: 3" in loop.read_text()
    proc = project.ll("run", loop, cwd=tmp_path)
    assert path_of(proc) == ["call", "gave_up"]
    assert (tmp_path / "tries.txt").read_text().count("try") == 3
    assert proc.returncode == 1


def test_diff_stall_becomes_a_shell_check_that_stops_when_the_diff_stops(
    tmp_path: Path, project: Project
) -> None:
    loop = migrated(
        project,
        """
        name: stall
        initial: work
        states:
          work:
            action: "true"
            action_type: shell
            next: check
          check:
            action: "echo checking"
            action_type: shell
            evaluate: {type: diff_stall, max_stall: 1}
            on_yes: work
            on_no: done
          done: {terminal: true}
        """,
    )
    proc = project.ll("run", loop, cwd=tmp_path)
    assert path_of(proc) == ["work", "check", "work", "check", "done"]
    assert proc.returncode == 0


def test_classify_becomes_one_check_per_route_key(tmp_path: Path, project: Project) -> None:
    loop = migrated(
        project,
        """
        name: sorter
        initial: pick
        max_steps: 3
        states:
          pick:
            action: "printf 'thinking\\nBETA\\n'"
            action_type: shell
            evaluate: {type: classify}
            route: {ALPHA: a, BETA: b, _: other}
          a: {terminal: true}
          b: {action: echo picked beta, terminal: true}
          other: {terminal: true, failure: true}
        """,
    )
    assert "max_iterations: 9" in loop.read_text()  # two added checks per upstream step
    proc = project.ll("run", loop, cwd=tmp_path)
    assert path_of(proc) == ["pick", "pick_alpha", "pick_beta", "b"]
    assert "picked beta" not in proc.stdout + proc.stderr  # upstream never ran a terminal action
    assert proc.returncode == 0


def test_fragments_and_sub_loops_are_converted_together_with_notes(
    tmp_path: Path, project: Project
) -> None:
    up = tmp_path / "up"
    write(
        up / "lib" / "common.yaml",
        """
        fragments:
          exit_gate:
            action_type: shell
            evaluate: {type: exit_code}
          announce:
            parameters:
              word: {type: string, required: true}
            action: echo "${param.word}"
            action_type: shell
        """,
    )
    write(
        up / "oracles" / "child.yaml",
        """
        name: child
        parameters:
          word: {type: string, required: true}
        initial: say
        states:
          say:
            action: echo "${context.word}" | tee "${context.run_dir}/said.txt"
            action_type: shell
            capture: said
            next: done
          done: {terminal: true}
        """,
    )
    parent = write(
        up / "parent.yaml",
        """
        name: parent
        import: [lib/common.yaml]
        initial: check
        states:
          check:
            fragment: exit_gate
            action: "true"
            on_yes: hello
            on_no: failed
          hello:
            fragment: announce
            with: {word: starting}
            next: call
          call:
            loop: oracles/child
            with: {word: hello}
            on_success: report
            on_failure: failed
          report:
            action: echo "child said ${captured.call.said.output}"
            action_type: shell
            next: end
          end: {terminal: true}
          failed: {terminal: true}
        """,
    )
    out = tmp_path / "out"
    proc = project.ll("migrate", parent, "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stderr, (out / "MIGRATION-NOTES.md").read_text())
    assert (out / "oracles" / "child.yaml").is_file()
    assert not (out / "lib").exists()
    notes = (out / "MIGRATION-NOTES.md").read_text()
    assert "## parent.yaml (converted)" in notes
    assert "## oracles/child.yaml (converted)" in notes
    assert "fragment 'exit_gate' copied" in notes
    assert "`${context.run_dir}` is `${loop.run_dir}` here" in notes
    assert "lines 8, 9 · **carried**: `on_yes`/`on_no` are `on_success`/`on_failure`" in notes
    converted = (out / "parent.yaml").read_text()
    assert "loop: oracles/child.yaml" in converted
    assert 'echo "starting"' in converted
    assert project.ll("validate", out / "parent.yaml", cwd=tmp_path).returncode == 0
    run = project.ll("run", out / "parent.yaml", cwd=tmp_path)
    assert path_of(run) == ["check", "hello", "call", "report", "end"], run.stderr
    assert "child said hello" in run.stdout + run.stderr
    assert run.returncode == 0


def test_a_library_imported_by_many_loops_is_parsed_once_and_an_edit_is_seen(
    tmp_path: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ll migrate` of a folder whose loops all import `lib/common.yaml` parses the library
    once (ruamel.yaml's parser is the slow part of a migration), and never keeps a stale one."""
    from little_loops.migrate import expand

    library = "fragments:\n  greet:\n    action: echo WORD\n    action_type: shell\n"
    lib = write(tmp_path / "up" / "lib" / "common.yaml", library.replace("WORD", "hello"))
    loops = [
        write(
            tmp_path / "up" / f"l{i}.yaml",
            f"""
            name: l{i}
            import: [lib/common.yaml]
            initial: say
            states:
              say: {{fragment: greet, next: done}}
              done: {{terminal: true}}
            """,
        )
        for i in range(3)
    ]
    parsed: list[str] = []
    real = expand.yaml_rt

    def counting() -> Any:
        parser = real()
        load = parser.load

        def counted(text: str) -> Any:
            parsed.append(text)
            return load(text)

        parser.load = counted  # type: ignore[method-assign,assignment]
        return parser

    monkeypatch.setattr(expand, "yaml_rt", counting)
    out = tmp_path / "out"
    proc = project.ll("migrate", *loops, "--out", out)
    assert proc.returncode == 0, proc.stderr
    for loop in loops:
        assert "action: echo hello" in (out / loop.name).read_text()
    assert parsed.count(lib.read_text()) == 1
    assert len(parsed) - parsed.count(lib.read_text()) == 3  # each loop once
    lib.write_text(library.replace("WORD", "goodbye"), encoding="utf-8")
    again = project.ll("migrate", loops[0])
    assert again.returncode == 0, again.stderr
    assert "action: echo goodbye" in again.stdout


# -- 3. `ll validate` on an unconverted upstream file -------------------------------------------


def test_validate_says_once_at_the_top_that_a_file_is_upstreams(
    tmp_path: Path, project: Project
) -> None:
    source = write(tmp_path / "tidy.yaml", UPSTREAM)
    proc = project.ll("validate", source, cwd=tmp_path)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 2
    hint = (
        f"{source}: this looks like an upstream little-loops file; "
        f"`ll migrate {source}` converts it"
    )
    assert lines[0] == hint
    assert proc.stdout.count("looks like an upstream") == 1
    assert all(re.match(rf"{re.escape(str(source))}:\d+:\d+: ", line) for line in lines[1:])
    native = write(
        tmp_path / "native.yaml",
        "name: n\ninitial: a\nstates:\n  a: {action: 'true', on_yes: a}\n",
    )
    assert "looks like an upstream" not in project.ll("validate", native, cwd=tmp_path).stdout


# -- 4. `${name:default=TEXT}` placeholders ---------------------------------------------------


def test_default_placeholders_parse_and_render() -> None:
    (part,) = [p for p in scan("a ${context.mode:default=fast lane} b") if not isinstance(p, str)]
    assert isinstance(part, Placeholder)
    assert part.default == "fast lane"
    scope = {"context": {"set": "x", "empty": ""}, "captured": {}}
    assert render("${context.mode:default=fast}", scope, shell=False) == "fast"
    assert render("${context.empty:default=fast}", scope, shell=False) == "fast"
    assert render("${context.set:default=fast}", scope, shell=False) == "x"
    assert render("${captured.n.output:default=}", scope, shell=True) == "''"  # an empty word
    assert render("echo ${captured.n.output|q:default=a b}", scope, shell=True) == "echo 'a b'"


def test_default_placeholders_through_ll_run(tmp_path: Path, project: Project) -> None:
    loop = write(
        tmp_path / "d.yaml",
        """
        name: defaults
        initial: first
        context: {mode: ""}
        states:
          first:
            action: echo "before=${captured.first.output:default=nothing}"
            capture: first
            next: last
          last:
            action: echo "mode=${context.mode:default=fast} prev=${captured.first.output}"
            terminal: true
        """,
    )
    assert project.ll("validate", loop, cwd=tmp_path).returncode == 0
    proc = project.ll("run", loop, cwd=tmp_path)
    assert "mode=fast prev=before=nothing" in proc.stdout + proc.stderr
    proc = project.ll("run", loop, "--set", "mode=slow", cwd=tmp_path)
    assert "mode=slow" in proc.stdout + proc.stderr


# -- 5. the corpus -------------------------------------------------------------------------------

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/upstream-loops absent")


def _corpus_loops() -> list[Path]:
    return sorted(CORPUS.glob("*.yaml")) + sorted(CORPUS.glob("oracles/*.yaml"))


@pytest.fixture(scope="module")
def corpus_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # about ten CPU seconds: once a session, for every xdist worker (what `ll migrate` said is
    # kept beside the output, for each worker to check)
    with shared_dir(tmp_path_factory, "corpus") as (out, first):
        said = out.with_name("corpus.said.json")
        if first:
            files = [*_corpus_loops(), *sorted(CORPUS.glob("lib/*.yaml"))]
            proc = Project(out).ll("migrate", *files, "--out", out)
            said.write_text(json.dumps([proc.returncode, proc.stdout, proc.stderr]))
        code, stdout, stderr = json.loads(said.read_text())
    assert "Traceback" not in stdout + stderr
    assert code == 1, stderr  # some files need hand work; none is unreadable
    return out


@needs_corpus
@pytest.mark.slow
def test_corpus_at_least_90_percent_validate_after_migration(corpus_out: Path) -> None:
    loops = _corpus_loops()
    valid = [
        f
        for f in loops
        if not any(
            d.severity == "error"
            for d in try_load(corpus_out / f.relative_to(CORPUS), digest=False)[1]
        )
    ]
    print(f"corpus: {len(valid)}/{len(loops)} valid after migration")
    assert len(valid) >= 0.9 * len(loops)
    notes = (corpus_out / "MIGRATION-NOTES.md").read_text()
    assert notes.count("\n## ") == len(loops) + len(list(CORPUS.glob("lib/*.yaml")))


def _corpus_files() -> list[Path]:
    return [*_corpus_loops(), *sorted(CORPUS.glob("lib/*.yaml"))]


@needs_corpus
@pytest.mark.slow
def test_the_corpus_is_there_to_convert() -> None:
    assert len(_corpus_files()) >= 100


# One test per file (each a fraction of a second, ~40 s in all): xdist spreads them.
@needs_corpus
@pytest.mark.slow
@pytest.mark.parametrize("file", _corpus_files(), ids=lambda f: str(f.relative_to(CORPUS)))
def test_no_corpus_file_makes_migrate_raise(file: Path) -> None:
    result = migrate([file], None)  # one file at a time, as `ll migrate FILE` does
    assert result.files, file
    assert result.files[0].text, file


@needs_corpus
@pytest.mark.slow
@pytest.mark.parametrize(
    ("loop", "args", "upstream_path", "code"),
    [
        # a multi-line score is not a number upstream either: its on_error goes to `failed`
        ("rl-rlhf.yaml", [], ["generate", "score", "failed"], 1),
        # without `previous`, convergence never says `stall` upstream: exploit from then on
        # (as upstream's ll-loop ran it, tests/migrate/equiv/expected.json)
        (
            "rl-bandit.yaml",
            ["--max-iterations", "9"],  # 6 upstream steps and 3 `reward_output` checks
            ["explore", "reward", "exploit", "reward", "exploit", "reward"],
            4,
        ),
        # "When all six command fields are null/empty, the oracle emits GATE_SKIP ... done"
        (
            "oracles/code-run-gate.yaml",
            ["--set", "run_dir=RUN", "--set", "issue_id=X-1"],
            [
                "resolve_commands",
                "run_build",
                "run_test",
                "run_typecheck",
                "run_lint",
                "service_health",
                "aggregate",
                "done",
            ],
            0,
        ),
    ],
)
def test_pure_shell_corpus_loops_run_the_path_upstream_documents(
    corpus_out: Path,
    tmp_path: Path,
    loop: str,
    args: list[str],
    upstream_path: list[str],
    code: int,
    project: Project,
) -> None:
    args = [a.replace("RUN", str(tmp_path / "rundir")) for a in args]
    proc = project.ll("run", corpus_out / loop, *args, cwd=tmp_path)
    visited = path_of(proc)
    # the checks `ll migrate` added for upstream's `classify` stand between upstream's states,
    # the check that reads `output_numeric`'s `key:` (run_test_value), and the states that
    # judge a step's output once it exited 0 (`NAME_output`)
    added = {
        s
        for s in visited
        if s not in upstream_path
        and (s.startswith("aggregate_") or s.endswith(("_value", "_output")))
    }
    assert [s for s in visited if s not in added] == upstream_path, proc.stderr
    assert proc.returncode == code, proc.stderr


# -- issue 23: `ll migrate` never copies files from outside the tree it converts -------------


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_migrate_never_copies_files_from_outside_the_tree(
    tmp_path: Path, project: Project, how: str
) -> None:
    secret = tmp_path / "elsewhere" / "private"
    write(
        secret / "x.yaml",
        """
        name: stolen
        initial: a
        context: {token: TOP-SECRET-TOKEN}
        fragments:
          gate: {action: echo TOP-SECRET-TOKEN, action_type: shell}
        states:
          a: {action: echo TOP-SECRET-TOKEN, action_type: shell, next: done}
          done: {terminal: true}
        """,
    )
    tree = tmp_path / "work" / "proj" / "loops"
    if how == "dotdot":
        ref = "../../../elsewhere/private/x.yaml"
    elif how == "absolute":
        ref = str(secret / "x.yaml")
    else:
        (tree / "lib").mkdir(parents=True)
        (tree / "lib" / "x.yaml").symlink_to(secret / "x.yaml")
        ref = "lib/x.yaml"
    top = write(
        tree / "top.yaml",
        f"""
        name: top
        from: {ref}
        import: [{ref}]
        initial: call
        states:
          call:
            loop: {ref}
            on_success: done
            on_failure: done
          gated:
            fragment: gate
            next: done
          done: {{terminal: true}}
        """,
    )
    out = tmp_path / "out"
    proc = project.ll("migrate", top, "--out", out, cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    written = "\n".join(p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file())
    assert "TOP-SECRET-TOKEN" not in written + proc.stdout + proc.stderr
    assert sorted(p.name for p in out.rglob("*.yaml")) == ["top.yaml"]
    assert "outside the folder being converted" in (out / "MIGRATION-NOTES.md").read_text()
