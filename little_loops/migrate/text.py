"""`ll migrate`: upstream little-loops placeholders in a text, rewritten for this format.

Upstream interpolates `${context.X}`, `${captured.X.output}`, `${prev.X}`, `${param.X}` and
`${context.run_dir}`, with suffixes `:shell` (quote), `:default=TEXT` and `?` (empty when
missing); any other `${...}` is left for the shell (`${ID}`, `${VAR:-x}`). Here every `${` is a
placeholder, so those are written `$${...}`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ruamel.yaml.comments import CommentedMap

from little_loops.migrate.notes import (
    Notes,
    line_of,
)

# The namespaces both formats share; `param` is upstream's fragment parameter, bound here.
SHARED = ("context", "captured", "prev", "state", "loop", "env")
CAPTURE_FIELDS = ("output", "stderr", "exit_code", "duration_ms", "verdict", "confidence")
_PREV_FIELDS = ("output", "stderr", "exit_code", "duration_ms", "state", "verdict")
_STATE_FIELDS = ("name", "iteration", "attempt")
_LOOP_FIELDS = ("name", "run_id", "run_dir", "dir", "started_at", "elapsed_ms", "elapsed")

_PLACEHOLDER = re.compile(r"(?<!\$)\$\{([^{}]*)\}")
_HEAD = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)((?:\.[A-Za-z0-9_*-]+)*)(.*)$", re.S)


@dataclass
class TextReport:
    """What a rewrite did to one text, for the notes."""

    shell_vars: set[str] = field(default_factory=set)
    run_dir: int = 0
    failure_type: int = 0
    quoted: int = 0
    defaults: int = 0
    unknown: list[str] = field(default_factory=list)  # placeholders with no equivalent
    params: list[str] = field(default_factory=list)  # `${param.X}` left unbound
    child_outputs: list[tuple[str, str]] = field(default_factory=list)  # (loop state, capture)
    missing: list[str] = field(default_factory=list)  # captures no state of the loop makes


@dataclass(frozen=True)
class TextRules:
    """What a loop's text may name: its context keys and its fragment parameters."""

    context_keys: frozenset[str]
    params: Mapping[str, str] = field(default_factory=dict)
    loop_captures: Mapping[str, str] = field(default_factory=dict)  # loop state -> capture
    captures: frozenset[str] | None = None  # every `capture:` of the loop (None: unknown)


def rewrite(text: str, rules: TextRules, report: TextReport) -> str:
    """`text` with every upstream placeholder written as this format reads it."""

    def one(m: re.Match[str]) -> str:
        return _one(m.group(1), rules, report)

    return _PLACEHOLDER.sub(one, text)


def _one(body: str, rules: TextRules, report: TextReport) -> str:
    head = _HEAD.match(body)
    if head is None or (head.group(1) not in (*SHARED, "param") or not head.group(2)):
        report.shell_vars.add(body.split(":")[0].split("}")[0][:40])
        return "$${" + body + "}"
    ns, dotted, rest = head.group(1), head.group(2), head.group(3)
    path = dotted[1:].split(".")
    if ns == "param":
        value = rules.params.get(path[0])
        if value is None:
            report.params.append(path[0])
            return "${context." + path[0] + _suffix(rest, report) + "}"
        return value
    suffix = _suffix(rest, report)
    if ns == "context" and path == ["run_dir"] and "run_dir" not in rules.context_keys:
        report.run_dir += 1
        return "${loop.run_dir" + suffix + "}"
    if ns == "captured" and len(path) == 3 and path[0] in rules.loop_captures:
        # a sub-loop's own capture, read through the child's `outputs:` here
        report.child_outputs.append((path[0], path[1]))
        path = [rules.loop_captures[path[0]], "outputs", path[1]]
    elif ns == "captured":
        path = _captured(path)
        if path[1:] == ["failure_type"]:
            path[1] = "reason"
            report.failure_type += 1
        if (
            rules.captures is not None
            and path[0] not in rules.captures
            and ":default=" not in suffix
        ):
            report.missing.append(path[0])
            return ""  # no state makes it: always empty here
    problem = _field_problem(ns, path)
    if problem and ":default=" not in suffix and path[1:2] != ["outputs"]:
        report.unknown.append("${" + body + "}")
    return "${" + ".".join((ns, *path)) + suffix + "}"


