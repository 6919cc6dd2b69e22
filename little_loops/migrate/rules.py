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

from little_loops.migrate.evals import (
    STALL_TYPES,
    convert_classify,
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
}
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
    extra: list[tuple[str, CommentedMap]] = []
    spec = state.get("evaluate")
    if isinstance(spec, dict) and spec.get("type") in STALL_TYPES:
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


def _action_type(name: str, state: CommentedMap, line: int, notes: Notes) -> None:
    kind = state.get("action_type")
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
