"""The loader: YAML with positions -> frozen model, and the guarantees the runner relies on."""

from __future__ import annotations

import dataclasses
import hashlib
import textwrap
from pathlib import Path

import pytest

from little_loops.errors import LoadError
from little_loops.load.builder import guess_action_type
from little_loops.load.loader import (
    load,
    parse,
    try_load,
)
from little_loops.model.loop import (
    Evaluate,
    Loop,
    Pos,
    Route,
)

LOOP = """\
name: fix-lint
description: Fix lint until clean
initial: check
max_iterations: 20
on_error: escalate
context: {src: src/, limit: 3, token: ""}
secrets: [token]
llm: {model: claude-haiku, min_confidence: 0.7}
states:
  check:
    action: ruff check ${context.src}
    capture: lint
    on_success: done
    on_failure: fix
  fix:
    action: /ll:check_code fix
    timeout: 120
    retry: {max_attempts: 2, on: [error]}
    evaluate:
      type: llm_structured
      prompt: Did it work? ${captured.lint.output}
      uncertain_suffix: true
    route:
      success: check
      _: wait
    on_timeout: escalate
  wait:
    evaluate: {type: output_numeric, source: '${context.limit}', operator: lt, target: 5}
    next: check
  escalate: {terminal: true, outcome: failure, action: echo needs a look}
  done: {terminal: true}
"""


