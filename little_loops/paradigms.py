"""Paradigm files (goal, convergence, invariants, imperative) compiled to the native FSM document.

The loader checks a paradigm file against its own section of the schema first, then
`compile_document` turns it into a plain FSM dict plus a `SourceMap` that places every compiled
node at the paradigm line it came from, so the loader's FSM checks report paradigm lines too.

Choices SPEC section 9 leaves open (docs/loop-reference.md, "Paradigms"):
- `error` and `timeout` of a check are routed like `failure` (to the fix, or back to step_0);
  a convergence `measure` that gives `error` or `timeout` ends at `failed` (failure): without
  a number there is nothing to converge on.
- After `fix_NAME`, an invariants loop starts again at the first check, so `all_valid` means
  every check passed in one sweep with no fix in between.
- A slash action whose verdict is not used (fix, apply, steps) is evaluated by `exit_code`,
  so no judge is paid for a verdict that routes nowhere else; such a step goes on whatever
  its verdict (`next` plus `on_failure`/`on_error` to the same state), as SPEC section 9
  describes, since `next` alone would stop the run on a failure.
- `check_done` runs no action: `until` reads the last step's output (`source` defaults to
  `${prev.output}`); `exit_code` there means the last step's exit code; `llm_structured`
  is refused, since the judge would see no output.
- `finally` (an extra) is an action that every end state runs; the loop-wide keys
  `action_timeout`, `shell`, `working_dir`, `secrets`, `llm`, `max_cost_usd`, `metadata`
  and top-level `x-` keys pass through.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import Diagnostic
from .loader import SourceMap, guess_action_type, load_document, read_document
from .model import Pos
from .schema import NodePath, locate_issue, schema_issues

PARADIGMS = ("goal", "convergence", "invariants", "imperative")
# Loop-wide keys a paradigm file may set, copied to the compiled loop as they are.
PASS_THROUGH = (
    "description",
    "max_iterations",
    "timeout",
    "backoff",
    "action_timeout",
    "shell",
    "working_dir",
    "max_cost_usd",
    "llm",
    "secrets",
    "context",
    "metadata",
)


@dataclass(frozen=True)
class Compiled:
    """A paradigm file as an FSM document, with where each compiled node came from."""

    paradigm: str
    doc: dict[str, Any]
    smap: SourceMap
    origins: dict[str, str] = field(default_factory=dict)  # state -> "constraints[1] 'lint' ..."


def compile_document(
    doc: Mapping[str, Any], smap: SourceMap, *, file: str
) -> tuple[Compiled | None, list[Diagnostic]]:
    """The FSM form of a paradigm document that already passed the schema, or its errors."""
    paradigm = str(doc["paradigm"])
    out = _Out(doc, smap, paradigm)
    problems = _PROBLEMS[paradigm](doc, smap)
    if problems:
        return None, [Diagnostic(file, p.line, p.col, "error", c, m) for p, c, m in problems]
    _COMPILERS[paradigm](doc, out)
    return out.result(), []


def compile_file(path: Path, file: str | None = None) -> tuple[Compiled | None, list[Diagnostic]]:
    """Read, check and compile a paradigm file; every diagnostic, FSM-level ones included.

    A file in the native form gives (None, []) when it is valid.
    """
    file = str(path) if file is None else file
    doc, smap, diagnostics = read_document(path, file)
    if smap is None or not isinstance(doc, dict) or doc.get("paradigm") not in PARADIGMS:
        if smap is not None:
            _, diagnostics = load_document(doc, path=path, file=file, smap=smap)
        return None, diagnostics
    issues = [
        locate_issue(i, file=file, locate_value=smap.value, locate_key=smap.key)
        for i in schema_issues(doc)
    ]
    if issues:
        return None, _sorted(issues)
    compiled, problems = compile_document(doc, smap, file=file)
    if compiled is None:
        return None, problems
    loop, found = load_document(compiled.doc, path=path, file=file, smap=compiled.smap)
    return (compiled if loop is not None else None), found


def _sorted(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.line, d.col, d.message))


# -- building the compiled document -------------------------------------------------------------


class _Out:
    """The compiled document under construction, and its map back to the paradigm file."""

    def __init__(self, doc: Mapping[str, Any], src: SourceMap, paradigm: str) -> None:
        self.doc, self.src, self.paradigm = doc, src, paradigm
        self.smap = SourceMap()
        self.states: dict[str, dict[str, Any]] = {}
        self.origins: dict[str, str] = {}
        self.top: dict[str, Any] = {}
        self.initial = ""

    def graft(self, dest: NodePath, source: NodePath) -> None:
        """Every position recorded under `source` in the paradigm file, now under `dest`."""
        n = len(source)
        for path, pos in self.src.values.items():
            if path[:n] == source:
                self.smap.values[dest + path[n:]] = pos
        for path, pos in self.src.keys.items():
            if path[:n] == source:
                self.smap.keys[dest + path[n:]] = pos
        self.smap.values.setdefault(dest, self.src.value(source))
        self.smap.keys.setdefault(dest, self.src.key(source))

    def state(self, name: str, body: dict[str, Any], source: NodePath, label: str) -> None:
        """Add a state whose node (and action) point at `source` in the paradigm file."""
        self.states[name] = body
        self.graft(("states", name), source)
        if "action" in body:
            self.graft(("states", name, "action"), source)
        line = self.src.value(source).line
        self.origins[name] = f"from {label} (line {line})"
        if not self.initial:
            self.initial = name
            self.graft(("initial",), source)

    def end(self, name: str, outcome: str, description: str) -> None:
        """A terminal state the paradigm adds; it runs `finally` when the file gives one."""
        body: dict[str, Any] = {"description": description}
        source: NodePath = ("paradigm",)
        if "finally" in self.doc:
            body["action"] = self.doc["finally"]
            source = ("finally",)
        body["terminal"] = True
        if outcome == "failure":
            body["outcome"] = "failure"
        self.states[name] = body
        self.graft(("states", name), ("paradigm",))
        if "action" in body:
            self.graft(("states", name, "action"), source)
        line = self.src.value(("paradigm",)).line
        self.origins[name] = f"added by 'paradigm: {self.paradigm}' (line {line})"

    def result(self) -> Compiled:
        doc: dict[str, Any] = {"name": self.doc["name"]}
        self.graft(("name",), ("name",))
        if "description" in self.top:
            doc["description"] = self.top.pop("description")
        for key in (*PASS_THROUGH, *(k for k in self.doc if k.startswith("x-"))):
            if key in self.doc:
                doc[key] = self.doc[key]
                self.graft((key,), (key,))
        doc.update(self.top)
        doc["initial"] = self.initial
        doc["states"] = self.states
        self.graft(("states",), ("paradigm",))
        self.smap.values[()] = self.src.value(())
        return Compiled(self.paradigm, doc, self.smap, self.origins)


def _is_slash(action: str) -> bool:
    return guess_action_type(action) == "slash"


def _then(action: str, target: str) -> dict[str, Any]:
    """A state that runs `action` and goes to `target` whatever its verdict.

    `next` is only the success route (SPEC section 6), so `on_failure` and `on_error` (which
    also takes `timeout`) name the same target.
    """
    body: dict[str, Any] = {"action": action}
    if _is_slash(action):
        body["evaluate"] = {"type": "exit_code"}  # no judge: the verdict routes nowhere else
    body["next"] = target
    body["on_failure"] = target
    body["on_error"] = target
    return body


def _check(action: str, passed: str, otherwise: str) -> dict[str, Any]:
    """A state that runs `action`: success goes to `passed`, every other verdict to `otherwise`."""
    route = {"success": passed, "failure": otherwise}
    if _is_slash(action):
        route["_"] = otherwise  # the judge's blocked, partial, ...
    route["_error"] = otherwise
    return {"action": action, "route": route}


# -- the four paradigms -------------------------------------------------------------------------


def _goal(doc: Mapping[str, Any], out: _Out) -> None:
    check, fix = doc["tools"]
    out.top["description"] = doc.get("description", doc["goal"])
    if "description" not in doc:
        out.graft(("description",), ("goal",))
    evaluate = {"description": doc["goal"], **_check(check, "done", "fix")}
    out.state("evaluate", evaluate, ("tools", 0), "tools[0], the check")
    out.state("fix", _then(fix, "evaluate"), ("tools", 1), "tools[1], the fix")
    out.end("done", "success", "the goal is met")


def _convergence(doc: Mapping[str, Any], out: _Out) -> None:
    evaluate: dict[str, Any] = {"type": "convergence", "target": doc["toward"]}
    for key in ("tolerance", "direction"):
        if key in doc:
            evaluate[key] = doc[key]
    measure = {
        "action": doc["check"],
        "evaluate": evaluate,
        "route": {"target": "done", "progress": "apply", "stall": "stalled", "_error": "failed"},
    }
    out.state("measure", measure, ("check",), "check")
    out.graft(("states", "measure", "evaluate"), ("check",))
    for key, source in (
        ("target", "toward"),
        ("tolerance", "tolerance"),
        ("direction", "direction"),
    ):
        if source in doc:
            out.graft(("states", "measure", "evaluate", key), (source,))
    out.state("apply", _then(doc["using"], "measure"), ("using",), "using")
    out.end("done", "success", "the number reached the target")
    out.end("stalled", "failure", "the number stopped moving toward the target")
    out.end("failed", "failure", "the check failed, timed out or printed no number")


def _invariants(doc: Mapping[str, Any], out: _Out) -> None:
    constraints = doc["constraints"]
    first = f"check_{constraints[0]['name']}"
    for i, item in enumerate(constraints):
        name = item["name"]
        passed = f"check_{constraints[i + 1]['name']}" if i + 1 < len(constraints) else "all_valid"
        label = f"constraints[{i}] '{name}'"
        at: NodePath = ("constraints", i)
        check = _check(item["check"], passed, f"fix_{name}")
        out.state(f"check_{name}", check, (*at, "check"), f"{label} check")
        out.state(f"fix_{name}", _then(item["fix"], first), (*at, "fix"), f"{label} fix")
    if doc.get("maintain") is True:
        out.top["maintain"] = True
        out.graft(("maintain",), ("maintain",))
    out.end("all_valid", "success", "every check passed in one sweep")


def _imperative(doc: Mapping[str, Any], out: _Out) -> None:
    steps = doc["steps"]
    for i, action in enumerate(steps):
        target = f"step_{i + 1}" if i + 1 < len(steps) else "check_done"
        out.state(f"step_{i}", _then(action, target), ("steps", i), f"steps[{i}]")
    until = _until(doc["until"])
    if until["type"] == "convergence":
        route = {"target": "done", "_": "step_0", "_error": "step_0"}
    else:
        route = {"success": "done", "failure": "step_0", "_error": "step_0"}
    check_done = {"description": "the until condition", "evaluate": until, "route": route}
    out.state("check_done", check_done, ("until",), "until")
    out.graft(("states", "check_done", "evaluate"), ("until",))
    out.end("done", "success", "the until condition holds")


def _until(raw: Mapping[str, Any]) -> dict[str, Any]:
    """`until` as check_done's evaluator: it reads the last step, since check_done runs nothing."""
    kind = raw.get("type")
    if kind == "exit_code":
        return {
            "type": "output_numeric",
            "source": "${prev.exit_code}",
            "operator": "eq",
            "target": 0,
        }
    if kind in ("all", "any"):
        return {**raw, "of": [_until(sub) for sub in raw["of"]]}
    if "source" in raw:
        return dict(raw)
    return {**raw, "source": "${prev.output}"}


