"""`ll run --dry-run`: the first state's interpolated action and every route, from a real file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from little_loops.errors import RunError
from little_loops.load.loader import load
from little_loops.run.plan import dry_run


def loop_file(tmp_path: Path, text: str, name: str = "loop.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


GREET = """
name: greet
initial: hello
max_iterations: 7
timeout: 90.5
on_error: broken
context:
  who: world
  greeting: "hello ${context.who}"
states:
  hello:
    action: echo ${context.greeting} from ${loop.name} at ${state.iteration}/${state.attempt}
    capture: said
    evaluate:
      type: output_contains
      pattern: hello
    on_success: check
    on_failure: hello
  check:
    action: test -n "${captured.said.output}"
    route:
      success: done
      failure: hello
      _: broken
  wait:
    action: sleep 1
    next: done
  done:
    terminal: true
  broken:
    terminal: true
    outcome: failure
"""

GREET_ROUTES = [
    "routes:",
    "  hello --success--> check",
    "  hello --failure--> hello",
    "  hello --timeout--> broken  (loop on_error)",
    "  check --success--> done",
    "  check --failure--> hello",
    "  check --_--> broken",
    "  check --error/timeout--> broken  (loop on_error)",
    "  wait --success--> done  (next)",
    "  wait --failure/error/timeout--> broken  (loop on_error)",
    "  done: terminal (success)",
    "  broken: terminal (failure)",
]


def test_dry_run_shows_the_first_action_and_every_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # actions run where `ll` was started
    path = loop_file(tmp_path, GREET)
    assert dry_run(load(path), {}).splitlines() == [
        f"loop: greet ({path})",
        "max_iterations: 7, timeout: 90.5s",
        f"working directory: {tmp_path}",
        "first state: hello",
        "  shell action: echo hello world from greet at 1/1",
        "  evaluate: output_contains",
        *GREET_ROUTES,
    ]


def test_dry_run_applies_set_overrides(tmp_path: Path) -> None:
    loop = load(loop_file(tmp_path, GREET))
    text = dry_run(loop, {"who": "Ada", "extra": "unused"})
    assert "  shell action: echo hello Ada from greet at 1/1\n" in text
    replaced = dry_run(loop, {"greeting": "hi ${context.who}!"})
    assert "  shell action: echo hi world! from greet at 1/1\n" in replaced


def test_dry_run_does_not_run_anything(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = loop_file(
        tmp_path,
        f"""
        name: side-effect
        initial: touch
        states:
          touch:
            action: touch {marker}
            next: done
          done:
            terminal: true
        """,
    )
    text = dry_run(load(path), {})
    assert f"  shell action: touch {marker}\n" in text
    assert "max_iterations: 50\n" in text  # the default, and no timeout part
    assert "  evaluate: exit_code\n" in text
    assert text.endswith(
        "routes:\n"
        "  touch --success--> done  (next)\n"
        "  touch --failure--> stops (exit 1)\n"
        "  touch --error/timeout--> stops (exit 3)\n"
        "  done: terminal (success)\n"
    )
    assert not marker.exists()


def test_first_action_using_captured_shows_the_template_with_a_note(tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: cap
        initial: work
        states:
          work:
            action: echo "last=${captured.count.output}"
            capture: count
            on_success: done
            on_failure: work
            on_error: done
          done:
            terminal: true
        """,
    )
    lines = dry_run(load(path), {}).splitlines()
    assert lines[4] == (
        '  shell action: echo "last=${captured.count.output}"    '
        "# cannot interpolate before the run: undefined variable '${captured.count.output}'; "
        "no step has captured 'count' yet on this path; "
        "add 'capture: count' to a state that runs before this one"
    )
    assert lines[5:] == [
        "  evaluate: exit_code",
        "routes:",
        "  work --success--> done",
        "  work --failure--> work",
        "  work --error--> done",
        "  done: terminal (success)",
    ]


def test_first_action_using_prev_shows_the_template_with_a_note(tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: prev
        initial: a
        on_error: done
        states:
          a:
            action: echo ${prev.output}
            next: done
          done:
            terminal: true
        """,
    )
    text = dry_run(load(path), {})
    assert "  shell action: echo ${prev.output}    # cannot interpolate before the run: " in text
    assert "there is no previous step yet" in text


def test_slash_action_and_terminal_first_state(tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: ask
        initial: ask
        context:
          topic: tests
        states:
          ask:
            action: /review ${context.topic} "now"
            route:
              success: done
              _: ask
            on_error: done
          done:
            terminal: true
        """,
    )
    lines = dry_run(load(path), {}).splitlines()
    assert lines[4] == '  slash action: /review tests "now"'
    assert lines[5] == "  evaluate: llm_structured"
    only_terminal = loop_file(
        tmp_path,
        """
        name: nothing
        initial: end
        states:
          end:
            terminal: true
            outcome: failure
        """,
        name="end.yaml",
    )
    assert dry_run(load(only_terminal), {}).splitlines()[3:] == [
        "first state: end",
        "routes:",
        "  end: terminal (failure)",
    ]


def test_a_cycle_in_overrides_is_a_run_error(tmp_path: Path) -> None:
    loop = load(loop_file(tmp_path, GREET))
    with pytest.raises(RunError) as exc:
        dry_run(loop, {"who": "${context.a}", "a": "${context.who}"})
    assert exc.value.message == ("context values refer to each other in a cycle: who -> a -> who")
