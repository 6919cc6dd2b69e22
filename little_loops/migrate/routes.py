"""`ll migrate`: a state's routes, rewritten so the loop goes where it went upstream.

Upstream never evaluates a `next:` state, its `_` route also catches `error`, a judge's
`partial`/`blocked` may go unrouted, and `max_retries` re-enters a state; each is written here
with this format's routes (SPEC section 6) and noted. A `loop:` whose file is chosen at run
time becomes a shell step running `ll run`, routed by its exit code.
"""

from __future__ import annotations

from ruamel.yaml.comments import CommentedMap

from little_loops.migrate.notes import (
    Notes,
    rename,
)

EVALUATORS = ("exit_code", "output_contains", "output_numeric", "output_json", "convergence")


def convert_routes(name: str, state: CommentedMap, line: int, notes: Notes) -> None:
    """The state's routes, then its `max_retries`."""
    _routes(name, state, line, notes)
    _retries(name, state, line, notes)


def _routes(name: str, state: CommentedMap, line: int, notes: Notes) -> None:
    route = state.get("route")
    if isinstance(route, CommentedMap):
        for old, new in (("yes", "success"), ("no", "failure")):
            if old in route:
                rename(route, old, new)
    extra = {
        v: state.pop(k)
        for k, v in (("on_partial", "partial"), ("on_blocked", "blocked"))
        if k in state
    }
    if extra:
        route = _as_route(state)
        route.update(extra)
        notes.carried(line, "`on_partial`/`on_blocked` are `route:` entries")
        if _is_slash(state) and "evaluate" not in state:
            state.insert(
                list(state).index("route"), "evaluate", CommentedMap(type="llm_structured")
            )
    ignored = [k for k in ("on_success", "on_failure", "route") if k in state]
    if "next" in state and ignored:
        kept = state.setdefault("x-upstream", CommentedMap())
        for key in ignored:
            kept[key] = state.pop(key)
        notes.carried(
            line,
            f"`{'`, `'.join(ignored)}` beside `next:`: upstream always takes `next` (it never "
            "evaluates such a state), so they are kept under `x-upstream`, not used",
        )
    if isinstance(state.get("route"), dict):
        _route_defaults(name, state, line, notes)
    elif "next" in state and not state.get("terminal"):
        _next(state, line, notes)


def _as_route(state: CommentedMap) -> CommentedMap:
    """The state's `route:`, with its `on_success`/`on_failure`/`on_error` moved in."""
    route = state.get("route")
    if not isinstance(route, CommentedMap):
        route = CommentedMap()
        anchor = next((k for k in ("on_success", "on_failure", "next") if k in state), None)
        pos = list(state).index(anchor) if anchor else len(state)
        state.insert(pos, "route", route)
    for key, verdict in (
        ("on_success", "success"),
        ("on_failure", "failure"),
        ("on_error", "error"),
    ):
        if key in state:
            route.setdefault(verdict, state.pop(key))
    return route


def _route_defaults(name: str, state: CommentedMap, line: int, notes: Notes) -> None:
    route = state["route"]
    if (
        "_" in route
        and "_error" in route
        and "error" not in route
        and route["_"] != route["_error"]
    ):
        # upstream tries `_` before `_error`, so its `_error` never caught anything there
        kept = state.setdefault("x-upstream", CommentedMap()).setdefault("route", CommentedMap())
        kept["_error"] = route["_error"]
        route["_error"] = route["_"]
        notes.carried(
            line,
            "`_` and `_error` in one route: upstream sent `error` to `_` (it reads `_error` "
            "only when there is no `_`); written `_error` to the same state, the old target "
            "kept under `x-upstream`",
        )
    if (
        "_" in route
        and not any(k in route for k in ("error", "_error"))
        and "on_error" not in state
    ):
        route["_error"] = route["_"]
        notes.carried(line, "upstream's `_` route also caught `error`: written `_error` too")


