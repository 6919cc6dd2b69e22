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
  `action_timeout`, `shell`, `working_dir`, `secrets`, `llm`, `judges`, `max_cost_usd`, `metadata`
  and top-level `x-` keys pass through.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from little_loops.errors import Diagnostic
from little_loops.load.builder import guess_action_type
from little_loops.load.composer import SourceMap
from little_loops.model.loop import Pos
from little_loops.wording import NodePath

# Loop-wide keys a paradigm file may set, copied to the compiled loop as they are.
PASS_THROUGH = (
    "description",
    "max_iterations",
    "timeout",
    "backoff",
    "keep_runs",
    "action_timeout",
    "shell",
    "working_dir",
    "max_cost_usd",
    "llm",
    "judges",
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
