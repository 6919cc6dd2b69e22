"""`ll migrate` II (issue 26): behaviour carried by rule, each checked by running the converted
file with the real `ll`: unrouted verdicts, `shell: bash`, terminal actions, `from:` merged
deeply, `next:` beside `on_error:`, inert `max_retries`, keyed `output_numeric`,
`convergence` without `previous`, custom `on_<verdict>`, local fragments, a flow's last entry,
captures no state makes; and notes that tell the truth."""

from __future__ import annotations

import textwrap
from pathlib import Path

from project import Project


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def convert(project: Project, text: str, **others: str) -> tuple[Path, str]:
    """The upstream file converted by `ll migrate --out`; (the loop, its notes)."""
    tmp_path = project.path
    src = tmp_path / "upstream"
    for name, body in others.items():
        write(src / f"{name.replace('__', '/')}.yaml", body)
    source = write(src / "loop.yaml", text)
    out = tmp_path / "out"
    proc = project.ll("migrate", source, "--out", out)
    notes = (out / "MIGRATION-NOTES.md").read_text()
    assert proc.returncode == 0, notes
    assert "needs hand work" not in notes.split("## ", 1)[1], notes
    return out / "loop.yaml", notes


def run(project: Project, loop: Path, *args: str) -> tuple[list[str], int, str]:
    proc = project.ll("run", loop, *args)
    out = proc.stdout + proc.stderr
    for line in out.splitlines():
        if line.strip().startswith("path:"):
            return [s.strip() for s in line.split("path:", 1)[1].split("->")], proc.returncode, out
    raise AssertionError(out)


def test_an_unrouted_verdict_ends_the_run_as_upstream_did(project: Project, tmp_path: Path) -> None:
    loop, notes = convert(
        project,
        """
        name: gate
        initial: check
        states:
          check:
            action: "exit 1"
            on_yes: done
          done: {terminal: true}
        """,
    )
    path, code, _ = run(project, loop)
    assert path == ["check", "no_route"]
    assert code == 1
    assert "verdict `failure` had no route (upstream ended the run in error there)" in notes
    assert project.ll("validate", "--strict", loop).returncode == 0


def test_an_unrouted_no_goes_to_on_error_as_upstream_sends_it(
    project: Project, tmp_path: Path
) -> None:
    loop, notes = convert(
        project,
        """
        name: gate
        initial: check
        states:
          check:
            action: "exit 1"
            on_yes: done
            on_error: fix
          fix: {action: "true", next: done}
          done: {terminal: true}
        """,
    )
    path, code, _ = run(project, loop)
    assert path == ["check", "fix", "done"]
    assert code == 0
    assert "upstream sent an unrouted `no` to `on_error`" in notes


def test_a_judges_partial_left_unrouted_is_not_taken_for_no(
    project: Project, tmp_path: Path
) -> None:
    loop, _ = convert(
        project,
        """
        name: judged
        initial: work
        states:
          work:
            action: /tidy
            evaluate: {type: llm_structured, prompt: Is it tidy?}
            on_yes: done
            on_no: work
          done: {terminal: true}
        """,
    )
    text = loop.read_text()
    assert "partial: no_route" in text
    assert "blocked: no_route" in text


def test_shell_actions_run_in_bash_as_upstream_runs_them(project: Project, tmp_path: Path) -> None:
    loop, notes = convert(
        project,
        """
        name: bashy
        initial: check
        states:
          check:
            action: |
              set -o pipefail
              words=(a b c)
              [[ "${#words[@]}" -eq 3 ]] && grep -q b <<< "abc"
            on_yes: done
            on_no: failed
          done: {terminal: true}
          failed: {terminal: true}
        """,
    )
    assert "shell: bash" in loop.read_text()
    assert "`shell: bash`" in notes
    path, code, _ = run(project, loop)
    assert path == ["check", "done"]
    assert code == 0


def test_a_terminal_action_is_not_run_as_upstream_never_runs_it(
    project: Project, tmp_path: Path
) -> None:
    loop, notes = convert(
        project,
        """
        name: ends
        initial: start
        states:
          start: {action: "true", next: done}
          done:
            action: "echo terminal ran; exit 3"
            terminal: true
        """,
    )
    path, code, out = run(project, loop)
    assert path == ["start", "done"]
    assert code == 0
    assert "terminal ran" not in out
    assert "never runs its action" in notes


def test_from_merges_a_partly_overridden_state_deeply(project: Project, tmp_path: Path) -> None:
    loop, notes = convert(
        project,
        """
        name: child
        from: base
        states:
          check:
            on_no: other
          other: {terminal: true}
        """,
        base="""
        name: base
        initial: check
        states:
          check:
            action: "exit 1"
            on_yes: done
            on_no: done
          done: {terminal: true}
        """,
    )
    path, code, _ = run(project, loop)
    assert path == ["check", "other"]
    assert code == 0
    assert "overridden in part: check" in notes


