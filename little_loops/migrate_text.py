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


@dataclass(frozen=True)
class TextRules:
    """What a loop's text may name: its context keys and its fragment parameters."""

    context_keys: frozenset[str]
    params: Mapping[str, str] = field(default_factory=dict)
    loop_captures: Mapping[str, str] = field(default_factory=dict)  # loop state -> capture


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
