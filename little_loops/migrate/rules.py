"""`ll migrate`: one upstream loop document rewritten, key by key, keeping its behaviour.

Each rule edits the ruamel tree in place (comments and key order stay) and leaves a note saying
what it did, with the upstream line (migrate_notes). The differences it carries are the table
of docs/migrating.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from little_loops.migrate.evals import (
    STALL_TYPES,
    convert_classify,
    convert_keyed_numeric,
    convert_stall,
)
from little_loops.migrate.notes import (
    Notes,
    line_of,
    rename,
    set_near,
)
from little_loops.migrate.routes import (
    EVALUATORS,
    convert_routes,
    dynamic_loop,
)

_TOP_RENAMES = {
    "max_steps": "max_iterations",
    "on_max_steps": "on_max_iterations",
    "default_timeout": "action_timeout",
}
_TOP_KEEP = frozenset(
    [
        "name",
        "description",
        "initial",
        "states",
        "context",
        "outputs",
        "timeout",
        "maintain",
        "backoff",
        "on_error",
        "llm",
        "max_iterations",
        "on_max_iterations",
        "action_timeout",
        "max_cost_usd",
        "secrets",
        "shell",
        "working_dir",
        "metadata",
        "paradigm",
    ]
)
_METADATA = ("category", "visibility", "labels")
_TOP_DROPPED = {
    "scope": "upstream's lock on the paths a run may touch; `ll` locks the loop, not paths",
    "on_handoff": "what upstream does when a Claude session's context fills; `ll` starts a "
    "fresh `claude -p` for every slash step, so there is nothing to hand off",
    "circuit": "upstream's rate-limit circuit breaker; use `retry:` on the states that call APIs",
    "singleton": "upstream's one-run-at-a-time flag; `ll` always holds one lock per loop",
    "tamper_guard": "upstream's check that a run did not edit test files",
    "artifact_versioning": "upstream's copies of artifacts per iteration",
}
_STATE_KEEP = frozenset(
    [
        "action",
        "action_type",
        "evaluate",
        "route",
        "on_success",
        "on_failure",
        "on_error",
        "on_timeout",
        "next",
        "terminal",
        "outcome",
        "capture",
        "timeout",
        "retry",
        "on_maintain",
        "description",
        "loop",
        "with",
    ]
)
_STATE_DROPPED = {
    "on_rate_limit_exhausted": "upstream's long wait on Claude rate limits; here a rate-limited "
    "`claude -p` is an `error` verdict, routed by `on_error`",
    "rate_limit_max_wait_seconds": "upstream's rate-limit wait",
    "rate_limit_long_wait_ladder": "upstream's rate-limit wait",
    "max_rate_limit_retries": "upstream's rate-limit retries; `retry:` is the way here",
    "rate_limit_backoff_base_seconds": "upstream's rate-limit wait",
    "throttle": "upstream's throttling of Claude calls",
    "on_throttle_hard": "upstream's throttling route",
    "pruning_profile": "upstream's trimming of the Claude session's context",
    "session_mode": "upstream's Claude session reuse; every slash step is a fresh `claude -p`",
    "worktree": "upstream runs this step in a git worktree; `ll` runs it where `ll` was started",
    "agent": "upstream's choice of Claude agent for the step",
    "retryable_exit_codes": "upstream re-ran the action on these exit codes; "
    "`retry: {on: [error]}` re-runs on exit codes other than 0 and 1",
    "effort": "upstream's reasoning effort for the Claude call; the step's routes do not "
    "depend on it",
    "tools": "upstream's list of tools the Claude call may use; `claude -p` here gets the "
    "permission flags of `--claude-flags`",
    "idle_timeout": "upstream's kill of a Claude call that prints nothing for a while; "
    "`timeout:` bounds the whole step here",
    "append_to_messages": "upstream's shared message log (`${messages}`)",
    "cost_ceiling": "upstream's per-state cost cap; `max_cost_usd` caps the run here",
    "request_path": "upstream's choice between the Claude CLI and its API for the step; "
    "every slash step is `claude -p` here",
    "tamper_guard": "upstream's check that the step did not edit test files",
}
# The state keys upstream's runner reads (its StateConfig at a12b9397d); any other key of a
# state had no effect there, so dropping it changes nothing.
_UPSTREAM_READS = frozenset(
    [
        "action",
        "action_type",
        "agent",
        "append_to_messages",
        "capture",
        "context_passthrough",
        "cost_ceiling",
        "description",
        "effort",
        "evaluate",
        "fragment",
        "idle_timeout",
        "learning",
        "loop",
        "max_rate_limit_retries",
        "max_retries",
        "model",
        "next",
        "on_blocked",
        "on_error",
        "on_failure",
        "on_maintain",
        "on_no",
        "on_partial",
        "on_rate_limit_exhausted",
        "on_retry_exhausted",
        "on_success",
        "on_throttle_hard",
        "on_yes",
        "params",
        "prepatch_check",
        "pruning_profile",
        "rate_limit_backoff_base_seconds",
        "rate_limit_long_wait_ladder",
        "rate_limit_max_wait_seconds",
        "request_path",
        "retryable_exit_codes",
        "route",
        "session_mode",
        "tamper_guard",
        "terminal",
        "throttle",
        "timeout",
        "tools",
        "type",
        "with",
        "worktree",
    ]
)
_FAILURE_NAMES = ("failed", "error", "aborted")
_EVAL_KEEP = frozenset(
    [
        "type",
        "pattern",
        "source",
        "target",
        "operator",
        "prompt",
        "min_confidence",
        "path",
        "tolerance",
        "previous",
        "direction",
        "schema",
        "negate",
        "literal",
        "model",
    ]
)


@dataclass(frozen=True)
class Links:
    """What the rules need from outside one file: sub-loop paths and their inputs."""

    loop_path: Callable[[str], str | None]  # upstream `loop:` name -> path written here
    child_inputs: Callable[[str], list[str]]  # upstream `loop:` name -> the keys it reads
    own_context: frozenset[str] = frozenset()  # this loop's context keys (and `run_dir`)


def convert_top(doc: CommentedMap, notes: Notes) -> None:
    """Top-level keys: renames, metadata, inputs, and what has no equivalent."""
    for old, new in _TOP_RENAMES.items():
        if old in doc:
            notes.carried(line_of(doc, old), f"`{old}` is `{new}` here")
            rename(doc, old, new)
    meta = {k: doc[k] for k in _METADATA if k in doc}
    if meta:
        lines = [line_of(doc, k) for k in meta]
        for key in meta:
            del doc[key]
        target = doc.setdefault("metadata", CommentedMap())
        target.update(meta)
        notes.carried(lines[0], f"{', '.join(meta)}: moved under `metadata:`", lines)
    _inputs(doc, notes)
    upstream = CommentedMap()
    for key in list(doc):
        if key in _TOP_KEEP or str(key).startswith("x-"):
            continue
        line = line_of(doc, key)
        if str(key).endswith("_ok"):
            notes.dropped(line, f"`{key}` acknowledged an upstream lint; `ll validate` has none")
        else:
            why = _TOP_DROPPED.get(str(key), "an upstream setting")
            notes.dropped(line, f"`{key}`: {why}; kept under `x-upstream`")
            upstream[key] = doc[key]
        del doc[key]
    if upstream:
        doc["x-upstream"] = upstream


def _inputs(doc: CommentedMap, notes: Notes) -> None:
    """`parameters:`, `required_inputs:` and `input_key:` become context inputs."""
    context = doc.get("context")
    if not isinstance(context, dict):
        context = CommentedMap()
    params = doc.get("parameters")
    if isinstance(params, dict):
        for key, spec in params.items():
            context[key] = _parameter(spec, context.get(key))
        notes.carried(line_of(doc, "parameters"), "`parameters:` are context inputs here")
        run_dir = context.get("run_dir")
        if "run_dir" in params and (run_dir is None or _no_default(run_dir)):
            # upstream's runner sets `run_dir` itself when nobody gives it, required or not
            filled = CommentedMap(default="${loop.run_dir}")
            if isinstance(run_dir, dict) and run_dir.get("description"):
                filled["description"] = run_dir["description"]
            context["run_dir"] = filled
            notes.carried(
                line_of(params, "run_dir"),
                "parameter `run_dir`: upstream's runner filled it when no caller gave it; "
                "here it defaults to `${loop.run_dir}`",
            )
        del doc["parameters"]
    required = doc.get("required_inputs")
    if isinstance(required, list):
        for key in (k for k in required if isinstance(k, str)):
            if context.get(key) in (None, ""):
                context[key] = None
        notes.carried(
            line_of(doc, "required_inputs"),
            "`required_inputs:` are context keys set to `~` (required: `--set KEY=VALUE`)",
        )
        del doc["required_inputs"]
    key = doc.get("input_key")
    if isinstance(key, str):
        if key not in context:
            context[key] = ""
        notes.changed(
            line_of(doc, "input_key"),
            f"`input_key: {key}`: upstream's positional input (`ll-loop run NAME TEXT`) is "
            f"`ll run FILE --set {key}=TEXT` here",
        )
        del doc["input_key"]
    if context and "context" not in doc:
        doc.insert(_after(doc, ("initial", "description", "name")), "context", context)
    numbers = [
        k for k, v in context.items() if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    for name in numbers:
        # upstream's context values are untyped: a number here would type its key, and a
        # caller's `with:` or `--set` that upstream took (`0.6` for `90`) would be refused
        context[name] = DoubleQuotedScalarString(str(context[name]))
    if numbers:
        notes.carried(
            line_of(doc, "context"),
            f"context {', '.join(f'`{k}`' for k in numbers)}: upstream's context values have "
            "no type, so a number is written as text here (a plain number would make its key "
            "an integer or a number, refusing other values given with `with:` or `--set`)",
        )
    for name, value in list(context.items()):
        if isinstance(value, list | dict) and not _is_input_spec(value):
            import json

            context[name] = json.dumps(value)
            notes.changed(
                line_of(context, name),
                f"context '{name}' held a list or mapping; here context values are text: "
                "it is written as JSON text",
            )


def _parameter(spec: Any, existing: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    out = CommentedMap()
    kind = spec.get("type")
    if "default" in spec and not isinstance(spec["default"], list | dict):
        out["default"] = spec["default"]
    elif existing is not None and not spec.get("required"):
        out["default"] = existing
    elif not spec.get("required"):
        out["default"] = ""  # optional with no value: empty, as upstream leaves it
        kind = "string" if kind == "string" else None
    if kind in ("string", "integer", "number", "boolean"):
        out.insert(0, "type", kind)
    if "enum" in spec:
        out["enum"] = spec["enum"]
    if spec.get("description"):
        out["description"] = spec["description"]
    return out if out else None


def _no_default(value: Any) -> bool:
    return isinstance(value, dict) and ("default" not in value or value["default"] == "")


def _is_input_spec(value: Any) -> bool:
    return isinstance(value, dict) and set(value) <= {"type", "default", "enum", "description"}


def _after(doc: CommentedMap, keys: tuple[str, ...]) -> int:
    order = list(doc)
    for key in keys:
        if key in order:
            return order.index(key) + 1
    return 0


# -- states ----------------------------------------------------------------------------


def convert_state(
    name: str, state: CommentedMap, line: int, notes: Notes, links: Links
) -> list[tuple[str, CommentedMap]]:
    """One state: its kind, evaluator, routes and upstream-only keys.

    Returns new states to add after this one (a stall check's or `classify`'s), converted too.
    """
    if state.get("failure") is not None:
        failed, at = bool(state["failure"]), line_of(state, "failure") or line
        rename(state, "failure", "outcome")
        state["outcome"] = "failure" if failed else "success"
        notes.carried(at, "`failure: true` is `outcome: failure`")
    if state.get("terminal") and name in _FAILURE_NAMES and "outcome" not in state:
        set_near(state, "terminal", "outcome", "failure")
        notes.carried(
            line,
            f"terminal '{name}': upstream counts a terminal named failed/error/aborted as a "
            "failure; written `outcome: failure` (exit 1)",
        )
    _terminal_action(name, state, line, notes)
    _action_type(name, state, line, notes)
    if "loop" in state:
        _loop(name, state, line, notes, links)
    for old, new in (("on_yes", "on_success"), ("on_no", "on_failure")):
        if old in state:
            if new in state:
                notes.hand(line, f"state '{name}': both `{old}` and `{new}`; keep one")
                continue
            at = line_of(state, old) or line
            rename(state, old, new)
            notes.carried(at, "`on_yes`/`on_no` are `on_success`/`on_failure`")
    _custom_routes(state, line, notes)
    _unevaluated_next(state, line, notes)
    extra: list[tuple[str, CommentedMap]] = []
    spec = state.get("evaluate")
    if isinstance(spec, dict) and spec.get("type") == "output_numeric" and "key" in spec:
        extra = convert_keyed_numeric(name, state, line_of(state, "evaluate") or line, notes)
    elif isinstance(spec, dict) and spec.get("type") in STALL_TYPES:
        added = convert_stall(name, state, line_of(state, "evaluate") or line, notes)
        extra = [(f"{name}_stall", added)] if added is not None else []
    elif isinstance(spec, dict) and spec.get("type") == "classify":
        extra = convert_classify(name, state, line_of(state, "evaluate") or line, notes)
    elif isinstance(spec, dict):
        _evaluate(name, state, line, notes)
    convert_routes(name, state, line, notes)
    dropped = CommentedMap()
    for key in list(state):
        if key in _STATE_KEEP or str(key).startswith("x-"):
            continue
        at = line_of(state, key) or line
        why = _STATE_DROPPED.get(str(key))
        if why is None and str(key) not in _UPSTREAM_READS:
            why = "upstream's runner does not read this key either (it had no effect)"
        if why is None:  # it may be what the state is for (`type: learning`): a person decides
            notes.hand(
                at,
                f"state '{name}': `{key}` has no equivalent here; kept under "
                "`x-upstream`, so the state does not do what it did upstream",
            )
        else:
            notes.dropped(at, f"`{key}`: {why}; kept under `x-upstream`")
        dropped[key] = state.pop(key)
    if dropped:
        state["x-upstream"] = dropped
    return extra


# Route keys upstream names itself; any other `on_<verdict>` routes that verdict there.
_KNOWN_ON = frozenset(
    [
        "on_yes",
        "on_no",
        "on_success",
        "on_failure",
        "on_error",
        "on_timeout",
        "on_partial",
        "on_blocked",
        "on_maintain",
        "on_retry_exhausted",
        *_STATE_DROPPED,
    ]
)


def _terminal_action(name: str, state: CommentedMap, line: int, notes: Notes) -> None:
    """Upstream stops at a terminal before running anything; `ll` runs a terminal's action."""
    if not state.get("terminal") or not any(k in state for k in ("action", "loop")):
        return
    kept = CommentedMap()
    for key in ("action", "action_type", "evaluate", "capture", "timeout", "loop", "with"):
        if key in state:
            kept[key] = state.pop(key)
    upstream = state.setdefault("x-upstream", CommentedMap())
    upstream.update(kept)
    notes.carried(
        line,
        f"terminal '{name}': upstream ends the run on reaching a terminal and never runs its "
        "action (here a terminal's action runs, and a failing one fails the run); the action "
        "is kept under `x-upstream`, not run",
    )


