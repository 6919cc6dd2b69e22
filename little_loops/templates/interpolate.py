"""`${namespace.path}` placeholders: finding them (for checks) and resolving them (for runs)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import lru_cache

from little_loops.errors import (
    RunError,
    UndefinedVariable,
)
from little_loops.model.loop import Scalar
from little_loops.model.records import record
from little_loops.templates.shell_quote import (
    ShellLexer,
    UnsafeValue,
)
from little_loops.templates.shell_quote import (
    single_quote as single_quote,  # part of this module's surface
)

NAMESPACES = ("context", "captured", "prev", "state", "loop", "env", "item")
MODIFIERS = ("raw", "q")

# Inside ${...}: a dotted path of names, an optional |modifier, an optional :default=TEXT
# (the text used when the name is undefined or empty; it runs to the closing brace).
_BODY = re.compile(
    r"^([A-Za-z_][A-Za-z0-9_-]*)((?:\.[A-Za-z0-9_-]+)*)(?:\|([A-Za-z]+))?(?::default=(.*))?$",
    re.S,
)


@record(frozen=True)
class Placeholder:
    """One `${...}` in a template, with its offsets in the template text."""

    start: int  # offset of `$`
    end: int  # offset just past `}`
    namespace: str
    path: tuple[str, ...]  # the names after the namespace
    modifier: str | None  # "raw", "q" or None
    default: str | None = None  # `:default=TEXT`: the value when the name is undefined

    @property
    def name(self) -> str:
        return ".".join((self.namespace, *self.path))


@record(frozen=True)
class PlaceholderError:
    """A `${` that is not a well-formed placeholder; `message` says what is wrong."""

    start: int
    message: str


def scan(text: str) -> list[str | Placeholder | PlaceholderError]:
    """Split a template into literal text and placeholders. `$${` is a literal `${`.

    Unknown namespaces and modifiers are reported as PlaceholderError, so `ll validate`
    can point at them before anything runs.
    """
    parts: list[str | Placeholder | PlaceholderError] = []
    literal: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        if text.startswith("$${", i):
            literal.append("${")
            i += 3
            continue
        if not text.startswith("${", i):
            j = text.find("$", i + 1)
            j = n if j < 0 else j
            literal.append(text[i:j])
            i = j
            continue
        close = text.find("}", i + 2)
        if close < 0:
            parts.append("".join(literal))
            literal = []
            parts.append(
                PlaceholderError(
                    i, "'${' is never closed with '}' (write '$${' for a literal '${')"
                )
            )
            literal.append(text[i:])
            break
        body = text[i + 2 : close].strip()
        m = _BODY.match(body)
        if literal:
            parts.append("".join(literal))
            literal = []
        if m is None:
            parts.append(
                PlaceholderError(
                    i, f"'${{{body}}}' is not a valid placeholder; write '${{namespace.name}}'"
                )
            )
        else:
            namespace, dotted, modifier, default = m.group(1), m.group(2), m.group(3), m.group(4)
            path = tuple(dotted[1:].split(".")) if dotted else ()
            if namespace not in NAMESPACES:
                parts.append(
                    PlaceholderError(
                        i,
                        f"unknown namespace '{namespace}' in '${{{body}}}'; "
                        f"use one of: {', '.join(NAMESPACES)}",
                    )
                )
            elif modifier is not None and modifier not in MODIFIERS:
                parts.append(
                    PlaceholderError(
                        i, f"unknown modifier '|{modifier}' in '${{{body}}}'; use '|raw' or '|q'"
                    )
                )
            elif not path:
                parts.append(
                    PlaceholderError(
                        i,
                        f"'${{{body}}}' names a namespace but no key; "
                        f"write '${{{namespace}.NAME}}'",
                    )
                )
            else:
                parts.append(Placeholder(i, close + 1, namespace, path, modifier, default))
        i = close + 1
    if literal:
        parts.append("".join(literal))
    return parts


def placeholders(text: str) -> list[Placeholder]:
    """The well-formed placeholders of a template, in order."""
    return [p for p in scan(text) if isinstance(p, Placeholder)]


# --------------------------------------------------------------------------- rendering

_ESCAPED_NAMESPACES = frozenset({"captured", "prev", "item"})  # item: a fork's (fork.py)


@record(frozen=True)
class _Compiled:
    parts: tuple[str | Placeholder, ...]
    error: PlaceholderError | None
    last_quoted: int  # index in parts of the last placeholder the shell lexer must place; -1
    # (index, key) of each plain `${context.K}`: quoted too when K holds program text
    context_keys: tuple[tuple[int, str], ...] = ()

    def last_quoted_with(self, program: frozenset[str]) -> int:
        """`last_quoted`, counting the context keys that hold program text."""
        last = self.last_quoted
        for index, key in self.context_keys:
            if key in program and index > last:
                last = index
        return last


@lru_cache(maxsize=1024)
def _compile(template: str) -> _Compiled:
    parts: list[str | Placeholder] = []
    error: PlaceholderError | None = None
    last_quoted = -1
    context_keys: list[tuple[int, str]] = []
    for part in scan(template):
        if isinstance(part, PlaceholderError):
            error = error or part
            continue
        if isinstance(part, Placeholder) and _needs_quoting(part):
            last_quoted = len(parts)
        elif isinstance(part, Placeholder) and part.namespace == "context" and not part.modifier:
            context_keys.append((len(parts), part.path[0]))
        parts.append(part)
    return _Compiled(tuple(parts), error, last_quoted, tuple(context_keys))


def reads_program_text(template: str, program: frozenset[str] = frozenset()) -> bool:
    """Whether a template's value holds program, model or human text (SPEC section 7, "Origin
    travels"): it reads `captured`, `prev` or `item`, or a context key in `program`."""
    for part in _compile(template).parts:
        if isinstance(part, Placeholder) and (
            part.namespace in _ESCAPED_NAMESPACES
            or (part.namespace == "context" and part.path[0] in program)
        ):
            return True
    return False


