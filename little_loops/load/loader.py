"""Loop file -> `Loop`: read with positions, check against the schema and the semantic checks,
build the model. A paradigm file is compiled to the native form first (`paradigms.py`).

The steps live in their own modules: `source` (bytes, text), `composer` (YAML with positions),
`schema`, `checks`, `builder` (document -> model); this one strings them together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path

from little_loops.errors import (
    Diagnostic,
    LoadError,
)
from little_loops.load import checks
from little_loops.load.builder import (
    Builder,
    guess_action_type,
)
from little_loops.load.composer import (
    SourceMap,
)
from little_loops.load.schema import (
    SchemaIssue,
    locate_issue,
    schema_issues,
)
from little_loops.load.source import (
    compose_cached,
    decode,
    read_bytes,
    read_document,
    sorted_diagnostics,
)
from little_loops.model.loop import (
    PARADIGMS,
    Loop,
    Pos,
)
from little_loops.wording import (
    NodePath,
    subject,
)

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

    from little_loops.load.paradigms import Compiled


def load(path: str | Path, *, follow: bool = True) -> Loop:
    """The loop in `path`; raises LoadError carrying every diagnostic when it has an error.

    `follow=False` does not load the files its `loop:` states call: a child about to run was
    checked with the whole tree when its root was loaded, and each of its own children is
    loaded when it is called, so a chain of D files is read D times, not D²/2.
    """
    token = _FOLLOW.set(follow)
    try:
        loop, diagnostics = try_load(path)
    finally:
        _FOLLOW.reset(token)
    if loop is None:
        raise LoadError(diagnostics)
    return loop


# Whether loading follows `loop:` states into their files (see `load`); per thread.
_FOLLOW: ContextVar[bool] = ContextVar("follow", default=True)


def try_load(path: str | Path, *, digest: bool = True) -> tuple[Loop | None, list[Diagnostic]]:
    """The loop (None when there is an error) and every diagnostic, sorted by line.

    `digest=False` leaves `Loop.source_sha256` empty, sparing `ll validate` hashlib's import.
    """
    file = str(path)
    data = read_bytes(Path(path), file)
    if isinstance(data, Diagnostic):
        return None, [data]
    return parse(data, path=Path(path), file=file, digest=digest)


def parse(
    data: bytes, *, path: Path, file: str | None = None, digest: bool = True
) -> tuple[Loop | None, list[Diagnostic]]:
    """Like `try_load`, for a file's bytes already read."""
    file = str(path) if file is None else file
    sha = ""
    if digest:
        from little_loops.record.store import sha256  # without hashlib's OpenSSL import

        sha = sha256(data)
    text = decode(data, file)
    if isinstance(text, Diagnostic):
        return None, [text]
    doc, smap, diagnostics, complete = compose_cached(data, text, path, file, sha)
    if not complete:
        return None, sorted_diagnostics(diagnostics)
    loop, more = _from_document(doc, smap, path=path, file=file, sha256=sha)
    if diagnostics:  # duplicate keys: the document is whole, but not what the author meant
        return None, sorted_diagnostics(diagnostics + more)
    return loop, more


def load_document(
    doc: Any, *, path: Path, file: str | None = None, smap: SourceMap | None = None
) -> tuple[Loop | None, list[Diagnostic]]:
    """Check and build a loop from an already-parsed document.

    `smap` says where each node came from (a compiled paradigm maps its states back to the
    paradigm file's lines); without it every position is 1:1.
    """
    file = str(path) if file is None else file
    return _from_document(doc, smap or SourceMap(), path=path, file=file, sha256="")


def compile_file(path: Path, file: str | None = None) -> tuple[Compiled | None, list[Diagnostic]]:
    """Read, check and compile a paradigm file (`ll compile`); every diagnostic, FSM ones too.

    A file in the native form gives (None, []) when it is valid.
    """
    from little_loops.load.paradigms import compile_document

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
        return None, sorted(issues, key=lambda d: (d.line, d.col, d.message))
    compiled, problems = compile_document(doc, smap, file=file)
    if compiled is None:
        return None, problems
    loop, found = load_document(compiled.doc, path=path, file=file, smap=compiled.smap)
    return (compiled if loop is not None else None), found