def write(tmp_path: Path, text: str, name: str = "loop.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def loop(tmp_path: Path) -> Loop:
    return load(write(tmp_path, LOOP))


def test_top_level_fields(loop: Loop, tmp_path: Path) -> None:
    assert loop.name == "fix-lint"
    assert loop.initial == "check"
    assert loop.max_iterations == 20
    assert loop.on_error == "escalate"
    assert dict(loop.context) == {"src": "src/", "limit": 3, "token": ""}
    assert loop.secrets == ("token",)
    assert loop.llm.model == "claude-haiku"
    assert loop.llm.min_confidence == 0.7
    assert loop.llm.max_tokens == 256
    assert loop.path == tmp_path / "loop.yaml"
    assert list(loop.states) == ["check", "fix", "wait", "escalate", "done"]


def test_source_sha256_is_of_the_file_bytes(loop: Loop, tmp_path: Path) -> None:
    data = (tmp_path / "loop.yaml").read_bytes()
    assert loop.source_sha256 == hashlib.sha256(data).hexdigest()


def test_shorthands_and_route_merge_with_their_origin(loop: Loop) -> None:
    check, fix = loop.states["check"], loop.states["fix"]
    assert check.routes["success"] == Route("done", "on_success", Pos(13, 17))
    assert check.routes["failure"] == Route("fix", "on_failure", Pos(14, 17))
    assert fix.routes["success"] == Route("check", "route", Pos(24, 16))
    assert fix.routes["_"].via == "route"
    assert fix.routes["timeout"] == Route("escalate", "on_timeout", Pos(26, 17))
    assert fix.next is None
    assert loop.states["wait"].next == Route("check", "next", Pos(29, 11))


def test_action_types_and_default_evaluators(loop: Loop) -> None:
    check, fix, wait = (loop.states[n] for n in ("check", "fix", "wait"))
    assert (check.action_type, check.evaluate) == ("shell", Evaluate("exit_code", Pos(10, 3)))
    assert fix.action_type == "slash"
    assert fix.evaluate is not None
    assert fix.evaluate.type == "llm_structured"
    assert fix.evaluate.uncertain_suffix is True
    assert fix.evaluate.pos == Pos(20, 7)
    assert wait.action is None
    assert wait.action_type is None
    assert wait.evaluate is not None
    assert (wait.evaluate.operator, wait.evaluate.target) == ("lt", 5)
    assert loop.states["done"].evaluate is None


SLASH_DEFAULTS = """\
name: slash
initial: moves_on
states:
  moves_on: {action: /ll:fix, next: branches}
  branches: {action: /ll:review, on_success: also_routes, on_failure: report}
  also_routes: {action: /ll:review, route: {success: beside, failure: report}}
  beside: {action: /ll:fix, next: report, on_failure: report}
  report: {action: /ll:report, terminal: true}
"""


def test_slash_default_evaluator_follows_how_the_state_routes(tmp_path: Path) -> None:
    # SPEC section 3: the CLI's own result for next/terminal, else a success/failure judge
    path = tmp_path / "slash.yaml"
    path.write_text(SLASH_DEFAULTS)
    states = load(path).states
    assert states["moves_on"].evaluate is None
    assert states["report"].evaluate is None
    for name in ("branches", "also_routes", "beside"):
        spec = states[name].evaluate
        assert spec is not None
        assert spec.type == "llm_structured"
        assert spec.schema is not None
        assert spec.schema["properties"]["verdict"]["enum"] == ["success", "failure"]
        assert spec.prompt is None  # the default prompt


def test_state_fields(loop: Loop) -> None:
    check, fix, escalate = (loop.states[n] for n in ("check", "fix", "escalate"))
    assert check.pos == Pos(10, 3)
    assert check.capture == "lint"
    assert fix.timeout == 120.0
    assert fix.retry is not None
    assert (fix.retry.max_attempts, fix.retry.on, fix.retry.interval) == (2, ("error",), 1.0)
    assert escalate.terminal
    assert escalate.outcome == "failure"
    assert escalate.action == "echo needs a look"


def test_the_model_is_frozen(loop: Loop) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        loop.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        loop.states["x"] = loop.states["done"]  # type: ignore[index]
    with pytest.raises(TypeError):
        loop.states["check"].routes["x"] = Route("done", "route")  # type: ignore[index]


@pytest.mark.parametrize(
    ("action", "kind"),
    [
        ("/ll:manage_issue bug fix", "slash"),
        ("/review", "slash"),
        ("/ns:name", "slash"),
        ("/usr/bin/env true", "shell"),
        ("/ll:a/b", "shell"),
        ("ruff check src/", "shell"),
        ("echo /ll:x", "shell"),
        ("/", "shell"),
        ("  /commit now", "slash"),
    ],
)
def test_guess_action_type(action: str, kind: str) -> None:
    assert guess_action_type(action) == kind


def test_action_type_overrides_the_guess(tmp_path: Path) -> None:
    text = LOOP.replace(
        "    action: /ll:check_code fix", "    action: /ll:check_code fix\n    action_type: shell"
    ).replace("      type: llm_structured", "      type: exit_code")
    text = text.replace("      prompt: Did it work? ${captured.lint.output}\n", "")
    text = text.replace("      uncertain_suffix: true\n", "")
    loaded = load(write(tmp_path, text))
    assert loaded.states["fix"].action_type == "shell"


def test_load_raises_with_every_diagnostic(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\ninitial: a\nstates:\n  a: {next: b, bogus: 1}\n")
    with pytest.raises(LoadError) as info:
        load(path)
    assert [d.code for d in info.value.diagnostics] == ["unknown-target", "unknown-key"]
    assert info.value.exit_code == 2
    assert info.value.message.startswith(f"{path}:4:")


def test_warnings_do_not_stop_a_load(tmp_path: Path) -> None:
    text = LOOP + "  orphan: {terminal: true}\n"
    loaded, diagnostics = try_load(write(tmp_path, text))
    assert loaded is not None
    assert [d.code for d in diagnostics] == ["unreachable-state"]


def test_keys_are_always_text(tmp_path: Path) -> None:
    """`on:` is YAML 1.1's boolean true; in a loop file it is the key `on`."""
    text = LOOP.replace("{max_attempts: 2, on: [error]}", "{on: [error, timeout], yes: 1}")
    _, diagnostics = try_load(write(tmp_path, text))
    assert [d.message.split(";")[0] for d in diagnostics] == [
        "unknown key 'yes' in 'retry' of state 'fix'"
    ]


def test_merge_keys_are_supported(tmp_path: Path) -> None:
    text = """\
    name: m
    initial: a
    states:
      a: &base {action: make, on_success: done, on_failure: done, on_error: done}
      b:
        <<: *base
        action: make other
      done: {terminal: true}
    """
    loaded, diagnostics = try_load(write(tmp_path, text))
    assert loaded is not None
    assert loaded.states["b"].action == "make other"
    assert loaded.states["b"].routes["success"].target == "done"
    assert [d.code for d in diagnostics] == ["unreachable-state"]


def test_duplicate_keys_are_errors_not_silently_dropped(tmp_path: Path) -> None:
    text = LOOP.replace("    capture: lint\n", "    capture: lint\n    capture: other\n")
    loaded, diagnostics = try_load(write(tmp_path, text))
    assert loaded is None
    # the checks see what YAML would keep: the last value
    assert [(d.line, d.code) for d in diagnostics] == [
        (13, "duplicate-key"),
        (22, "unknown-capture"),
    ]


def test_parse_takes_bytes_and_a_display_name(tmp_path: Path) -> None:
    loaded, diagnostics = parse(LOOP.encode(), path=tmp_path / "x.yaml", file="<stdin>")
    assert loaded is not None
    assert not diagnostics
    _, bad = parse(b"name: [", path=tmp_path / "x.yaml", file="<stdin>")
    assert bad[0].file == "<stdin>"
    assert bad[0].code == "yaml-syntax"


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + LOOP.encode())
    assert load(path).name == "fix-lint"


def test_recursive_and_explosive_aliases_are_refused(tmp_path: Path) -> None:
    recursive = write(tmp_path, "name: &a [*a]\n", "r.yaml")
    assert [d.code for d in try_load(recursive)[1]] == ["recursive-alias"]
    levels = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = write(tmp_path, "context:\n" + "".join(f"  {x}\n" for x in levels), "b.yaml")
    assert [d.code for d in try_load(bomb)[1]] == ["too-large"]


def test_comments_after_plain_values_are_recorded_with_their_text() -> None:
    from little_loops.load.composer import compose as _compose

    text = (
        "a: echo x  # note\n"
        "b: 'echo y' # quoted: the author chose where it ends\n"
        "c: |\n  echo z # inside a block: text\n"
        "d: [p, r]  # after a flow list\n"
        "e: éé #42\n"
    )
    _, smap, diagnostics, complete = _compose(text, "x.yaml")
    assert complete
    assert diagnostics == []
    assert smap.comments == {("a",): (Pos(1, 12), " note"), ("e",): (Pos(6, 7), "42")}


def test_schema_issues_taint_only_what_they_break() -> None:
    from little_loops.load.checks import WHOLE_LOOP
    from little_loops.load.loader import _tainted
    from little_loops.load.schema import SchemaIssue

    def issue(path: tuple[str, ...], key: str | None = None) -> SchemaIssue:
        return SchemaIssue(path, "unknown-key" if key else "wrong-type", "m", key)

    assert _tainted([issue(("states", "a", "timeout"))]) == frozenset()
    assert _tainted([issue(("states", "a"), "descripton")]) == frozenset()
    assert _tainted([issue(("states", "a"), "on_falure")]) == {"a"}
    assert _tainted([issue(("states", "a"), "on_yes")]) == {"a"}
    assert _tainted([issue(("states", "a"), "nxt")]) == {"a"}
    assert _tainted([issue(("states", "a", "evaluate", "type"))]) == {"a"}
    assert _tainted([issue(("states",), "$bad")]) == {"$bad"}
    assert _tainted([issue((), "category"), issue(("name",))]) == frozenset()
    assert _tainted([issue((), "on_handoff")]) == frozenset()
    assert _tainted([issue((), "on_eror")]) == {WHOLE_LOOP}
    assert _tainted([issue(("on_error",))]) == {WHOLE_LOOP}
