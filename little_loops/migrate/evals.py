"""`ll migrate`: upstream evaluators with no equivalent, written with this format's pieces.

`classify` (the step's last line names the route) becomes a chain of decision states, one
`output_contains` check per route key, since verdicts here are lowercase words.

Upstream's `diff_stall` (has `git diff` stopped changing?), `score_stall` (has the best score
stopped rising?) and `open_question_stall` (has the count stopped falling?) are evaluators that
read git or a history file. Evaluators here never start processes (docs/architecture.md,
contract 5), so each becomes a short POSIX shell check, judged by `exit_code`: exit 0 is
`success` (progress, upstream's `yes`), exit 1 is `failure` (stalled, upstream's `no`). Its
count lives in `${loop.run_dir}`, so `ll resume` keeps it.

Upstream's output evaluators gave `error` on a non-zero exit before reading the output; a shell
step judged by one is routed by its exit code first, and a new state judges its output.
"""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import LiteralScalarString

from little_loops.migrate.notes import Notes

STALL_TYPES = ("diff_stall", "score_stall", "open_question_stall")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def diff_check(state_name: str, spec: Any) -> str:
    scope = spec.get("scope") if isinstance(spec, dict) else None
    paths = " ".join(_quote(str(p)) for p in scope) if isinstance(scope, list) else ""
    limit = _int(spec.get("max_stall"), 1)
    return (
        f"ll_now=$({{ git diff HEAD -- {paths}; git status --porcelain -- {paths}; }} "
        "2>/dev/null | cksum)\n"
        f'll_file="${{loop.run_dir}}/diff-stall-{state_name}"\n'
        'll_last=$(sed -n 1p "$ll_file" 2>/dev/null); ll_n=$(sed -n 2p "$ll_file" 2>/dev/null)\n'
        'if [ "$ll_now" = "$ll_last" ]; then ll_n=$(($${ll_n:-0} + 1)); else ll_n=0; fi\n'
        'printf \'%s\\n%s\\n\' "$ll_now" "$ll_n" > "$ll_file"\n'
        f'echo "git diff unchanged $ll_n time(s) in a row; stalled at {limit}"\n'
        f'[ "$ll_n" -lt {limit} ]\n'
    )


def history_check(kind: str, spec: Any) -> str:
    default_file = ".score_history" if kind == "score_stall" else ".open_questions_history"
    history = str(spec.get("history_file") or "${loop.run_dir}/" + default_file)
    history = history.replace("${context.run_dir}", "${loop.run_dir}")
    epsilon = spec.get("epsilon", 0.5 if kind == "score_stall" else 0.0)
    limit = _int(spec.get("max_stall"), 1)
    better = "$1 > best + e" if kind == "score_stall" else "$1 < best - e"
    return (
        f'll_file="{history}"\n'
        '[ -s "$ll_file" ] || { echo "no history yet"; exit 0; }\n'
        f"awk -v e={float(epsilon)} -v m={limit} 'NF {{ if (seen == 0 || {better}) "
        "{ best = $1; since = 0; seen = 1 } else since++ }\n"
        '  END { print "rounds without improvement: " since + 0; exit (since >= m) }\' '
        '"$ll_file"\n'
    )


def _int(value: Any, default: int) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    )


def convert_stall(name: str, state: CommentedMap, at: int, notes: Notes) -> CommentedMap | None:
    """Rewrite a stall-evaluated state; a new state to add after it when its action is kept.

    A shell action runs first and then the check (upstream ignored its output); a slash
    action keeps its state, which moves on to a new `NAME_stall` state holding the check.
    """
    spec = state["evaluate"]
    kind = str(spec.get("type"))
    check = diff_check(name, spec) if kind == "diff_stall" else history_check(kind, spec)
    slash = state.get("action_type") == "slash"
    if not slash:
        action = state.get("action")
        before = f"{str(action).rstrip()}\n" if isinstance(action, str) and action.strip() else ""
        state["action"] = LiteralScalarString(before + check)
        state["action_type"] = "shell"
        del state["evaluate"]
        notes.carried(
            at,
            f"evaluator `{kind}`: written as a shell check after the action "
            "(exit 0: progress, `on_success`; exit 1: stalled, `on_failure`)",
        )
        return None
    check_state = CommentedMap()
    check_state["action"] = LiteralScalarString(check)
    check_state["action_type"] = "shell"
    for key in ("on_yes", "on_no", "on_success", "on_failure", "on_error", "route"):
        if key in state:
            check_state[key] = state.pop(key)
    del state["evaluate"]
    state["next"] = f"{name}_stall"
    notes.changed(
        at,
        f"evaluator `{kind}` on a slash step: the check is a new shell state '{name}_stall' "
        "after it, which takes the step's routes (one more step per visit)",
    )
    return check_state