def program_keys(
    context: Mapping[str, Scalar], overrides: Mapping[str, str], given: frozenset[str]
) -> frozenset[str]:
    """The context keys whose values hold program text: `given` (a child's keys bound through
    `with:` from such text) and every key whose own template reads one of them."""
    if not given:
        return frozenset()
    templates = {k: _scalar_text(v) for k, v in context.items()}
    templates.update(overrides)
    program = set(given)
    changed = True
    while changed:
        changed = False
        for key, template in templates.items():
            if key not in program and reads_program_text(template, frozenset(program)):
                program.add(key)
                changed = True
    return frozenset(program)


def literal_text(template: str) -> str | None:
    """The text of a template without placeholders (escapes resolved), else None.

    The runner asks before building a scope: a command such as `make test` is rendered
    every step, and has nothing to resolve.
    """
    compiled = _compile(template)
    texts = [part for part in compiled.parts if isinstance(part, str)]
    if compiled.error is not None or len(texts) != len(compiled.parts):
        return None
    return "".join(texts)


# `@` before an absolute, home or relative path, which the Claude Code CLI attaches as a file
# (providers/claude_cli.py neutralises a judge's whole prompt the same way).
_AT_PATH = re.compile(r"@(?=~|/|\.{1,2}/)")


def _needs_quoting(p: Placeholder, program: frozenset[str] = frozenset()) -> bool:
    if p.modifier == "q":
        return True
    if p.modifier is not None:
        return False
    return p.namespace in _ESCAPED_NAMESPACES or (p.namespace == "context" and p.path[0] in program)


def render(
    template: str,
    scope: Mapping[str, Mapping[str, object]],
    *,
    shell: bool,
    where: str = "",
    command: bool = False,
    program: frozenset[str] = frozenset(),
) -> str:
    """Resolve every `${ns.path}` of `template` against `scope` (SPEC section 7).

    With `shell=True` the result is a shell command. Values from `captured` and `prev`, and
    any value marked `|q`, are escaped for the spot they stand in, so the shell reads them
    back byte for byte and never runs them: unquoted, a single-quoted word; inside "...",
    backslashes before `\\ $ ` "` (in a here-document body the same, without `"`); inside
    '...', each `'` becomes `'\\''`; inside $'...', the quote is closed around a plain '...'
    word; inside backticks, escaped again for each layer; in a `#` comment, newlines become
    spaces. So `|q` inside quotes does not add
    quote characters: it escapes for those quotes, and the value still arrives exactly.
    `|raw` values and the author's namespaces (`context`, `state`, `loop`, `env`) are written
    as they are. With `shell=False` every value is written as it is, and `|q` always gives a
    single-quoted word.

    Raises UndefinedVariable for a name `scope` lacks, and RunError for a malformed
    placeholder, a name that holds a group of values, or a spot no escaping can make safe
    (after a backslash, in a here-document's delimiter, a value line that would end a
    here-document, a single quote inside "${...}", after a bare `$` in `${...}`).
    A quoted value is also refused inside arithmetic, and anywhere after text whose reading
    differs between `sh` and `bash` (see `ShellLexer`).

    With `command=True` (an action: a shell command or a prompt passed to a program), a
    value holding a NUL byte is a RunError naming its placeholder: no argument carries one.
    In a prompt (`command=True, shell=False`: a slash action's), program text has its
    `@/path`, `@~/path` and `@./path` tokens neutralised (a fullwidth at sign), since the
    Claude Code CLI would attach the file they name.

    `program` names the context keys that hold program text (a child's keys bound through
    `with:` from `captured`, `prev`, `item`...): they are escaped like `captured`.
    """
    compiled = _compile(template)
    suffix = f" in {where}" if where else ""
    if compiled.error is not None:
        raise RunError(
            f"{compiled.error.message}{suffix} (at character {compiled.error.start + 1})"
        )
    last_quoted = compiled.last_quoted_with(program) if program else compiled.last_quoted
    lexer = ShellLexer() if shell and last_quoted >= 0 else None
    out: list[str] = []
    for index, part in enumerate(compiled.parts):
        if lexer is not None and index > last_quoted and not lexer.line_pending():
            lexer = None  # nothing after this needs the quoting state
        if isinstance(part, str):
            out.append(part)
            if lexer is not None:
                try:
                    lexer.feed(part)
                except UnsafeValue as exc:
                    raise RunError(f"cannot safely build the command{suffix}: {exc}") from None
            continue
        value = _to_text(_value(scope, part, where), part, suffix)
        if command and "\0" in value:
            raise RunError(
                f"'${{{part.name}}}'{suffix} holds a NUL byte, which no command can carry; "
                "write the value to a file in an earlier step and read it from there"
            )
        if lexer is not None and _needs_quoting(part, program):
            try:
                value = lexer.quote(value)
            except UnsafeValue as exc:
                raise RunError(
                    f"cannot safely place '${{{part.name}}}'{suffix}: {exc}; {exc.hint}"
                ) from None
        elif not shell and part.modifier == "q":
            value = single_quote(value)
        elif lexer is not None:
            try:
                lexer.feed(value)  # written as is: it may open or close quotes itself
            except UnsafeValue as exc:
                raise RunError(f"cannot safely build the command{suffix}: {exc}") from None
        if command and not shell and part.modifier != "raw" and _needs_quoting(part, program):
            # A prompt for the Claude Code CLI, which attaches any file an `@/path` names:
            # program text never names one (the author's own text may).
            value = _AT_PATH.sub("\uff20", value)
        out.append(value)
    return "".join(out)