def _next(state: CommentedMap, line: int, notes: Notes) -> None:
    """Upstream never evaluates a `next:` state: it moves on whatever the step gave."""
    target = state["next"]
    upstream_error = state.get("on_error")
    pos = list(state).index("next") + 1
    if not _is_slash(state) and "evaluate" not in state and "on_failure" not in state:
        state.insert(pos, "on_failure", upstream_error if upstream_error is not None else target)
    if upstream_error is None:
        state.insert(len(state), "on_error", target)
        notes.carried(
            line,
            "`next:` moved on whatever the step gave upstream (it was never evaluated); "
            "written with `on_failure`/`on_error` to the same state, so it still does",
        )
        return
    notes.carried(
        line,
        "`next:` with `on_error:`: upstream went to `next` on exit 0 and to `on_error` on any "
        "other exit; written with `on_failure`/`on_error` so it still does",
    )


def _is_slash(state: CommentedMap) -> bool:
    if state.get("action_type") == "slash":
        return True
    action = state.get("action")
    return (
        state.get("action_type") is None
        and isinstance(action, str)
        and action.lstrip().startswith("/")
        and "/" not in action.lstrip().split(" ")[0][1:]
    )


def _retries(name: str, state: CommentedMap, line: int, notes: Notes) -> None:
    """`max_retries: N` + `on_retry_exhausted: X` over a route back to the state itself."""
    if "max_retries" not in state:
        return
    count, exhausted = state.pop("max_retries"), state.pop("on_retry_exhausted", None)
    written = state.get("route")
    route = written if isinstance(written, CommentedMap) else None
    shorthands = {"on_success": "success", "on_failure": "failure", "on_error": "error"}
    selves: list[str] = []
    for key, verdict in shorthands.items():
        if state.get(key) in ("$current", name):
            selves.append(verdict)
            state[key] = exhausted
    for verdict, target in list(route.items()) if route is not None else []:
        if target in ("$current", name) and route is not None:
            selves.append(verdict)
            route[verdict] = exhausted
    if not selves and state.get("next") not in (name, "$current"):
        notes.carried(
            line,
            f"state '{name}': `max_retries: {count}` counts only runs of the state straight "
            "after itself, and no route of this state leads back to it, so upstream never "
            "used it; dropped",
        )
        return
    if not selves or exhausted is None or not isinstance(count, int):
        notes.hand(
            line,
            f"state '{name}': `max_retries: {count}` counted visits through other states; "
            "`ll` has no visit counter: add a counter state (a shell `expr` on a file in "
            "${loop.run_dir}) or use `max_iterations`",
        )
        return
    state["retry"] = CommentedMap(
        max_attempts=count + 1, interval=0, jitter=False, on=sorted(set(selves))
    )
    notes.carried(
        line,
        "`max_retries` + `on_retry_exhausted` over a route back to the state: written as "
        "`retry:` (the step runs again in place) with the route going to the exhausted state",
    )
    notes.changed(
        line, "a retry is one step here (upstream counted each re-entry against `max_steps`)"
    )


def dynamic_loop(state: CommentedMap, ref: str, line: int, notes: Notes) -> None:
    """`loop: ${...}`: the file is chosen at run time, so it runs as `ll run` in a shell step."""
    target = ref if ref.endswith((".yaml", ".yml")) else ref + ".yaml"
    words = ['ll run "${loop.dir}/' + _quoted_q(target) + '"']
    bound = state.pop("with", None)
    for key, value in bound.items() if isinstance(bound, dict) else []:
        words.append(f'--set "{key}={_quoted_q(str(value))}"')
    del state["loop"]
    state.insert(0, "action", " ".join(words))
    state.insert(1, "action_type", "shell")
    state.pop("context_passthrough", None)
    notes.changed(
        line,
        f"`loop: {ref}` picks its file at run time; here every `loop:` is a fixed path checked "
        "before the run, so the child runs as `ll run` in a shell step (its exit code: 0 "
        "success, 1 failure, other error; its steps are its own run, not this one's)",
    )


def _quoted_q(text: str) -> str:
    """`text` for inside "...": literal characters escaped, placeholders quoted with `|q`."""
    import re

    out: list[str] = []
    last = 0
    for m in re.finditer(r"\$\{([^{}|]*)\}", text):
        out.append(re.sub(r'(["$`\\])', r"\\\1", text[last : m.start()]))
        out.append("${" + m.group(1) + "|q}")
        last = m.end()
    out.append(re.sub(r'(["$`\\])', r"\\\1", text[last:]))
    return "".join(out)
