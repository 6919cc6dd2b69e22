"""Authoring hints: what a common slip, or a name from upstream little-loops, is written as here.

Each function returns the text that replaces a generic message (or None when it has nothing
better to say), so a newcomer reads how to fix the line instead of a misleading "did you mean".
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from little_loops.evaluators.deterministic import (
    OPERATORS as OPERATORS,  # re-exported for the hints
)

# Other spellings of the comparison operators, lower case, '-' and ' ' read as '_'.
_OPERATOR_ALIASES: Mapping[str, str] = {
    **dict.fromkeys(("==", "=", "equals", "equal", "equal_to", "is", "same"), "eq"),
    **dict.fromkeys(("!=", "<>", "=/=", "neq", "not_equals", "not_equal", "isnt", "not"), "ne"),
    **dict.fromkeys(("<", "less", "less_than", "below", "lower_than"), "lt"),
    **dict.fromkeys(("<=", "=<", "lte", "less_or_equal", "less_than_or_equal", "at_most"), "le"),
    **dict.fromkeys((">", "greater", "greater_than", "above", "more_than"), "gt"),
    **dict.fromkeys((">=", "=>", "gte", "greater_or_equal", "greater_than_or_equal"), "ge"),
    "at_least": "ge",
}

_NO_FRAGMENTS = (
    "remove it: ll has no fragment libraries; write the keys out, or share them within one "
    "file with YAML anchors (&name, then <<: *name)"
)
# Keys of upstream little-loops that mean something else here, or are spelt otherwise.
# `{v}` is the value the author gave (or a stand-in when it is not a short scalar).
_UPSTREAM_STATE_KEYS: Mapping[str, tuple[str, str]] = {
    "on_yes": ("write 'on_success: {v}'", "STATE"),
    "on_no": ("write 'on_failure: {v}'", "STATE"),
    "on_partial": ("write 'route: {{partial: {v}}}' (beside any other 'route:' entries)", "STATE"),
    "on_blocked": ("write 'route: {{blocked: {v}}}' (beside any other 'route:' entries)", "STATE"),
    "max_retries": ("write 'retry: {{max_attempts: N}}' (N counts the first attempt too)", "N"),
    "failure": ("write 'outcome: failure' on the terminal state", ""),
    "fragment": (_NO_FRAGMENTS, ""),
    "context_passthrough": (
        "remove it: a child loop sees only the context keys its 'with:' passes",
        "",
    ),
}
_UPSTREAM_TOP_KEYS: Mapping[str, tuple[str, str]] = {
    "max_steps": ("write 'max_iterations: {v}'", "N"),
    "on_max_steps": ("write 'on_max_iterations: {v}'", "STATE"),
    "import": (_NO_FRAGMENTS, ""),
    "parameters": (
        "declare the inputs under 'context:' ('KEY: ~' for a required one, or "
        "'KEY: {{type: string, default: X, enum: [...], description: ...}}')",
        "",
    ),
    "scope": ("remove it: ll has no counterpart ('working_dir' only sets where actions run)", ""),
    "on_handoff": (
        "remove it: here every slash action runs in a session of its own (claude -p), "
        "so there is no hand-off to handle",
        "",
    ),
}
# Labels people put at the top level; `metadata:` is their home here.
_LABEL_KEYS = frozenset({"category", "labels", "tags", "owner", "visibility"})
_UPSTREAM_ACTION_TYPES: Mapping[str, str] = {
    "prompt": "write 'action_type: slash' (the action is sent to Claude Code as 'claude -p "
    "ACTION')",
    "slash_command": "write 'action_type: slash', or leave it out: an action whose first word "
    "is '/name' is a slash command already",
}

# State keys that decide where a run goes; a problem with one of them hides routing facts.
STATE_ROUTING_KEYS = frozenset(
    {
        "action",
        "action_type",
        "loop",
        "ask",
        "choices",
        "evaluate",
        "route",
        "next",
        "terminal",
        "on_success",
        "on_failure",
        "on_error",
        "on_timeout",
    }
)
LOOP_ROUTING_KEYS = frozenset({"initial", "states", "on_error", "on_max_iterations", "maintain"})

ACTION_KEYS = frozenset({"action", "check", "fix", "using", "finally"})


def operator_for(word: str) -> str | None:
    """The operator another spelling (`gte`, `>=`, `equals`) stands for."""
    key = re.sub(r"[\s-]+", "_", word.strip().lower())
    if key in OPERATORS and key != word:
        return key
    return _OPERATOR_ALIASES.get(key)


def upstream_key(key: str, value: Any, *, in_state: bool) -> str | None:
    """How to write an upstream little-loops key here, or None when `key` is not one."""
    if not in_state and key in _LABEL_KEYS:
        return f"labels go under 'metadata:' (metadata: {{{key}: {_short(value, '...')}}})"
    table = _UPSTREAM_STATE_KEYS if in_state else _UPSTREAM_TOP_KEYS
    found = table.get(key)
    if found is None:
        return None
    fix, stand_in = found
    return f"'{key}' is upstream little-loops' name: " + fix.format(v=_short(value, stand_in))


def _short(value: Any, stand_in: str) -> str:
    """`value` as the author wrote it when it is a short scalar, else `stand_in`."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        text = str(value)
        if len(text) <= 30 and text.isprintable():
            return text
    return stand_in