def _custom_routes(state: CommentedMap, line: int, notes: Notes) -> None:
    """`on_<verdict>: X` for a verdict upstream has no shorthand for is `route: {verdict: X}`."""
    custom = [
        str(k)
        for k in state
        if str(k).startswith("on_") and k not in _KNOWN_ON and isinstance(state[k], str)
    ]
    if not custom:
        return
    route = state.get("route")
    if not isinstance(route, CommentedMap):
        route = CommentedMap()
        state.insert(list(state).index(custom[0]), "route", route)
    for key in custom:
        route.setdefault(key[3:], state.pop(key))
    notes.carried(line, f"`{'`, `'.join(custom)}`: written as `route:` entries")


def _unevaluated_next(state: CommentedMap, line: int, notes: Notes) -> None:
    """A state with `next:` (and no other verdict route) is never evaluated upstream."""
    routes = ("on_yes", "on_no", "on_success", "on_failure", "route", "on_partial", "on_blocked")
    if "next" not in state or "evaluate" not in state or any(k in state for k in routes):
        return
    upstream = state.setdefault("x-upstream", CommentedMap())
    upstream["evaluate"] = state.pop("evaluate")
    notes.carried(
        line,
        "`evaluate:` beside `next:`: upstream never evaluates a `next:` state, so the evaluator "
        "is kept under `x-upstream`, not run",
    )


