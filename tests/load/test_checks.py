"""Semantic checks, and the exact text of every diagnostic an author can meet."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from little_loops.load.loader import try_load

# A tiny valid loop the cases below break one way at a time.
OK = """\
name: demo
initial: check
on_error: failed
states:
  check:
    action: make test
    on_success: done
    on_failure: fix
  fix:
    action: make fix
    next: check
  done: {terminal: true}
  failed: {terminal: true, outcome: failure}
"""


def lines(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "loop.yaml"
    path.write_text(textwrap.dedent(text))
    _, diagnostics = try_load(path)
    return [d.format().replace(str(path), "loop.yaml") for d in diagnostics]


def test_the_base_loop_is_clean(tmp_path: Path) -> None:
    assert lines(tmp_path, OK) == []


# (loop text, every expected line): one case per diagnostic, pinned word for word.
CASES = {
    "unknown-key": (
        OK.replace("    on_failure: fix", "    on_falure: fix"),
        [
            "loop.yaml:8:5: error: unknown key 'on_falure' in state 'check' (did you mean "
            "'on_failure'?); valid keys: action, action_type, ask, capture, choices, description, "
            "evaluate, fail_fast, for_each, join, loop, max_concurrency, next, on_error, "
            "on_failure, on_maintain, on_success, on_timeout, outcome, parallel, retry, route, "
            "terminal, timeout, with",
        ],
    ),
    "unknown-top-key": (
        OK + "max_iteration: 5\n",
        [
            "loop.yaml:14:1: error: unknown key 'max_iteration' at the top level (did you mean "
            "'max_iterations'?); valid keys: action_timeout, backoff, context, description, "
            "initial, judges, keep_runs, llm, maintain, max_cost_usd, max_iterations, metadata, "
            "name, "
            "on_error, on_max_iterations, outputs, paradigm, secrets, shell, states, timeout, "
            "working_dir",
        ],
    ),
    "missing-key": (
        OK.replace("initial: check\n", ""),
        ["loop.yaml:1:1: error: the loop is missing required key 'initial'"],
    ),
    "wrong-type": (
        OK + "max_iterations: ten\n",
        ["loop.yaml:14:17: error: 'max_iterations' must be a whole number, not text ('ten')"],
    ),
    "wrong-type-state": (
        OK.replace("    action: make fix", "    action: make fix\n    timeout: soon"),
        ["loop.yaml:11:14: error: 'timeout' of state 'fix' must be a number, not text ('soon')"],
    ),
    "out-of-range": (
        OK + "max_iterations: 0\n",
        ["loop.yaml:14:17: error: 'max_iterations' must be at least 1, not 0"],
    ),
    "exclusive-minimum": (
        OK + "timeout: 0\n",
        ["loop.yaml:14:10: error: 'timeout' must be greater than 0, not 0"],
    ),
    "bad-enum": (
        OK.replace("outcome: failure", "outcome: failed"),
        [
            "loop.yaml:13:37: error: 'outcome' of state 'failed' must be one of: success, "
            "failure; got 'failed' (did you mean 'failure'?)",
        ],
    ),
    "bad-name": (
        OK.replace("name: demo", "name: my demo"),
        ["loop.yaml:1:7: error: 'name' is 'my demo'; use only letters, digits, '-', '_' and '.'"],
    ),
    "bad-state-name": (
        OK + "  $odd: {terminal: true}\n",
        [
            "loop.yaml:14:3: error: state name '$odd' is not valid; start with a letter or '_', "
            "then use letters, digits, '_', '-' or '.'",
        ],
    ),
    "bad-route-key": (
        OK.replace("    next: check", "    route: {Done: check}"),
        [
            "loop.yaml:11:13: error: route key 'Done' in state 'fix' is not a verdict; use a "
            "lowercase verdict, '_' (any other verdict) or '_error'",
        ],
    ),
    "empty-states": (
        "name: x\ninitial: a\nstates: {}\n",
        [
            "loop.yaml:3:9: error: 'states' must not be empty",
        ],
    ),
    "unknown-evaluator": (
        OK.replace("    action: make fix", "    action: make fix\n    evaluate: {type: exitcode}"),
        [
            "loop.yaml:11:22: error: unknown evaluator type 'exitcode' in 'evaluate' of state "
            "'fix' (did you mean 'exit_code'?); valid types: exit_code, output_contains, "
            "output_numeric, output_json, convergence, llm_structured, all, any",
        ],
    ),
    "evaluator-missing-field": (
        OK.replace(
            "    action: make fix", "    action: make fix\n    evaluate: {type: output_contains}"
        ),
        [
            "loop.yaml:11:15: error: 'evaluate' of state 'fix' is missing required key 'pattern'",
        ],
    ),
    "evaluator-unknown-field": (
        OK.replace(
            "    action: make fix",
            "    action: make fix\n    evaluate: {type: exit_code, pattern: x}",
        ),
        [
            "loop.yaml:11:33: error: unknown key 'pattern' in 'evaluate' of state 'fix'; "
            "valid keys: type",
        ],
    ),
    "duplicate-item": (
        OK + "context: {a: ''}\nsecrets: [a, a]\n",
        ["loop.yaml:15:10: error: 'secrets' lists 'a' twice"],
    ),
    "duplicate-key": (
        OK.replace(
            "  done: {terminal: true}", "  done: {terminal: true}\n  done: {terminal: true}"
        ),
        [
            "loop.yaml:13:3: error: duplicate key 'done' in 'states' (first at line 12); YAML "
            "would silently keep only the last one",
        ],
    ),
    "unknown-initial": (
        OK.replace("initial: check", "initial: chek"),
        ["loop.yaml:2:10: error: initial state 'chek' is not a state (did you mean 'check'?)"],
    ),
    "unknown-target": (
        OK.replace("on_failure: fix", "on_failure: fx"),
        [
            "loop.yaml:8:17: error: state 'check' routes 'failure' to unknown state 'fx' "
            "(did you mean 'fix'?)",
        ],
    ),
    "unknown-next": (
        OK.replace("next: check", "next: chekc"),
        [
            "loop.yaml:11:11: error: state 'fix' has 'next' naming unknown state 'chekc' "
            "(did you mean 'check'?)",
        ],
    ),
    "unknown-loop-on-error": (
        OK.replace("on_error: failed", "on_error: fail"),
        [
            "loop.yaml:3:11: error: 'on_error' names unknown state 'fail' (did you mean 'failed'?)",
        ],
    ),
    "current-not-allowed": (
        OK + "on_max_iterations: $current\n",
        [
            "loop.yaml:14:20: error: 'on_max_iterations' names '$current' is not allowed "
            "here; name a state",
        ],
    ),
    "duplicate-route": (
        OK.replace("    on_failure: fix", "    on_failure: fix\n    route: {success: fix}"),
        [
            "loop.yaml:9:22: error: state 'check' routes 'success' twice, by 'on_success' "
            "(line 7) and by 'route'; keep one",
        ],
    ),
    "next-with-routes": (
        OK.replace("    next: check", "    next: check\n    on_success: done"),
        [
            "loop.yaml:11:11: error: state 'fix' has 'next', which is its success route, and "
            "also 'on_success'; use one or the other ('on_failure', 'on_error' and 'on_timeout' "
            "may stay beside 'next')",
        ],
    ),
    "uncovered-verdict": (
        OK.replace("    on_failure: fix\n", ""),
        [
            "loop.yaml:5:3: error: state 'check' can give verdict 'failure' but nothing routes "
            "it; add 'failure: STATE' under 'route:', or a default '_: STATE'",
            "loop.yaml:8:3: warning: state 'fix' cannot be reached from initial state 'check'",
        ],
    ),
    # error/timeout need no route: unrouted, they stop the run (SPEC section 6)
    "unrouted-error-is-fine": (
        OK.replace("on_error: failed\n", ""),
        ["loop.yaml:12:3: warning: state 'failed' cannot be reached from initial state 'check'"],
    ),
    "unused-route": (
        OK.replace("    on_failure: fix", "    on_failure: fix\n    route: {blocked: fix}"),
        [
            "loop.yaml:9:22: warning: state 'check' routes 'blocked', a verdict it never gives "
            "(it can give: error, failure, success, timeout)",
        ],
    ),
    "invalid-regex": (
        OK.replace(
            "    action: make fix",
            "    action: make fix\n    evaluate: {type: output_contains, pattern: '(a'}",
        ),
        [
            "loop.yaml:11:48: error: 'evaluate.pattern' of state 'fix' is not a valid regular "
            "expression: missing ), unterminated subpattern at position 0; add 'literal: true' "
            "to match it as plain text",
        ],
    ),
    "unknown-operator": (
        OK.replace(
            "    action: make fix",
            "    action: make fix\n    evaluate: {type: output_numeric, operator: gte, target: 1}",
        ),
        [
            "loop.yaml:11:48: error: 'evaluate.operator' of state 'fix' must be one of: eq, ne, "
            "lt, le, gt, ge; got 'gte' (did you mean 'ge'?)",
        ],
    ),
    "bad-json-path": (
        OK.replace(
            "    action: make fix",
            "    action: make fix\n"
            "    evaluate: {type: output_json, path: 'a.b', operator: eq, target: 1}",
        ),
        [
            "loop.yaml:11:41: error: JSON path 'a.b' must start with '.' or '[' (for example "
            "'.a.b') (in 'evaluate.path' of state 'fix')",
        ],
    ),
    "bad-judge-schema": (
        OK.replace(
            "    action: make fix",
            "    action: /fix\n"
            "    evaluate: {type: llm_structured, schema: {properties: {verdict: {type: string}}}}",
        ),
        [
            "loop.yaml:11:46: error: 'evaluate.schema' of state 'fix' needs a 'verdict' "
            "property of type string with an 'enum' of verdicts, e.g. verdict: {type: string, "
            "enum: [done, retry]}",
        ],
    ),
    "unknown-context": (
        OK.replace("action: make fix", "action: make fix ${context.target}"),
        [
            "loop.yaml:10:13: error: '${context.target}' in 'action' of state 'fix': there is "
            "no context key 'target'; define it under 'context:'",
        ],
    ),
    "unknown-capture": (
        OK.replace("action: make fix", "action: make fix ${captured.lint.output}"),
        [
            "loop.yaml:10:13: error: '${captured.lint.output}' in 'action' of state 'fix': no "
            "state has 'capture: lint'",
        ],
    ),
    "unknown-field": (
        OK.replace("action: make fix", "action: make fix ${prev.outptu}"),
        [
            "loop.yaml:10:13: error: '${prev.outptu}' in 'action' of state 'fix': 'prev' has "
            "no 'outptu' (did you mean 'output'?); it offers: output, stderr, exit_code, "
            "duration_ms, state, verdict",
        ],
    ),
    "bad-placeholder": (
        OK.replace("action: make fix", "action: make fix ${secrets.token}"),
        [
            "loop.yaml:10:13: error: unknown namespace 'secrets' in '${secrets.token}'; use one "
            "of: context, captured, prev, state, loop, env, item (in 'action' of state 'fix')",
        ],
    ),
    "no-terminal": (
        "name: x\ninitial: a\nstates:\n  a: {next: a}\n",
        [
            "loop.yaml:4:3: error: no state is terminal, so the run can only end at a limit; "
            "mark the state where it should end with 'terminal: true'",
        ],
    ),
    "unreachable-terminal": (
        "name: x\ninitial: a\nstates:\n  a: {next: $current}\n  z: {terminal: true}\n",
        [
            "loop.yaml:2:10: error: no terminal state can be reached from initial state 'a', "
            "so the run can only end at a limit",
            "loop.yaml:4:3: warning: state 'a' has no path to a terminal state; a run that "
            "gets there can only end at a limit",
            "loop.yaml:5:3: warning: state 'z' cannot be reached from initial state 'a'",
        ],
    ),
    "terminal-routes": (
        OK.replace("  done: {terminal: true}", "  done: {terminal: true, next: check}"),
        ["loop.yaml:12:3: warning: state 'done' is terminal, so its routes are never used"],
    ),
    "paradigm": (
        "name: x\nparadigm: goal\ngoal: tests pass\ntools: [make test]\n",
        ["loop.yaml:4:8: error: 'tools' must list at least 2 items"],
    ),
    "not-a-mapping": (
        "- a\n- b\n",
        [
            "loop.yaml:1:1: error: a loop file must be a mapping of keys (name:, initial:, "
            "states:), not a list",
        ],
    ),
    "empty-file": (
        "",
        ["loop.yaml:1:1: error: the file is empty; a loop needs 'name', 'initial' and 'states'"],
    ),
    "multiple-documents": (
        OK + "---\nname: y\n",
        [
            "loop.yaml:14:1: error: a loop file holds one YAML document; remove the second "
            "'---' and what follows, or put it in its own file",
        ],
    ),
    "unknown-alias": (
        "name: *x\n",
        ["loop.yaml:1:7: error: alias '*x' names no anchor ('&x') above it"],
    ),
}


STEPS_WITH_COLON = (
    "name: g\nparadigm: imperative\nsteps:\n  - echo Result: ok\nuntil: {type: exit_code}\n"
)


def _with_evaluator(evaluate: str) -> str:
    return OK.replace("    action: make fix", f"    action: make fix\n    evaluate: {evaluate}")


def _in_fix(action: str) -> str:
    return OK.replace("action: make fix", f"action: {action}")


# Authoring hints: a slip or an upstream little-loops name, and the line that says how to fix it.
# tests/load/test_validate.py runs each through the real `ll validate` too.
HINTS: dict[str, tuple[str, list[str]]] = {
    "cut-by-comment-slash": (
        _in_fix("/ll:fix issue #42"),
        [
            "loop.yaml:10:27: warning: 'action' of state 'fix' is cut short: ' #' starts a YAML "
            "comment, so the rest of the line is not part of the command; quote the whole action",
        ],
    ),
    "cut-by-comment-open-quote": (
        _in_fix('echo "issue #42" # note'),
        [
            "loop.yaml:10:25: warning: 'action' of state 'fix' is cut short: ' #' starts a YAML "
            "comment, so the rest of the line is not part of the command; quote the whole action",
        ],
    ),
    "colon-in-action": (
        _in_fix("echo Result: ok"),
        [
            "loop.yaml:10:24: error: invalid YAML: ': ' inside the value of 'action' (mapping "
            'values are not allowed here); quote the whole action: action: "echo Result: ok"',
        ],
    ),
    "colon-in-value": (
        _in_fix("make fix\n    description: Note: this"),
        [
            "loop.yaml:11:22: error: invalid YAML: ': ' inside the value of 'description' "
            "(mapping values are not allowed here); quote the whole value: description: "
            '"Note: this"',
        ],
    ),
    "colon-in-list-item": (
        STEPS_WITH_COLON,
        [
            "loop.yaml:4:5: error: 'steps[0]' must be text, not a mapping; a ': ' inside text "
            'starts a mapping in YAML: quote the whole text, "echo Result: ok"',
        ],
    ),
    "env-variable": (
        _in_fix("make fix ${HOME}"),
        [
            "loop.yaml:10:13: error: unknown namespace 'HOME' in '${HOME}'; write '$${HOME}' for "
            "the shell's variable, or '${env.HOME}' (in 'action' of state 'fix')",
        ],
    ),
    "shell-expansion": (
        _in_fix("make fix ${TARGET:-all}"),
        [
            "loop.yaml:10:13: error: '${TARGET:-all}' is not a valid placeholder; write "
            "'$${TARGET:-all}' for the shell's own expansion (in 'action' of state 'fix')",
        ],
    ),
    "upstream-shell-modifier": (
        _in_fix("make fix ${context.input:shell}") + "context: {input: x}\n",
        [
            "loop.yaml:10:13: error: '${context.input:shell}' is not a valid placeholder; "
            "upstream little-loops' ':shell' is written '|q' here: '${context.input|q}' (in "
            "'action' of state 'fix')",
        ],
    ),
    "operator-lte": (
        _with_evaluator("{type: output_numeric, operator: lte, target: 1}"),
        [
            "loop.yaml:11:48: error: 'evaluate.operator' of state 'fix' must be one of: eq, ne, "
            "lt, le, gt, ge; got 'lte' (did you mean 'le'?)",
        ],
    ),
    "operator-double-equals": (
        _with_evaluator("{type: output_numeric, operator: ==, target: 1}"),
        [
            "loop.yaml:11:48: error: 'evaluate.operator' of state 'fix' must be one of: eq, ne, "
            "lt, le, gt, ge; got '==' (did you mean 'eq'?)",
        ],
    ),
    "operator-less-than": (
        _with_evaluator("{type: output_json, path: .n, operator: <, target: 1}"),
        [
            "loop.yaml:11:55: error: 'evaluate.operator' of state 'fix' must be one of: eq, ne, "
            "lt, le, gt, ge; got '<' (did you mean 'lt'?)",
        ],
    ),
    "operator-equals": (
        _with_evaluator("{type: output_numeric, operator: equals, target: 1}"),
        [
            "loop.yaml:11:48: error: 'evaluate.operator' of state 'fix' must be one of: eq, ne, "
            "lt, le, gt, ge; got 'equals' (did you mean 'eq'?)",
        ],
    ),
    "operator-greater-or-equal-symbol": (
        _with_evaluator("\n      type: output_numeric\n      operator: >=\n      target: 1"),
        [
            "loop.yaml:13:18: error: write 'operator: ge' for '>=': operators are words here "
            "(eq, ne, lt, le, gt, ge), and YAML reads a bare '>' as syntax",
        ],
    ),
    "operator-not-equal-symbol": (
        _with_evaluator("\n      type: output_numeric\n      operator: !=\n      target: 1"),
        [
            "loop.yaml:13:17: error: write 'operator: ne' for '!=': operators are words here "
            "(eq, ne, lt, le, gt, ge), and YAML reads a bare '!' as syntax",
        ],
    ),
    "upstream-on-yes": (
        OK.replace("on_success: done", "on_yes: done"),
        [
            "loop.yaml:7:5: error: unknown key 'on_yes' in state 'check'; 'on_yes' is upstream "
            "little-loops' name: write 'on_success: done'",
        ],
    ),
    "upstream-on-no": (
        OK.replace("on_failure: fix", "on_no: fix"),
        [
            "loop.yaml:8:5: error: unknown key 'on_no' in state 'check'; 'on_no' is upstream "
            "little-loops' name: write 'on_failure: fix'",
        ],
    ),
    "upstream-on-partial": (
        OK.replace("    on_failure: fix", "    on_failure: fix\n    on_partial: fix"),
        [
            "loop.yaml:9:5: error: unknown key 'on_partial' in state 'check'; 'on_partial' is "
            "upstream little-loops' name: write 'route: {partial: fix}' (beside any other "
            "'route:' entries)",
        ],
    ),
    "upstream-on-blocked": (
        OK.replace("    on_failure: fix", "    on_failure: fix\n    on_blocked: $current"),
        [
            "loop.yaml:9:5: error: unknown key 'on_blocked' in state 'check'; 'on_blocked' is "
            "upstream little-loops' name: write 'route: {blocked: $current}' (beside any other "
            "'route:' entries)",
        ],
    ),
    "upstream-max-retries": (
        _in_fix("make fix\n    max_retries: 2"),
        [
            "loop.yaml:11:5: error: unknown key 'max_retries' in state 'fix'; 'max_retries' is "
            "upstream little-loops' name: write 'retry: {max_attempts: N}' (N counts the first "
            "attempt too)",
        ],
    ),
    "upstream-failure-true": (
        OK.replace("outcome: failure", "failure: true"),
        [
            "loop.yaml:13:28: error: unknown key 'failure' in state 'failed'; 'failure' is "
            "upstream little-loops' name: write 'outcome: failure' on the terminal state",
        ],
    ),
    "upstream-on-handoff": (
        OK + "on_handoff: spawn\n",
        [
            "loop.yaml:14:1: error: unknown key 'on_handoff' at the top level; 'on_handoff' is "
            "upstream little-loops' name: remove it: here every slash action runs in a session "
            "of its own (claude -p), so there is no hand-off to handle",
        ],
    ),
    "upstream-max-steps": (
        OK + "max_steps: 40\n",
        [
            "loop.yaml:14:1: error: unknown key 'max_steps' at the top level; 'max_steps' is "
            "upstream little-loops' name: write 'max_iterations: 40'",
        ],
    ),
    "upstream-on-max-steps": (
        OK + "on_max_steps: failed\n",
        [
            "loop.yaml:14:1: error: unknown key 'on_max_steps' at the top level; 'on_max_steps' "
            "is upstream little-loops' name: write 'on_max_iterations: failed'",
        ],
    ),
    "label-category": (
        OK + "category: ci\n",
        [
            "loop.yaml:14:1: error: unknown key 'category' at the top level; labels go under "
            "'metadata:' (metadata: {category: ci})",
        ],
    ),
    "label-labels": (
        OK + "labels: [ci, nightly]\n",
        [
            "loop.yaml:14:1: error: unknown key 'labels' at the top level; labels go under "
            "'metadata:' (metadata: {labels: ...})",
        ],
    ),
    "label-visibility": (
        OK + "visibility: internal\n",
        [
            "loop.yaml:14:1: error: unknown key 'visibility' at the top level; labels go under "
            "'metadata:' (metadata: {visibility: internal})",
        ],
    ),
    "upstream-action-type-prompt": (
        _in_fix("Fix the failing tests\n    action_type: prompt"),
        [
            "loop.yaml:11:18: error: 'action_type' of state 'fix' must be one of: shell, slash; "
            "got 'prompt'; 'prompt' is upstream little-loops' name: write 'action_type: slash' "
            "(the action is sent to Claude Code as 'claude -p ACTION')",
        ],
    ),
    "upstream-action-type-slash-command": (
        _in_fix("/ll:fix\n    action_type: slash_command"),
        [
            "loop.yaml:11:18: error: 'action_type' of state 'fix' must be one of: shell, slash; "
            "got 'slash_command'; 'slash_command' is upstream little-loops' name: write "
            "'action_type: slash', or leave it out: an action whose first word is '/name' is a "
            "slash command already",
        ],
    ),
    "upstream-import": (
        OK + "import: [lib/common.yaml]\n",
        [
            "loop.yaml:14:1: error: unknown key 'import' at the top level; 'import' is upstream "
            "little-loops' name: remove it: ll has no fragment libraries; write the keys out, or "
            "share them within one file with YAML anchors (&name, then <<: *name)",
        ],
    ),
    "upstream-fragment": (
        _in_fix("make fix\n    fragment: shell_exit"),
        [
            "loop.yaml:11:5: error: unknown key 'fragment' in state 'fix'; 'fragment' is "
            "upstream little-loops' name: remove it: ll has no fragment libraries; write the "
            "keys out, or share them within one file with YAML anchors (&name, then <<: *name)",
        ],
    ),
    "upstream-scope": (
        OK + "scope: [src]\n",
        [
            "loop.yaml:14:1: error: unknown key 'scope' at the top level; 'scope' is upstream "
            "little-loops' name: remove it: ll has no counterpart ('working_dir' only sets where "
            "actions run)",
        ],
    ),
    "upstream-run-dir": (
        _in_fix("make fix > ${context.run_dir}/log"),
        [
            "loop.yaml:10:13: error: '${context.run_dir}' in 'action' of state 'fix': there is no "
            "context key 'run_dir'; the run's own folder is '${loop.run_dir}' here",
        ],
    ),
}
CASES.update(HINTS)


def _judged(evaluate: str, llm: str = "") -> str:
    """OK with state 'fix' judged by an llm_structured evaluator (YAML lines under it)."""
    body = textwrap.indent(textwrap.dedent(evaluate).strip("\n"), "      ")
    text = OK.replace(
        "    action: make fix\n    next: check",
        f"    action: /ll:fix\n    evaluate:\n      type: llm_structured\n{body}\n"
        "    route: {_: check}",
    )
    return text + llm


# Judge settings a run could not use (issue 11 item 3): errors at load time, located.
JUDGE_CASES: dict[str, tuple[str, list[str]]] = {
    "unknown-judge-scheme": (
        _judged("model: gemini://pro"),
        [
            "loop.yaml:13:14: error: 'evaluate.model' of state 'fix': unknown judge model "
            "scheme 'gemini://' in 'gemini://pro'; use a bare model id, anthropic://ID, "
            "claude://ALIAS, ollama://HOST:PORT/MODEL or openai://MODEL",
        ],
    ),
    "ollama-without-model": (
        _judged("prompt: ok?", llm="llm: {model: 'ollama://localhost:11434'}\n"),
        [
            "loop.yaml:17:14: error: 'llm.model': ollama judge 'ollama://localhost:11434' "
            "names no model; it must look like ollama://HOST:PORT/MODEL, e.g. "
            "ollama://localhost:11434/qwen3:8b",
        ],
    ),
    "samples-bound": (
        _judged("samples: 100000"),
        [
            "loop.yaml:13:16: error: 'evaluate.samples' of state 'fix' must be at most 25, "
            "not 100000"
        ],
    ),
    "unknown-schema-type": (
        _judged("""
            schema:
              type: object
              properties:
                verdict: {type: string, enum: [done]}
                note: {type: strin}
        """),
        [
            "loop.yaml:17:24: error: 'evaluate.schema.properties.note.type' of state 'fix': "
            "'strin' is not a JSON Schema type (did you mean 'string'?); use one of: array, "
            "boolean, integer, null, number, object, string",
        ],
    ),
    "bad-schema-pattern": (
        _judged("""
            schema:
              type: object
              properties:
                verdict: {type: string, enum: [done]}
                id: {type: string, pattern: '(['}
        """),
        [
            "loop.yaml:17:39: error: 'evaluate.schema.properties.id.pattern' of state 'fix' is "
            "not a valid regular expression: unterminated character set at position 1",
        ],
    ),
    "reserved-verdicts": (
        _judged("""
            schema:
              type: object
              properties:
                verdict: {type: string, enum: [done, error, timeout, done_uncertain]}
        """),
        [
            "loop.yaml:16:48: error: verdict 'error' in 'evaluate.schema' of state 'fix' is "
            "reserved: it is what a judge failure (or a timeout) gives; name your verdict "
            "otherwise",
            "loop.yaml:16:55: error: verdict 'timeout' in 'evaluate.schema' of state 'fix' is "
            "reserved: it is what a judge failure (or a timeout) gives; name your verdict "
            "otherwise",
            "loop.yaml:16:64: error: verdict 'done_uncertain' in 'evaluate.schema' of state "
            "'fix' is reserved: it is what 'uncertain_suffix' makes of a verdict below "
            "'min_confidence'; name your verdict otherwise",
        ],
    ),
    "verdict-yes-and-twice": (
        _judged("""
            schema:
              type: object
              properties:
                verdict: {type: string, enum: [done, yes, done]}
        """),
        [
            "loop.yaml:16:48: error: verdict true in 'evaluate.schema' of state 'fix' is read "
            "by YAML as true or false, not a word; quote it ('yes', 'no', 'on', 'off' are "
            "booleans to YAML)",
            "loop.yaml:16:53: error: verdict 'done' is listed twice in 'evaluate.schema' of "
            "state 'fix'; keep one",
        ],
    ),
    "not-strict": (
        _judged("""
            schema:
              type: object
              properties:
                verdict: {type: string, enum: [done]}
                anything: {description: any value}
        """),
        [
            "loop.yaml:17:21: error: 'evaluate.schema.properties.anything' of state 'fix' has "
            "no 'type', which strict structured outputs need; add one (e.g. type: string), or "
            "an 'enum', 'const' or 'anyOf'",
        ],
    ),
    "text-confidence": (
        _judged("""
            schema:
              type: object
              properties:
                verdict: {type: string, enum: [done]}
                confidence: {type: string}
        """),
        [
            "loop.yaml:17:30: error: 'evaluate.schema.properties.confidence.type' of state "
            "'fix' must be number: the judge reads 'confidence' as a number from 0 to 1 (write "
            "confidence: {type: number}, or name your property otherwise)",
        ],
    ),
    "dangling-ref": (
        _judged("""
            schema:
              type: object
              properties:
                verdict: {type: string, enum: [done]}
                items: {type: array, items: {$ref: '#/$defs/item'}}
                remote: {$ref: 'https://example.com/s.json'}
        """),
        [
            "loop.yaml:17:46: error: 'evaluate.schema.properties.items.items.$ref' of state "
            "'fix' ('#/$defs/item') points at nothing in the schema; define it under '$defs' "
            "or correct the path",
            "loop.yaml:18:26: error: 'evaluate.schema.properties.remote.$ref' of state 'fix' "
            "('https://example.com/s.json') points outside the schema, and the judge never "
            "fetches schemas; put the definition under '$defs' and use '#/$defs/NAME'",
        ],
    ),
    "yaml-date-in-schema": (
        _judged("""
            schema:
              type: object
              properties:
                verdict: {type: string, enum: [done]}
                since: {const: 2024-01-01}
        """),
        [
            "loop.yaml:17:26: error: 'evaluate.schema.properties.since.const' of state 'fix' "
            "is read by YAML as a date (2024-01-01), which JSON cannot hold; quote it to make "
            "it text",
        ],
    ),
    "unknown-draft": (
        _judged("""
            schema:
              $schema: https://example.com/my-draft
              type: object
              properties:
                verdict: {type: string, enum: [done]}
        """),
        [
            "loop.yaml:14:18: error: 'evaluate.schema.$schema' of state 'fix' names no JSON "
            "Schema draft this program knows ('https://example.com/my-draft'); remove it to use "
            "Draft 2020-12",
        ],
    ),
}
CASES.update(JUDGE_CASES)


def test_claude_judges_take_schemas_strict_judges_cannot() -> None:
    from little_loops.evaluators.judge_config import schema_findings

    schema = {
        "type": "object",
        "properties": {"verdict": {"type": "string", "enum": ["done"]}, "any": {}},
    }
    assert schema_findings(schema, ("schema",), strict=False) == []
    assert [code for _, code, _ in schema_findings(schema, ("schema",), strict=True)] == [
        "judge-schema-not-strict"
    ]


def test_a_claude_judge_schema_is_not_held_to_strict_rules(tmp_path: Path) -> None:
    text = _judged("""
        model: claude://sonnet
        schema:
          type: object
          properties:
            verdict: {type: string, enum: [done]}
            anything: {description: any value}
    """)
    assert lines(tmp_path, text) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_diagnostic_text(tmp_path: Path, case: str) -> None:
    text, expected = CASES[case]
    assert lines(tmp_path, text) == expected


def test_a_tab_is_one_located_line_that_says_to_indent_with_spaces(tmp_path: Path) -> None:
    # Our own words, not PyYAML's (which it has reworded between releases).
    assert lines(tmp_path, "name: x\n\tinitial: a\n") == [
        "loop.yaml:2:1: error: invalid YAML: line 2 is indented with a tab; YAML indents with "
        "spaces only: replace the tab with spaces"
    ]


def test_at_least_25_distinct_diagnostics_are_pinned() -> None:
    messages = {line for _, expected in CASES.values() for line in expected}
    assert len(messages) >= 25


def test_every_problem_is_reported_in_one_pass_sorted_by_line(tmp_path: Path) -> None:
    broken = (
        OK.replace("initial: check", "initial: chek")
        .replace("on_failure: fix", "on_falure: fix")
        .replace("next: check", "next: chekc")
        + "max_iterations: ten\n"
    )
    found = lines(tmp_path, broken)
    assert len(found) == 4
    numbers = [int(line.split(":")[1]) for line in found]
    assert numbers == sorted(numbers)


def test_current_is_a_valid_target(tmp_path: Path) -> None:
    looping = OK.replace("next: check", "next: $current").replace("on_error: failed\n", "")
    assert lines(tmp_path, looping) == [
        "loop.yaml:8:3: warning: state 'fix' has no path to a terminal state; a run that "
        "gets there can only end at a limit",
        "loop.yaml:12:3: warning: state 'failed' cannot be reached from initial state 'check'",
    ]


def test_uncertain_and_custom_verdicts_are_covered(tmp_path: Path) -> None:
    judged = OK.replace(
        "    action: make fix\n    next: check",
        "    action: /ll:fix now\n"
        "    evaluate:\n"
        "      type: llm_structured\n"
        "      uncertain_suffix: true\n"
        "      schema:\n"
        "        type: object\n"
        "        properties: {verdict: {type: string, enum: [fixed, stuck]}}\n"
        "    route: {fixed: check}",
    )
    found = lines(tmp_path, judged)
    # 'fixed_uncertain' falls back to the route for 'fixed' (SPEC section 6, rule 2)
    assert [line.split("verdict ")[1].split(" ")[0] for line in found] == [
        "'stuck'",
        "'stuck_uncertain'",
    ]


def test_terminal_states_are_not_checked_for_coverage(tmp_path: Path) -> None:
    text = OK.replace("  done: {terminal: true}", "  done: {terminal: true, action: /ll:report}")
    assert lines(tmp_path, text) == []


def test_placeholders_in_every_templated_field(tmp_path: Path) -> None:
    text = (
        OK.replace(
            "    action: make fix",
            "    action: make fix\n"
            "    evaluate:\n"
            "      type: convergence\n"
            "      source: ${context.a}\n"
            "      target: ${context.b}\n"
            "      previous: ${context.c}",
        )
        + "context: {d: '${context.e}'}\n"
    )
    found = lines(tmp_path, text)
    assert [line.split("no context key ")[1][:3] for line in found] == [
        "'a'",
        "'b'",
        "'c'",
        "'e'",
    ]


def test_captured_names_need_a_known_field(tmp_path: Path) -> None:
    text = OK.replace("    action: make test", "    action: make test\n    capture: t").replace(
        "action: make fix", "action: make fix ${captured.t.output} ${captured.t}"
    )
    assert lines(tmp_path, text) == [
        "loop.yaml:11:13: error: '${captured.t}' in 'action' of state 'fix': name one of "
        "output, stderr, exit_code, duration_ms, verdict, confidence, reason after the capture "
        "name, not nothing"
    ]


def test_literal_patterns_are_not_compiled(tmp_path: Path) -> None:
    text = OK.replace(
        "    action: make fix",
        "    action: make fix\n    evaluate: {type: output_contains, pattern: '(a', literal: true}",
    )
    assert lines(tmp_path, text) == []


# -- one pass: a schema error hides only the checks that depend on what it broke -----------------


def test_a_top_level_schema_error_hides_no_state_check(tmp_path: Path) -> None:
    text = (
        OK.replace("    on_failure: fix\n", "")
        .replace("next: check", "next: chekc")
        .replace("on_error: failed\n", "on_error: failed\ncategory: ci\n")
    )
    assert lines(tmp_path, text) == [
        "loop.yaml:4:1: error: unknown key 'category' at the top level; labels go under "
        "'metadata:' (metadata: {category: ci})",
        "loop.yaml:6:3: error: state 'check' can give verdict 'failure' but nothing routes it; "
        "add 'failure: STATE' under 'route:', or a default '_: STATE'",
        "loop.yaml:11:11: error: state 'fix' has 'next' naming unknown state 'chekc' (did you "
        "mean 'check'?)",
    ]


def test_a_misspelt_key_hides_nothing_else_in_its_state(tmp_path: Path) -> None:
    text = OK.replace("    on_failure: fix\n", "    descripton: run the tests\n").replace(
        "action: make test", "action: make test ${context.target}"
    )
    assert lines(tmp_path, text) == [
        "loop.yaml:5:3: error: state 'check' can give verdict 'failure' but nothing routes it; "
        "add 'failure: STATE' under 'route:', or a default '_: STATE'",
        "loop.yaml:6:13: error: '${context.target}' in 'action' of state 'check': there is no "
        "context key 'target'; define it under 'context:'",
        "loop.yaml:8:5: error: unknown key 'descripton' in state 'check' (did you mean "
        "'description'?); valid keys: action, action_type, ask, capture, choices, description, "
        "evaluate, fail_fast, for_each, join, loop, max_concurrency, next, on_error, "
        "on_failure, on_maintain, on_success, on_timeout, outcome, parallel, retry, route, "
        "terminal, timeout, with",
        "loop.yaml:9:3: warning: state 'fix' cannot be reached from initial state 'check'",
    ]


def test_a_wrong_value_off_the_routes_keeps_the_graph_checks(tmp_path: Path) -> None:
    text = "name: x\ninitial: a\nstates:\n  a: {action: 'true', timeout: soon, next: a}\n"
    assert lines(tmp_path, text) == [
        "loop.yaml:4:3: error: no state is terminal, so the run can only end at a limit; mark "
        "the state where it should end with 'terminal: true'",
        "loop.yaml:4:32: error: 'timeout' of state 'a' must be a number, not text ('soon')",
    ]


def test_a_broken_route_key_is_not_followed_by_guesses(tmp_path: Path) -> None:
    # 'fix' is reachable only through the misspelt key: no unreachable or uncovered news.
    text = OK.replace("on_failure: fix", "on_falure: fix")
    assert len(lines(tmp_path, text)) == 1
    text = OK.replace("on_failure: fix", "on_no: fix")
    assert len(lines(tmp_path, text)) == 1
    text = OK.replace("  done: {terminal: true}", "  done: {terminal: yes please}")
    assert lines(tmp_path, text) == [
        "loop.yaml:12:20: error: 'terminal' of state 'done' must be true or false, not text "
        "('yes please')",
    ]


def test_a_context_value_of_the_wrong_type_is_still_a_defined_key(tmp_path: Path) -> None:
    text = _in_fix("make fix ${context.files}") + "context: {files: [a, b]}\n"
    assert lines(tmp_path, text) == [
        "loop.yaml:14:18: error: 'context.files' must be text, a number, true or false, empty or a "
        "mapping (key: value lines), not a list",
    ]


def test_a_paradigm_file_with_an_unknown_key_is_still_compiled_and_checked(
    tmp_path: Path,
) -> None:
    text = (
        "name: g\nparadigm: goal\ngoal: tests pass\ncategory: ci\n"
        "tools:\n  - make test ${context.nope}\n  - make fix\n"
    )
    assert lines(tmp_path, text) == [
        "loop.yaml:4:1: error: unknown key 'category' at the top level; labels go under "
        "'metadata:' (metadata: {category: ci})",
        "loop.yaml:6:5: error: '${context.nope}' in 'action' of state 'evaluate': there is no "
        "context key 'nope'; define it under 'context:'",
    ]


def test_the_same_problem_twice_in_one_field_is_said_once(tmp_path: Path) -> None:
    assert lines(tmp_path, _in_fix("cp ${context.a} ${context.a}.bak")) == [
        "loop.yaml:10:13: error: '${context.a}' in 'action' of state 'fix': there is no "
        "context key 'a'; define it under 'context:'",
    ]


# -- hints that must stay quiet --------------------------------------------------------------------


@pytest.mark.parametrize(
    "action",
    [
        "make fix  # the usual fix",  # the shell would read the same comment
        "/ll:fix now   # a note for people",  # '# ' with a space: the author's comment
        "'echo \"a #b\"'",  # quoted: nothing is cut
        "echo a#b",  # no space before '#': not a comment
    ],
)
def test_comments_that_cut_nothing_give_no_warning(tmp_path: Path, action: str) -> None:
    assert lines(tmp_path, _in_fix(action)) == []


@pytest.mark.parametrize(
    ("command", "slash", "comment", "cut"),
    [
        ('echo "a', False, 'b"', True),
        ("echo 'a", False, "b'", True),
        ("echo $(date", False, " x)", True),
        ("echo `date", False, "x`", True),
        ("echo a\\", False, "b", True),
        ("echo 'a' \"b\" $(c) `d`", False, " note", False),
        ("/fix issue", True, "42", True),
        ("/fix issue", True, " note", False),
    ],
)
def test_comment_cuts_command(command: str, slash: bool, comment: str, cut: bool) -> None:
    from little_loops.load.hints import comment_cuts_command

    assert comment_cuts_command(command, comment, slash=slash) is cut


def test_operator_aliases_name_real_operators() -> None:
    from little_loops.evaluators.deterministic import OPERATORS
    from little_loops.load import hints

    assert hints.OPERATORS == OPERATORS
    for word in ("gte", ">=", "=>", "lte", "<=", "==", "=", "equals", "!=", "<>", "<", ">", "GE"):
        assert hints.operator_for(word) in OPERATORS, word
    assert hints.operator_for("gte") == "ge"
    assert hints.operator_for("lte") == "le"
    assert hints.operator_for("banana") is None


def test_x_keys_and_metadata_are_accepted_and_ignored(tmp_path: Path) -> None:
    text = (
        OK.replace("    action: make fix", "    action: make fix\n    x-owner: team-a")
        .replace("  done: {terminal: true}", "  done: {terminal: true, x-note: [1, 2]}")
        .replace(
            "    on_failure: fix",
            "    on_failure: fix\n"
            "    evaluate: {type: exit_code, x-why: default}\n"
            "    retry: {max_attempts: 2, x-a: 1}",
        )
        + "metadata: {category: ci, labels: [nightly], owner: {team: a}}\n"
        + "x-anchors: &shared {timeout: 5}\n"
        + "llm: {x-cost-center: 42}\n"
    )
    assert lines(tmp_path, text) == []
    loop, _ = try_load(tmp_path / "loop.yaml")
    assert loop is not None
    check = loop.states["check"]
    assert check.retry is not None
    assert check.retry.max_attempts == 2
    assert check.evaluate is not None
    assert check.evaluate.type == "exit_code"


def test_troubleshooting_quotes_every_hint_as_printed() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md").read_text()
    for case, (_, expected) in HINTS.items():
        for line in expected:
            assert line in text, case