def _value(scope: Mapping[str, object], placeholder: Placeholder, where: str) -> object:
    """The placeholder's value; its `:default=` text when the name is undefined or its value
    is empty (as the shell's `${VAR:-text}`)."""
    try:
        value = lookup(scope, placeholder, where=where)
    except UndefinedVariable:
        if placeholder.default is None:
            raise
        return placeholder.default
    if placeholder.default is not None and value in ("", None):
        return placeholder.default
    return value


def lookup(scope: Mapping[str, object], placeholder: Placeholder, *, where: str = "") -> object:
    """The raw value a placeholder names; UndefinedVariable when any step is missing."""
    node: object = scope.get(placeholder.namespace)
    for key in placeholder.path:
        if not isinstance(node, Mapping) or key not in node:
            raise UndefinedVariable(placeholder.name, where=where)
        node = node[key]
    if node is None and placeholder.namespace not in scope:
        raise UndefinedVariable(placeholder.name, where=where)
    return node


def _to_text(value: object, placeholder: Placeholder, suffix: str) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Mapping):
        keys = ", ".join(sorted(str(k) for k in value)) or "none"
        raise RunError(
            f"'${{{placeholder.name}}}'{suffix} is a group of values, not one; "
            f"name one of its keys: {keys}"
        )
    return str(value)


def resolve_context(
    context: Mapping[str, Scalar],
    overrides: Mapping[str, str],
    *,
    env: Mapping[str, str] | None = None,
    loop: Mapping[str, object] | None = None,
) -> dict[str, str]:
    """The loop's context as text: `--set` overrides applied, then `${context.X}` resolved.

    Overrides replace values or add keys, and are themselves templates like any context
    value. A value may name other context keys, `${env.NAME}` (default: `os.environ`) and,
    when `loop` is given, `${loop.name}` etc.; `captured`, `prev` and `state` do not exist
    before the run and are reported as errors. A cycle between keys is a RunError naming it.
    """
    raw: dict[str, str] = {}
    for key, value in context.items():
        raw[key] = _scalar_text(value)
    raw.update(overrides)
    env_scope: Mapping[str, str] = os.environ if env is None else env
    resolved: dict[str, str] = {}
    resolving: list[str] = []

    def resolve(key: str) -> str:
        if key in resolved:
            return resolved[key]
        if key in resolving:
            cycle = " -> ".join([*resolving[resolving.index(key) :], key])
            raise RunError(f"context values refer to each other in a cycle: {cycle}")
        resolving.append(key)
        template = raw[key]
        for part in _compile(template).parts:
            if not isinstance(part, Placeholder):
                continue
            if part.namespace == "context" and len(part.path) == 1 and part.path[0] in raw:
                resolve(part.path[0])
            elif part.namespace in ("captured", "prev", "state") or (
                part.namespace == "loop" and loop is None
            ):
                raise RunError(
                    f"context value '{key}' uses '${{{part.name}}}', which does not exist "
                    "before the run starts; use it in an action instead"
                )
        scope: dict[str, Mapping[str, object]] = {"context": resolved, "env": env_scope}
        if loop is not None:
            scope["loop"] = loop
        resolved[key] = render(template, scope, shell=False, where=f"context value '{key}'")
        resolving.pop()
        return resolved[key]

    for key in raw:
        resolve(key)
    return {key: resolved[key] for key in raw}


def _scalar_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