def _suffix(rest: str, report: TextReport) -> str:
    """Upstream's `:shell`, `?` and `:default=` suffixes in this format's spelling."""
    out = ""
    default: str | None = None
    while rest:
        if rest.startswith(":shell"):
            out = "|q"
            report.quoted += 1
            rest = rest[len(":shell") :]
        elif rest.startswith("?"):
            default = default if default is not None else ""
            rest = rest[1:]
        elif rest.startswith(("|q", "|raw")):
            out = rest[: 2 if rest.startswith("|q") else 4]
            rest = rest[len(out) :]
        elif rest.startswith(":default="):
            default = rest[len(":default=") :]
            rest = ""
        else:
            rest = rest[1:]  # anything else: dropped, reported by the caller's validation
    if default is not None:
        report.defaults += 1
        out += ":default=" + default
    return out


def _captured(path: list[str]) -> list[str]:
    """`captured.X` alone meant its output upstream."""
    if len(path) == 1:
        return [path[0], "output"]
    return path


def _field_problem(ns: str, path: list[str]) -> bool:
    fields: Mapping[str, tuple[str, ...]] = {
        "prev": _PREV_FIELDS,
        "state": _STATE_FIELDS,
        "loop": _LOOP_FIELDS,
    }
    if ns in fields:
        return len(path) != 1 or path[0] not in fields[ns]
    if ns == "captured":
        return len(path) != 2 or path[1] not in CAPTURE_FIELDS
    return False


def walk_strings(node: object, fn: Callable[[str], str], *, skip: tuple[str, ...] = ()) -> object:
    """Apply `fn` to every string in a YAML tree in place (keys in `skip` left alone).

    Strings keep their YAML style: a `|` block stays a `|` block.
    """
    if isinstance(node, dict):
        for key in list(node):
            if key in skip:
                continue
            node[key] = walk_strings(node[key], fn, skip=skip)
        return node
    if isinstance(node, list):
        for i, item in enumerate(node):
            node[i] = walk_strings(item, fn, skip=skip)
        return node
    if isinstance(node, str):
        new = fn(node)
        if new == node:
            return node
        try:
            return type(node)(new)
        except TypeError:
            return new
    return node


# -- a whole loop's texts ---------------------------------------------------------------


def rewrite_loop(doc: CommentedMap, notes: Notes) -> list[tuple[str, str, int]]:
    """Rewrite a loop's placeholders; the (loop state, child capture, line) they read."""
    context = doc.get("context")
    keys = frozenset(str(k) for k in context) if isinstance(context, dict) else frozenset()
    states = doc.get("states") if isinstance(doc.get("states"), dict) else {}
    loops: dict[str, str] = {}
    for name, state in states.items():
        if isinstance(state, dict) and "loop" in state:
            loops[str(name)] = str(state.get("capture", name))
            loops[str(state.get("capture", name))] = loops[str(name)]
    captures = {str(s.get("capture")) for s in states.values() if isinstance(s, dict)}
    rules = TextRules(keys, loop_captures=loops, captures=frozenset(captures | set(loops)))
    reads: list[tuple[str, str, int]] = []
    for name, state in states.items():
        report = TextReport()
        walk_strings(
            state, partial(rewrite, rules=rules, report=report), skip=("description", "x-upstream")
        )
        _text_notes(str(name), report, line_of(states, name), notes, keys)
        for loop_state, capture in report.child_outputs:
            owner = next(
                (s for s, c in loops.items() if c == loops[loop_state] and s in states), loop_state
            )
            reads.append((owner, capture, line_of(states, name)))
        _upstream_tools(state, line_of(states, name), notes)
        if _escapes_values(state):
            notes.changed(
                line_of(states, name),
                "`${captured...}`/`${prev...}` in a shell action are escaped for where they "
                "stand (upstream inserted them as is): write `|raw` where the text is meant "
                "to run as shell",
            )
    _missing_context(doc, notes)
    for key in ("context", "outputs"):
        if isinstance(doc.get(key), dict):
            report = TextReport()
            walk_strings(
                doc[key], partial(rewrite, rules=rules, report=report), skip=("description",)
            )
            _text_notes(key, report, line_of(doc, key), notes, keys)
    return reads