def _action_type(name: str, state: CommentedMap, line: int, notes: Notes) -> None:
    kind = state.get("action_type")
    action = state.get("action")
    if kind is None and isinstance(action, str) and action.startswith("/"):
        first = action.split()[0][1:] if action.split() else ""
        if "/" in first:  # upstream sends any action that starts with `/` to Claude
            state.insert(list(state).index("action") + 1, "action_type", "slash")
            notes.carried(
                line_of(state, "action") or line,
                f"state '{name}': upstream runs an action starting with `/` as a prompt; "
                "written `action_type: slash` (here a path like that would run in the shell)",
            )
        return
    if kind in ("prompt", "slash_command"):
        state["action_type"] = "slash"
        notes.carried(
            line_of(state, "action_type") or line,
            f"`action_type: {kind}` is `slash` (run as `claude -p`)",
        )
    elif kind is not None and kind not in ("shell", "slash"):
        notes.hand(line, f"state '{name}': `action_type: {kind}` has no equivalent here")


def _loop(name: str, state: CommentedMap, line: int, notes: Notes, links: Links) -> None:
    ref = str(state["loop"])
    if "${" in ref:
        dynamic_loop(state, ref, line, notes)
        return
    path = links.loop_path(ref)
    if path is None:
        notes.hand(line, f"state '{name}': sub-loop '{ref}' was not found beside this file")
        state["loop"] = ref if ref.endswith((".yaml", ".yml")) else ref + ".yaml"
    else:
        state["loop"] = path
    bound = state.get("with")
    if path is not None and isinstance(bound, dict):
        reads = set(links.child_inputs(ref))
        unread = [str(k) for k in bound if str(k) not in reads]
        for key in unread:
            del bound[key]
        if unread:
            notes.carried(
                line_of(state, "with") or line,
                f"`with: {', '.join(unread)}`: the sub-loop never reads "
                f"{'them' if len(unread) > 1 else 'it'}; dropped (here `with:` names inputs)",
            )
    if state.pop("context_passthrough", None):
        bound = state.get("with") if isinstance(state.get("with"), dict) else CommentedMap()
        for key in links.child_inputs(ref):
            if key in links.own_context:
                bound.setdefault(key, "${context." + key + "}")
        if bound:
            state["with"] = bound
        notes.carried(line, "`context_passthrough: true`: the child's inputs are passed in `with:`")