def test_next_beside_on_error_goes_to_on_error_on_any_failing_exit(
    project: Project, tmp_path: Path
) -> None:
    loop, _ = convert(
        project,
        """
        name: chain
        initial: build
        states:
          build:
            action: "exit 2"
            next: done
            on_error: broken
          done: {terminal: true}
          broken: {terminal: true}
        """,
    )
    assert run(project, loop)[0] == ["build", "broken"]
    loop.write_text(loop.read_text().replace("exit 2", "exit 1"))
    assert run(project, loop)[0] == ["build", "broken"]


def test_max_retries_with_no_route_back_is_dropped_not_hand_work(
    project: Project, tmp_path: Path
) -> None:
    _, notes = convert(
        project,
        """
        name: once
        initial: work
        states:
          work:
            action: "true"
            max_retries: 2
            on_retry_exhausted: done
            on_yes: done
            on_no: done
          done: {terminal: true}
        """,
    )
    assert "so upstream never used it; dropped" in notes


def test_output_numeric_with_key_reads_the_last_key_value(project: Project, tmp_path: Path) -> None:
    loop, _ = convert(
        project,
        """
        name: score
        initial: measure
        states:
          measure:
            action: "printf 'score=2\\nnoise\\nscore = 7\\n'"
            evaluate: {type: output_numeric, key: score, operator: ge, target: 5}
            on_yes: good
            on_no: bad
          good: {terminal: true}
          bad: {terminal: true}
        """,
    )
    path, code, _ = run(project, loop)
    assert path == ["measure", "measure_value", "good"]
    assert code == 0


def test_convergence_without_previous_never_stalls_as_upstream(
    project: Project, tmp_path: Path
) -> None:
    loop, notes = convert(
        project,
        """
        name: conv
        initial: measure
        max_steps: 3
        on_max_steps: done
        states:
          measure:
            action: echo 5
            evaluate: {type: convergence, target: 0, tolerance: 0}
            on_target: done
            on_progress: measure
            on_stall: stuck
          done: {terminal: true}
          stuck: {terminal: true}
        """,
    )
    path, _, _ = run(project, loop)
    assert "stuck" not in path
    # `measure_output` judges the output once the step exited 0 (upstream's error otherwise)
    assert path[:6] == ["measure", "measure_output"] * 3
    assert "written as `route:` entries" in notes


def test_local_fragments_and_a_flows_last_entry(project: Project, tmp_path: Path) -> None:
    loop, _ = convert(
        project,
        """
        name: flowing
        fragments:
          ok: {action: "true", action_type: shell}
        flow: [first, "second?last:first", last]
        state_defs:
          first: {fragment: ok}
          second: {fragment: ok}
          last: {description: the end}
        """,
    )
    path, code, _ = run(project, loop)
    assert path == ["first", "second", "last"]
    assert code == 0


def test_a_capture_no_state_makes_is_empty_with_a_true_note(
    project: Project, tmp_path: Path
) -> None:
    loop, notes = convert(
        project,
        """
        name: typo
        initial: a
        states:
          a: {action: echo hi, capture: said, next: b}
          b: {action: 'echo "[${captured.sayd.output}]"', next: done}
          done: {terminal: true}
        """,
    )
    assert "names no capture of this loop" in notes
    assert "behaves differently" in notes
    path, code, _ = run(project, loop)
    assert path == ["a", "b", "done"]
    assert code == 0


def test_a_non_zero_exit_under_an_output_evaluator_is_upstreams_error(
    project: Project, tmp_path: Path
) -> None:
    """Upstream's `output_contains` (and numeric, json, convergence) gave `error` on a non-zero
    exit before reading the output: a step that prints the pattern and fails goes to
    `on_error`, as upstream sent it."""
    text = """
        name: gate
        initial: check
        states:
          check:
            action: "echo READY; exit ${context.code}"
            evaluate: {type: output_contains, pattern: READY}
            on_yes: done
            on_no: check
            on_error: failed
          done: {terminal: true}
          failed: {terminal: true}
        context: {code: 0}
        """
    loop, notes = convert(project, text)
    path, code, _ = run(project, loop, "--set", "code=1")
    assert (path, code) == (["check", "failed"], 1)
    path, code, _ = run(project, loop)
    assert (path, code) == (["check", "check_output", "done"], 0)
    assert "gave `error` on a non-zero exit before reading the output" in notes
    assert "max_iterations: 100" in loop.read_text()
    assert project.ll("validate", "--strict", loop).returncode == 0