def _from_document(
    doc: Any, smap: SourceMap, *, path: Path, file: str, sha256: str
) -> tuple[Loop | None, list[Diagnostic]]:
    def error(at: Pos, code: str, message: str) -> list[Diagnostic]:
        return [Diagnostic(file, at.line, at.col, "error", code, message)]

    if doc is None:
        return None, error(
            Pos(), "empty-file", "the file is empty; a loop needs 'name', 'initial' and 'states'"
        )
    if not isinstance(doc, dict):
        kind = "a list" if isinstance(doc, list) else "a single value"
        return None, error(
            smap.value(()),
            "not-a-mapping",
            f"a loop file must be a mapping of keys (name:, initial:, states:), not {kind}",
        )
    issues = _one_per_choices(schema_issues(doc))
    diagnostics = [
        locate_issue(i, file=file, locate_value=smap.value, locate_key=smap.key) for i in issues
    ]
    diagnostics += _cut_by_comment(doc, smap, file)
    paradigm = doc.get("paradigm")
    if isinstance(paradigm, str) and paradigm in PARADIGMS:
        return _compiled(doc, smap, diagnostics, issues, path=path, file=file, sha256=sha256)
    # Checks that depend on a broken key would only repeat the schema's news; the rest run.
    tainted = _tainted(issues)
    loop, route_entries = Builder(smap).loop(doc, path=path, sha256=sha256)
    found = checks.check_loop(
        loop,
        file=file,
        locate=smap.value,
        route_entries=route_entries,
        tainted=tainted,
    )
    if _FOLLOW.get() and any(s.is_loop or s.is_fork for s in loop.states.values()):
        from little_loops.load.children import follow

        found += follow(loop, file=file, locate=smap.value, load=_load_child, tainted=tainted)
    # One problem per spot: a semantic finding where the schema already spoke is a repeat.
    spoken = {(d.file, d.line, d.col) for d in diagnostics}
    diagnostics += [d for d in found if (d.file, d.line, d.col) not in spoken]
    diagnostics = sorted_diagnostics(diagnostics)
    if any(d.severity == "error" for d in diagnostics):
        return None, diagnostics
    return loop, diagnostics


def _load_child(path: Path, file: str) -> tuple[Loop | None, list[Diagnostic]]:
    """A child loop of a `loop:` state, its diagnostics named by `file`."""
    data = read_bytes(path, file)
    if isinstance(data, Diagnostic):
        return None, [data]
    loop, found = parse(data, path=path, file=file, digest=True)
    if loop is not None:
        _FOLLOWED[path] = loop
    return loop, found


def followed(path: Path) -> Loop | None:
    """The child file at `path` (resolved) as its tree's root load read and checked it in this
    process, or None: a run calling it compares its digest with the file's and need not parse
    it a second time (bench/nesting.py, a chain of files)."""
    return _FOLLOWED.get(path)


_FOLLOWED: dict[Path, Loop] = {}


def _compiled(
    doc: dict[str, Any],
    smap: SourceMap,
    diagnostics: list[Diagnostic],
    issues: list[SchemaIssue],
    *,
    path: Path,
    file: str,
    sha256: str,
) -> tuple[Loop | None, list[Diagnostic]]:
    """A paradigm file, compiled and checked like any loop.

    Unknown top-level keys do not stop the compiler (it never reads them), so their errors
    come with the compiled loop's; any other schema error leaves nothing sound to compile.
    """
    unknown = {i.key for i in issues if i.path == () and i.code == "unknown-key"}
    if any(i.path != () or i.code != "unknown-key" for i in issues):
        return None, sorted_diagnostics(diagnostics)
    from little_loops.load.paradigms import (
        compile_document,  # only paradigm files pay for the compiler
    )

    known = {k: v for k, v in doc.items() if k not in unknown}
    compiled, found = compile_document(known, smap, file=file)
    if compiled is None:
        return None, sorted_diagnostics(diagnostics + found)
    loop, found = _from_document(compiled.doc, compiled.smap, path=path, file=file, sha256=sha256)
    if diagnostics:
        return None, sorted_diagnostics(diagnostics + found)
    return loop, found