def convert_classify(
    name: str, state: CommentedMap, at: int, notes: Notes
) -> list[tuple[str, CommentedMap]]:
    """`classify` + `route: {TOKEN: target}`: the state moves on to one check per token."""
    spec = state.pop("evaluate")
    route = state.pop("route", None) or CommentedMap()
    source = spec.get("source") if isinstance(spec, dict) else None
    if not isinstance(source, str):
        capture = str(state.setdefault("capture", name))
        source = "${captured." + capture + ".output}"
    fallback = route.get("_")
    # upstream: a verdict with no entry of its own goes to `_` first, `_error` only without it
    errors = route.get("error") or fallback or route.get("_error")
    tokens = [str(k) for k in route if str(k) not in ("_", "_error", "error")]
    names = [f"{name}_{re.sub(r'[^A-Za-z0-9_-]', '_', t).lower()}" for t in tokens]
    added: list[tuple[str, CommentedMap]] = []
    for i, (token, check_name) in enumerate(zip(tokens, names, strict=True)):
        check = CommentedMap()
        check["description"] = f"upstream classify: is the last line '{token}'?"
        check["evaluate"] = CommentedMap(
            type="output_contains",
            source=source,
            pattern=r"(?:^|\n)[ \t]*" + re.escape(token) + r"[ \t]*\n*\Z",
        )
        check["on_success"] = route[token]
        otherwise = names[i + 1] if i + 1 < len(names) else fallback
        if otherwise is not None:
            check["on_failure"] = otherwise
        added.append((check_name, check))
    if names:
        state["next"] = names[0]
    elif fallback is not None:
        state["next"] = fallback
    if errors is not None:
        state["on_error"] = errors
    notes.changed(
        at,
        "evaluator `classify`: the step moves on to one decision state per route key "
        f"({', '.join(names) or 'none'}), each an `output_contains` check of the last line; "
        "each check is one more step",
    )
    if fallback is None and names:
        notes.hand(
            at,
            f"state '{name}': `classify` with no `_` route: route a last line that matches no key",
        )
    return added


def convert_keyed_numeric(
    name: str, state: CommentedMap, at: int, notes: Notes
) -> list[tuple[str, CommentedMap]]:
    """`output_numeric` + `key: K` read the last `K=NUMBER` of the output: a check state
    after the step pulls that number out (`sed`) and compares it, taking the step's routes."""
    spec = state.pop("evaluate")
    key = str(spec.pop("key"))
    capture = str(state.setdefault("capture", name))
    pattern = re.escape(key).replace("/", "\\/")
    check = CommentedMap()
    check["description"] = f"upstream output_numeric key '{key}': the last {key}=N of the output"
    check["action"] = (
        f"printf '%s\\n' ${{captured.{capture}.output|q}} | sed -n "
        f"'s/.*{pattern}[[:space:]]*=[[:space:]]*\\([-+]\\{{0,1\\}}[0-9.][0-9.eE+-]*\\).*/\\1/p'"
        " | tail -n 1"
    )
    check["action_type"] = "shell"
    check["evaluate"] = spec
    for key_name in ("on_yes", "on_no", "on_success", "on_failure", "on_error", "route"):
        if key_name in state:
            check[key_name] = state.pop(key_name)
    state["next"] = f"{name}_value"
    notes.carried(
        at,
        f"`output_numeric` with `key: {key}` (the last `{key}=N` in the output): a shell state "
        f"'{name}_value' after the step takes that number and compares it, with the step's "
        "routes (one more step per visit)",
    )
    return [(f"{name}_value", check)]


# Upstream gives `error` for a non-zero exit before these evaluators read the output.
EXIT_BLIND = ("output_contains", "output_numeric", "output_json", "convergence")
_ROUTE_KEYS = ("on_success", "on_failure", "route")


def split_exit_check(
    name: str, state: CommentedMap, taken: set[str], at: int, notes: Notes
) -> tuple[str, CommentedMap] | None:
    """A shell step judged on its output: upstream's verdict was `error` on any non-zero
    exit, whatever the output said; here the evaluator reads the output alone. The step
    keeps its action and is routed by its exit code (0 on to a new check state, anything
    else where upstream sent `error`); the check state evaluates the captured output with
    the step's routes. Nothing is added where `error` went where every verdict went."""
    spec = state.get("evaluate")
    if (
        not isinstance(spec, dict)
        or spec.get("type") not in EXIT_BLIND
        or state.get("action_type") == "slash"
        or not isinstance(state.get("action"), str)
        or state.get("terminal")
        or "retry" in state
        or "next" in state
    ):
        return None
    table = state.get("route")
    route = table if isinstance(table, dict) else {}
    error = state.get("on_error", route.get("_error", route.get("error")))
    others = [state[k] for k in ("on_success", "on_failure") if k in state]
    others += [v for k, v in route.items() if k not in ("_error", "error", "timeout")]
    if error is not None and all(t == error for t in others):
        return None
    check_name = f"{name}_output"
    while check_name in taken:
        check_name += "_"
    check = CommentedMap()
    check["description"] = f"upstream judged '{name}' on its output only when the step exited 0"
    spec = state.pop("evaluate")
    if "source" not in spec:
        capture = str(state.setdefault("capture", name))
        spec.insert(1, "source", "${captured." + capture + ".output}")
    check["evaluate"] = spec
    for key in (*_ROUTE_KEYS, "on_error"):
        if key in state:
            check[key] = state.pop(key)
    state["next"] = check_name
    if error is not None:
        state["on_error"] = error
    notes.carried(
        at,
        f"state '{name}': upstream's `{spec.get('type')}` gave `error` on a non-zero exit "
        "before reading the output; the step is routed by its exit code (a non-zero exit "
        f"goes where `error` went) and a new state '{check_name}' judges the output with "
        "the step's routes (one more step per visit)",
    )
    return check_name, check