CONTEXT_USE = re.compile(
    r"(?<!\$)\$\{context\.([A-Za-z0-9_-]+)(\|[a-z]+|:shell)?(\?|:default=[^{}]*)?\}"
)


def _missing_context(doc: CommentedMap, notes: Notes) -> None:
    """Context keys upstream filled at launch (its config, the positional input): declared."""
    context = doc.get("context")
    if not isinstance(context, dict):
        context = CommentedMap()
    used: dict[str, int] = {}

    def look(text: str) -> str:
        for m in CONTEXT_USE.finditer(text):
            used.setdefault(m.group(1), 0)
        return text

    walk_strings(doc.get("states"), look, skip=("description", "x-upstream"))
    missing = [k for k in used if k not in context]
    if not missing:
        return
    for key in missing:
        context[key] = ""
    if "context" not in doc:
        doc.insert(list(doc).index("states"), "context", context)
    notes.changed(
        line_of(doc, "context"),
        f"context {', '.join(repr(k) for k in missing)}: used but not declared (upstream filled "
        "them at launch, from its config or the positional input); declared empty here: give "
        "them with `--set KEY=VALUE`",
    )


_LL_TOOL = re.compile(r"(?<![\w/.-])(ll-[a-z][a-z0-9-]*)")
_LL_PACKAGE = re.compile(r"\b(?:import|from)\s+little_loops\b|-m\s+little_loops\b")


def _upstream_tools(state: Any, line: int, notes: Notes) -> None:
    """Steps that call upstream's own programs, or import its Python package."""
    action = state.get("action") if isinstance(state, dict) else None
    if not isinstance(action, str) or state.get("action_type") == "slash":
        return
    tools = sorted(set(_LL_TOOL.findall(action)))
    if tools:
        notes.changed(
            line,
            f"calls upstream's {', '.join(f'`{t}`' for t in tools[:5])}: not part of `ll`; "
            "the step fails unless upstream little-loops is installed where it runs "
            "(docs/migrating.md, 'Upstream's tools')",
        )
    if _LL_PACKAGE.search(action):
        notes.changed(
            line,
            "imports upstream's Python package `little_loops`, which has the import name of "
            "`ll`'s own: run it with the Python of a separate virtualenv holding upstream "
            "(docs/migrating.md, 'Upstream's tools')",
        )


def _escapes_values(state: Any) -> bool:
    action = state.get("action") if isinstance(state, dict) else None
    if not isinstance(action, str) or state.get("action_type") == "slash":
        return False
    return "${captured." in action or "${prev." in action


def _text_notes(
    where: str, report: TextReport, line: int, notes: Notes, context_keys: frozenset[str]
) -> None:
    if report.run_dir:
        notes.carried(line, "`${context.run_dir}` is `${loop.run_dir}` here")
    if report.failure_type:
        notes.changed(
            line,
            "`${captured.X.failure_type}` is `${captured.X.reason}` here: one line saying why "
            "the step did not succeed, not upstream's category word",
        )
    if report.quoted:
        notes.carried(line, "`${X:shell}` is `${X|q}` here")
    if report.defaults:
        notes.carried(line, "`${X?}` and `${X:default=V}` are `${X:default=V}` here")
    if report.shell_vars:
        names = ", ".join(sorted(report.shell_vars)[:6])
        notes.changed(
            line,
            f"`${{...}}` that is not `namespace.path` ({names}): upstream's runner stopped the "
            "run in error on reaching it (only `$${...}` reached the shell there); written "
            "`$${...}` so the shell expands it here, as the text means",
        )
    if report.missing:
        names = ", ".join(sorted(set(report.missing)))
        notes.changed(
            line,
            f"'{where}': `${{captured.{report.missing[0]}...}}` names no capture of this loop "
            f"({names}): upstream's run stopped in error on reaching it; written as "
            "empty text, so the step runs with an empty value here: check the name",
        )
    for text in report.unknown:
        notes.hand(line, f"'{where}': `{text}` names something `ll` does not keep")
    for key in report.params:
        if key in context_keys:
            notes.changed(
                line,
                f"'{where}': `${{param.{key}}}` is bound by no `with:`; it reads the loop's "
                f"context key '{key}' here",
            )
        else:
            notes.hand(line, f"'{where}': `${{param.{key}}}` is bound by no `with:`")