def test_an_output_evaluator_whose_error_goes_where_all_else_goes_is_left(
    project: Project,
    tmp_path: Path,
) -> None:
    loop, notes = convert(
        project,
        """
        name: gate
        initial: check
        states:
          check:
            action: "echo READY; exit 1"
            evaluate: {type: output_contains, pattern: READY}
            on_yes: done
            on_no: done
            on_error: done
          done: {terminal: true}
        """,
    )
    assert "check_output" not in loop.read_text()
    assert "non-zero exit" not in notes
    assert run(project, loop)[:2] == (["check", "done"], 0)


def test_a_required_run_dir_parameter_is_filled_as_upstreams_runner_did(
    project: Project,
    tmp_path: Path,
) -> None:
    loop, notes = convert(
        project,
        """
        name: oracle
        initial: check
        parameters:
          run_dir: {type: path, required: true, description: "where files go"}
        states:
          check:
            action: 'test -d "${context.run_dir}" && echo "in ${context.run_dir}"'
            next: done
          done: {terminal: true}
        """,
    )
    path, code, out = run(project, loop)
    assert (path, code) == (["check", "done"], 0), out
    assert "parameter `run_dir`: upstream's runner filled it" in notes
    elsewhere = tmp_path / "given"
    elsewhere.mkdir()
    assert run(project, loop, "--set", f"run_dir={elsewhere}")[:2] == (["check", "done"], 0)
    assert project.ll("validate", "--strict", loop).returncode == 0


def test_an_error_goes_to_the_default_route_before_the_error_route(
    project: Project, tmp_path: Path
) -> None:
    """Upstream reads a route's `_` before its `_error`: an `error` went to `_`."""
    loop, notes = convert(
        project,
        """
        name: gate
        initial: check
        states:
          check:
            action: "exit 3"
            evaluate: {type: exit_code}
            route: {yes: done, _: fallback, _error: unused}
          fallback: {terminal: true}
          unused: {terminal: true}
          done: {terminal: true}
        """,
    )
    path, code, _ = run(project, loop)
    assert (path, code) == (["check", "fallback"], 0)
    assert "upstream sent `error` to `_`" in notes
    assert project.ll("validate", "--strict", loop).returncode == 0


def test_classify_sends_a_failing_step_to_the_default_route(
    project: Project, tmp_path: Path
) -> None:
    loop, _ = convert(
        project,
        """
        name: gate
        initial: pick
        states:
          pick:
            action: "echo fast; exit 1"
            evaluate: {type: classify}
            route: {fast: done, _: slow, _error: unused}
          slow: {terminal: true}
          unused: {terminal: true}
          done: {terminal: true}
        """,
    )
    assert run(project, loop)[:2] == (["pick", "slow"], 0)


def test_context_numbers_take_any_value_as_upstream_took_them(
    project: Project, tmp_path: Path
) -> None:
    """Upstream's context has no types: a caller may pass `0.6` where the child says `90`."""
    loop, notes = convert(
        project,
        """
        name: caller
        initial: call
        context: {rate: 0.6}
        states:
          call:
            loop: child
            with: {rate: "${context.rate}"}
            on_yes: done
            on_no: failed
          done: {terminal: true}
          failed: {terminal: true}
        """,
        child="""
        name: child
        initial: show
        context: {rate: 90}
        states:
          show:
            action: echo "rate ${context.rate}"
            next: ok
          ok: {terminal: true}
        """,
    )
    path, code, out = run(project, loop)
    assert (path, code) == (["call", "done"], 0), out
    assert "upstream's context values have no type" in notes
    assert run(project, loop.parent / "child.yaml", "--set", "rate=high")[:2] == (
        ["show", "ok"],
        0,
    )


def test_a_sub_loop_out_of_steps_takes_the_callers_no_route(
    project: Project, tmp_path: Path
) -> None:
    loop, notes = convert(
        project,
        """
        name: caller
        initial: call
        states:
          call:
            loop: child
            on_yes: done
            on_no: retry_later
            on_error: broken
          done: {terminal: true}
          retry_later: {terminal: true}
          broken: {terminal: true}
        """,
        child="""
        name: child
        initial: spin
        max_steps: 3
        states:
          spin:
            action: "true"
            next: spin
          ok: {terminal: true}
        """,
    )
    path, code, out = run(project, loop)
    assert (path, code) == (["call", "retry_later"], 0), out
    assert "when the sub-loop ran out of steps" in notes
    child = (loop.parent / "child.yaml").read_text()
    assert "on_max_iterations: max_steps_reached" in child
    assert run(project, loop.parent / "child.yaml")[1] == 4  # alone: still the limit's exit