def _one_per_choices(issues: list[SchemaIssue]) -> list[SchemaIssue]:
    """`choices: [yes, no]` is one mistake (unquoted booleans), told once per state."""
    seen: set[object] = set()
    kept = []
    for issue in issues:
        at = issue.path
        if (
            len(at) == 4
            and at[0] == "states"
            and at[2] == "choices"
            and "quote them" in issue.message
        ):
            if at[1] in seen:
                continue
            seen.add(at[1])
        kept.append(issue)
    return kept


def _tainted(issues: Iterable[SchemaIssue]) -> frozenset[str]:
    """The states whose routing a schema issue breaks, and `WHOLE_LOOP` for loop-wide routing.

    Only keys that decide where a run goes (or unknown keys that may be misspelt ones) count:
    a wrong `description` or `timeout` hides no routing fact, so it must not hide its checks.
    """
    found = (_routing_broken_by(issue) for issue in issues)
    return frozenset(name for name in found if name is not None)


def _routing_broken_by(issue: SchemaIssue) -> str | None:
    from little_loops.load.hints import (
        LOOP_ROUTING_KEYS,
        STATE_ROUTING_KEYS,
        may_route,
    )

    at, key = issue.path, issue.key
    unknown = issue.code == "unknown-key" and key is not None
    if at == ("states",):
        return key  # a state whose name is not valid; None: `states` itself is wrong
    if at[:1] == ("states",):
        first = at[2] if len(at) > 2 else key
        if first is None or first in STATE_ROUTING_KEYS:
            return str(at[1])
        if len(at) == 2 and unknown and may_route(str(first), STATE_ROUTING_KEYS):
            return str(at[1])
        return None
    if at[:1] and at[0] in LOOP_ROUTING_KEYS:
        return checks.WHOLE_LOOP
    if not at and unknown and may_route(str(key), LOOP_ROUTING_KEYS):
        return checks.WHOLE_LOOP
    return None


# Where a paradigm file holds actions (a state's `action` is checked in every file).
_PARADIGM_ACTIONS = frozenset({("check",), ("using",), ("finally",)})
_PARADIGM_ACTION_LISTS = frozenset({"tools", "steps"})


def _cut_by_comment(doc: Mapping[str, Any], smap: SourceMap, file: str) -> list[Diagnostic]:
    """Warnings for unquoted actions a YAML comment cut short (` #` ends a plain value)."""
    if not smap.comments:
        return []
    from little_loops.load.hints import comment_cuts_command

    out = []
    for at, (pos, comment) in smap.comments.items():
        command = _action_at(doc, at)
        if command is None:
            continue
        given = _value_at(doc, (*at[:-1], "action_type")) if at[0] == "states" else None
        slash = given == "slash" or (given != "shell" and guess_action_type(command) == "slash")
        if not comment_cuts_command(command, comment, slash=slash):
            continue  # the shell would have read the same comment
        message = (
            f"{subject(at)} is cut short: ' #' starts a YAML comment, so the rest of the line "
            "is not part of the command; quote the whole action"
        )
        out.append(Diagnostic(file, pos.line, pos.col, "warning", "action-cut-by-comment", message))
    return out


def _action_at(doc: Mapping[str, Any], at: NodePath) -> str | None:
    """The action at `at`, when `at` is where a state or a paradigm file holds one."""
    in_state = len(at) == 3 and at[0] == "states" and at[2] == "action"
    in_paradigm = "paradigm" in doc and (
        at in _PARADIGM_ACTIONS
        or (len(at) == 2 and at[0] in _PARADIGM_ACTION_LISTS)
        or (len(at) == 3 and at[0] == "constraints" and at[2] in ("check", "fix"))
    )
    if not (in_state or in_paradigm):
        return None
    value = _value_at(doc, at)
    return value if isinstance(value, str) else None


def _value_at(doc: Any, at: NodePath) -> Any:
    for part in at:
        if isinstance(doc, dict) and isinstance(part, str):
            doc = doc.get(part)
        elif isinstance(doc, list) and isinstance(part, int) and 0 <= part < len(doc):
            doc = doc[part]
        else:
            return None
    return doc
