"""`ll init`: a commented starter loop in each form, and the editor schema beside it."""

from __future__ import annotations

from pathlib import Path

_NAME_OK = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

_HEADS = {
    "fsm": "the native form (paradigm: fsm): states that run commands and route on verdicts",
    "goal": "paradigm: goal: run a check; while it fails, run a fix and check again",
    "convergence": "paradigm: convergence: move a number toward a target, one change at a time",
    "invariants": "paradigm: invariants: keep several checks passing, each with its own fix",
    "imperative": "paradigm: imperative: run steps in order until a condition holds",
}

_BODIES = {
    "fsm": """\
name: @NAME@
description: Check; while the check fails, fix and check again.
initial: check
max_iterations: 10            # a safety cap on steps (state executions)
on_error: give_up             # a step that could not run, timed out, or a failed `next` step
context:
  marker: .@NAME@.fixed       # used below as ${context.marker}
states:
  check:
    # A shell action's exit code is its verdict: 0 success, 1 failure, anything else error.
    action: test -f ${context.marker}
    on_success: done
    on_failure: fix
  fix:
    # A shell command, or a Claude Code slash command such as /ll:check_code fix.
    action: touch ${context.marker} && echo fixed
    next: check               # when it succeeds; otherwise the loop's on_error
  done:
    action: rm -f ${context.marker} && echo all good    # a terminal's action runs too
    terminal: true
  give_up:
    terminal: true
    outcome: failure          # `ll run` exits 1
""",
    "goal": """\
name: @NAME@
paradigm: goal
goal: the file .@NAME@.greeting says hello
max_iterations: 10            # a safety cap on steps
tools:
  # CHECK: exit 0 when the goal is met (this one also tidies up after itself).
  - grep -qsx hello .@NAME@.greeting && rm .@NAME@.greeting
  # FIX: one step toward the goal; CHECK runs again after it.
  - echo hello > .@NAME@.greeting
""",
    "convergence": """\
name: @NAME@
paradigm: convergence
description: Bring a counter down to zero, three at a time.
max_iterations: 20            # a safety cap on steps
check: cat .@NAME@.count 2>/dev/null || echo 10     # prints the number
toward: 0
direction: minimize           # or maximize
tolerance: 0                  # how close counts as reached, and the least change that counts
using: |
  n=$(cat .@NAME@.count 2>/dev/null || echo 10)
  echo $((n - 3)) > .@NAME@.count
finally: rm -f .@NAME@.count  # every end state runs this
""",
    "invariants": """\
name: @NAME@
paradigm: invariants
description: Keep a scratch folder in shape.
max_iterations: 20            # a safety cap on steps
context:
  dir: .@NAME@.work           # used below as ${context.dir}
constraints:                  # checked in this order; after any fix, from the first again
  - name: folder
    check: test -d ${context.dir}
    fix: mkdir -p ${context.dir}
  - name: settings
    check: grep -qs '^retries=' ${context.dir}/settings
    fix: echo retries=3 >> ${context.dir}/settings
finally: rm -rf ${context.dir} # every end state runs this
""",
    "imperative": """\
name: @NAME@
paradigm: imperative
description: Add a line to a file until it has three.
max_iterations: 20            # a safety cap on steps
steps:
  - echo "one more line" >> .@NAME@.lines
  - wc -l < .@NAME@.lines
until:                        # an evaluator on the last step's output
  type: output_numeric
  operator: ge
  target: 3
finally: rm -f .@NAME@.lines  # every end state runs this
""",
}


# The editor schema `ll init` writes beside the loop; the modeline names it relatively, so it
# keeps working when the folder moves, is cloned, or the venv holding `ll` is recreated.
SCHEMA_FILE = "loop.schema.json"
SCHEMA_REF = f"./{SCHEMA_FILE}"


def starter(paradigm: str, name: str, schema_ref: str) -> str:
    """A commented starter loop that validates without warnings and runs to success as it is."""
    compiled = "" if paradigm == "fsm" else f" && ll compile {name}.yaml"
    head = f"""\
# yaml-language-server: $schema={schema_ref}
# {name}: a starter loop in {_HEADS[paradigm]}.
# Try it:  ll validate {name}.yaml{compiled} && ll run {name}.yaml
# It only touches scratch files next to it and removes them at the end; then put your own
# commands in place of these (tests, linters, `/ns:command` slash commands for Claude Code).
"""
    return head + _BODIES[paradigm].replace("@NAME@", name)


def write_starter(path: Path, paradigm: str, *, force: bool) -> Path | None:
    """Write `starter()` to `path` (NAME.yaml), and the schema its modeline names beside it.

    Refuses to overwrite the loop unless `force`. The schema file is written when it is
    missing or differs from this `ll`'s (an older copy is refreshed); returns its path then,
    else None.
    """
    from little_loops.errors import LoopError
    from little_loops.load.schema import schema_text

    name = path.name.removesuffix(".yaml").removesuffix(".yml")
    if not name or any(c not in _NAME_OK for c in name):
        raise LoopError(f"'{name}' is not a valid loop name; use letters, digits, '-', '_' and '.'")
    if paradigm not in _BODIES:
        raise LoopError(f"unknown paradigm '{paradigm}'; use one of: {', '.join(_BODIES)}")
    if path.exists() and not force:
        raise LoopError(f"{path} already exists; pass --force to overwrite it")
    if not path.parent.is_dir():
        raise LoopError(f"{path.parent} is not a folder; create it first")
    text = starter(paradigm, name, SCHEMA_REF)
    try:
        with path.open("w" if force else "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise LoopError(f"{path} already exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise LoopError(f"cannot write {path}: {exc.strerror or exc}") from None
    schema = path.parent / SCHEMA_FILE
    wanted = schema_text()
    try:
        if schema.is_file() and schema.read_text(encoding="utf-8") == wanted:
            return None
        schema.write_text(wanted, encoding="utf-8")
    except OSError as exc:
        raise LoopError(f"cannot write {schema}: {exc.strerror or exc}") from None
    return schema