_COMPILERS = {
    "goal": _goal,
    "convergence": _convergence,
    "invariants": _invariants,
    "imperative": _imperative,
}


# -- paradigm-level checks the schema cannot express --------------------------------------------

Problem = tuple[Pos, str, str]


def _no_problems(doc: Mapping[str, Any], smap: SourceMap) -> list[Problem]:
    return []


def _constraint_problems(doc: Mapping[str, Any], smap: SourceMap) -> list[Problem]:
    seen: dict[str, Pos] = {}
    out: list[Problem] = []
    for i, item in enumerate(doc["constraints"]):
        name = item["name"]
        pos = smap.value(("constraints", i, "name"))
        if name in seen:
            out.append(
                (
                    pos,
                    "duplicate-constraint",
                    f"constraint name '{name}' is used twice (first at line {seen[name].line}); "
                    f"each name must be unique, since it names the states check_{name} and "
                    f"fix_{name}",
                )
            )
        else:
            seen[name] = pos
    return out


def _until_problems(doc: Mapping[str, Any], smap: SourceMap) -> list[Problem]:
    out: list[Problem] = []

    def walk(raw: Mapping[str, Any], at: NodePath) -> None:
        if raw.get("type") == "llm_structured":
            out.append(
                (
                    smap.value((*at, "type")),
                    "judge-in-until",
                    "'until' cannot be llm_structured: check_done runs no action, so the judge "
                    "would see no output; judge the work in a 'goal' loop (a slash CHECK), or "
                    "write the loop as states ('ll compile' prints a start)",
                )
            )
        for i, sub in enumerate(raw.get("of") or ()):
            walk(sub, (*at, "of", i))

    walk(doc["until"], ("until",))
    return out


_PROBLEMS = {
    "goal": _no_problems,
    "convergence": _no_problems,
    "invariants": _constraint_problems,
    "imperative": _until_problems,
}


# -- `ll compile` output ------------------------------------------------------------------------


def to_yaml(compiled: Compiled, source: str) -> str:
    """The compiled loop as commented YAML that `ll validate` accepts."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value.rstrip("\n") else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)

    def dump(value: Mapping[str, Any]) -> str:
        return yaml.dump(
            dict(value), Dumper=Dumper, sort_keys=False, allow_unicode=True, width=10_000
        )

    doc = compiled.doc
    lines = [
        f"# Compiled by `ll compile` from {source} (paradigm: {compiled.paradigm}).",
        "# Edit the source file and compile again; `ll run` compiles it by itself.",
    ]
    out = "\n".join(lines) + "\n"
    for key, value in doc.items():
        if key != "states":
            out += dump({key: value})
    out += "states:\n"
    for name, body in doc["states"].items():
        out += f"  # {compiled.origins.get(name, '')}\n"
        out += "".join("  " + line + "\n" for line in dump({name: body}).splitlines())
    return out


# -- `ll init` starters -------------------------------------------------------------------------

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
    from .errors import LoopError
    from .schema import schema_text

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