def upstream_action_type(value: Any) -> str | None:
    """How to write an upstream `action_type` value here."""
    if not isinstance(value, str):
        return None
    fix = _UPSTREAM_ACTION_TYPES.get(value)
    return None if fix is None else f"'{value}' is upstream little-loops' name: {fix}"


def may_route(key: str, routing: frozenset[str]) -> bool:
    """Whether an unknown key may be a misspelt routing key, so routing checks must wait."""
    if key in _UPSTREAM_TOP_KEYS and key != "on_max_steps":
        return False  # a known name that routes nothing
    if key.startswith("on_") or key in _UPSTREAM_STATE_KEYS:
        return True
    import difflib

    return bool(difflib.get_close_matches(key, list(routing), n=1, cutoff=0.75))


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHELL_EXPANSION = re.compile(r"[#!]?([A-Za-z_][A-Za-z0-9_]*)(?:[:#%/^,@].*)?", re.DOTALL)


def _is_env_name(name: str) -> bool:
    return name.isupper() or name in os.environ


def placeholder_message(body: str) -> str | None:
    """A better message for a `${body}` that is not a placeholder, when one is known."""
    if body.endswith(":shell") and "." in body:
        name = body.removesuffix(":shell")
        return (
            f"'${{{body}}}' is not a valid placeholder; upstream little-loops' ':shell' is "
            f"written '|q' here: '${{{name}|q}}'"
        )
    if _ENV_NAME.fullmatch(body) and _is_env_name(body):
        return (
            f"unknown namespace '{body}' in '${{{body}}}'; write '$${{{body}}}' for the "
            f"shell's variable, or '${{env.{body}}}'"
        )
    m = _SHELL_EXPANSION.fullmatch(body)
    if m is not None and _is_env_name(m.group(1)):
        return (
            f"'${{{body}}}' is not a valid placeholder; write '$${{{body}}}' for the shell's "
            "own expansion"
        )
    return None


_OPERATOR_LINE = re.compile(r"\boperator:\s*([<>!=]+)")
_KEY_LINE = re.compile(r"^\s*(?:-\s+)*([A-Za-z_][A-Za-z0-9_.-]*):[ \t]+(\S.*)$")


def yaml_line_message(problem: str, line: str, col: int) -> str | None:
    """A better message for a YAML error at 0-based `col` of `line`, when the line shows why."""
    m = _OPERATOR_LINE.search(line)
    if m is not None:
        symbol = m.group(1)
        op = _OPERATOR_ALIASES.get(symbol)
        if op is not None:
            return (
                f"write 'operator: {op}' for '{symbol}': operators are words here "
                f"({', '.join(OPERATORS)}), and YAML reads a bare '{symbol[0]}' as syntax"
            )
    if not problem.startswith("mapping values are not allowed"):
        return None
    m = _KEY_LINE.match(line)
    if m is None or col <= m.start(2) or m.group(2)[0] in "'\"[{|>&*!":
        return None
    key = m.group(1)
    value = re.sub(r"\s+#.*$", "", m.group(2)).rstrip()
    what = "action" if key in ACTION_KEYS else "value"
    return (
        f"invalid YAML: ': ' inside the value of '{key}' (mapping values are not allowed "
        f"here); quote the whole {what}: {key}: {quote(value)}"
    )


def quote(text: str) -> str:
    """`text` as a YAML quoted scalar: double quotes when nothing in it needs escaping."""
    if '"' not in text and "\\" not in text:
        return f'"{text}"'
    return "'" + text.replace("'", "''") + "'"


def comment_cuts_command(command: str, comment: str, *, slash: bool) -> bool:
    """Whether the YAML comment `#comment` right after `command` took away part of it.

    A slash command's text is a prompt, where `#42` is text (`# note`, with a space, reads
    as the author's comment). In a shell command, a comment that starts between words is a
    comment for the shell too, and cutting it changes nothing; it matters when the cut
    leaves a quote, `$(`, `(` or a backquote open, or an escaped space (`a\\ #b` is one word).
    """
    if slash:
        return comment[:1] not in ("", " ", "\t")
    quote_char = ""  # the quote we are inside, if any
    backquote = False
    depth = 0  # open parentheses
    escaped = False
    for c in command:
        if escaped:
            escaped = False
        elif quote_char == "'":
            quote_char = "" if c == "'" else quote_char
        elif c == "\\":
            escaped = True
        elif quote_char == '"':
            quote_char = "" if c == '"' else quote_char
        elif c in "'\"":
            quote_char = c
        elif c == "`":
            backquote = not backquote
        elif c in "()":
            depth = depth + 1 if c == "(" else max(depth - 1, 0)
    return bool(quote_char) or backquote or depth > 0 or escaped