def _evaluate(name: str, state: CommentedMap, line: int, notes: Notes) -> None:
    spec = state["evaluate"]
    kind = spec.get("type")
    at = line_of(state, "evaluate") or line
    if kind == "llm_structured":
        prompt = str(spec.get("prompt", ""))
        if re.search(r"""["'`]?\b(yes|no)\b["'`]?""", prompt) and "schema" not in spec:
            notes.carried(
                at,
                "a judge prompt that asks for yes/no: the judge here answers success, failure, "
                "partial or blocked (`yes` is `success`); the prompt is left as written",
            )
        for key in list(spec):
            if key not in _EVAL_KEEP:
                notes.dropped(at, f"`evaluate.{key}` of llm_structured: no equivalent here")
                del spec[key]
        return
    if kind not in EVALUATORS:
        notes.hand(at, f"state '{name}': evaluator '{kind}' has no equivalent here")
        return
    if kind == "convergence" and "previous" not in spec:
        spec["previous"] = ""
        notes.carried(
            at,
            "`convergence` without `previous`: upstream never compares with an earlier value "
            'then (never `stall`); written `previous: ""`, which does the same here',
        )
    if kind == "output_numeric" and "path" in spec:
        spec["type"] = kind = "output_json"
        notes.carried(at, "`output_numeric` with a `path` reads JSON: it is `output_json` here")
    path = spec.get("path")
    if isinstance(path, str) and not path.startswith((".", "[")):
        spec["path"] = "." + path
    for key in list(spec):
        if key not in _EVAL_KEEP:
            notes.dropped(at, f"`evaluate.{key}` of {kind}: no equivalent here; dropped")
            del spec[key]
