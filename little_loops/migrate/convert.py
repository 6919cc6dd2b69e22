"""`ll migrate`: upstream little-loops files converted to this format, with notes.

The files named, and the sub-loops they call, are converted together into one folder (the
same layout as the sources), each then loaded by `ll validate`'s loader; `MIGRATION-NOTES.md`
lists per file every rewrite that keeps upstream's behaviour, every change of behaviour and
every construct with no equivalent, with its upstream line. Exit 0 when every file converted
and validates, 1 when some need hand work, 2 when an input cannot be read.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml.comments import CommentedMap

from little_loops.migrate.evals import split_exit_check
from little_loops.migrate.expand import (
    ROOT,
    Unreadable,
    expand_flow,
    expand_fragments,
    expand_from,
    load,
    outside,
    outside_note,
    resolve,
    yaml_rt,
)
from little_loops.migrate.notes import (
    Notes,
    line_of,
    rename,
)
from little_loops.migrate.rules import (
    Links,
    convert_state,
    convert_top,
)
from little_loops.migrate.text import (
    CONTEXT_USE,
    rewrite_loop,
    walk_strings,
)

EXIT_CONVERTED, EXIT_HAND_WORK, EXIT_UNREADABLE = 0, 1, 2
NOTES_FILE = "MIGRATION-NOTES.md"


@dataclass
class Migrated:
    """One converted file: where it came from, where it went, and what happened."""

    source: Path
    rel: Path  # its path inside the output folder
    doc: CommentedMap
    notes: Notes = field(default_factory=Notes)
    text: str = ""
    diagnostics: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.notes.needs_hand_work and not self.diagnostics


@dataclass
class Migration:
    files: list[Migrated]
    unreadable: list[str]

    @property
    def exit_code(self) -> int:
        if self.unreadable:
            return EXIT_UNREADABLE
        return EXIT_CONVERTED if all(m.ok for m in self.files) else EXIT_HAND_WORK


def migrate(paths: list[Path], out: Path | None) -> Migration:
    """Convert `paths` (and the sub-loops they call) into `out`, or a scratch folder.

    Only files inside the folder that holds `paths` are read (ROOT): a `loop:`, `from:` or
    `import:` naming a file elsewhere is noted for a person, never copied into `out`."""
    folders = [str(p.resolve().parent) for p in paths]
    token = ROOT.set(Path(os.path.commonpath(folders)) if folders else None)
    try:
        return _migrate(paths, out)
    finally:
        ROOT.reset(token)


def _migrate(paths: list[Path], out: Path | None) -> Migration:
    loaded: dict[Path, Migrated] = {}
    unreadable: list[str] = []
    queue = [p.resolve() for p in paths]
    inputs = set(queue)
    while queue:
        path = queue.pop(0)
        if path in loaded:
            continue
        try:
            doc = load(path)
        except Unreadable as exc:
            if path in inputs:
                unreadable.append(str(exc))
            continue
        item = Migrated(path, Path(path.name), doc)
        if "fragments" in doc and "states" not in doc and "flow" not in doc:
            item.notes.hand(
                line_of(doc, "fragments"),
                "a fragment library, not a loop: `ll migrate` copies its fragments into the "
                "loops that import it; convert those loops instead",
            )
        with _odd_values(item):
            expand_from(doc, path, item.notes)
            expand_flow(doc, item.notes)
            expand_fragments(doc, path, item.notes)
        loaded[path] = item
        for ref in _loop_refs(item.doc):
            far = outside(ref, path.parent)
            if far is not None:
                item.notes.hand(_loop_line(item.doc, ref), outside_note("loop", ref, far))
            child = resolve(ref, path.parent)
            if child is not None:
                queue.append(child.resolve())
    if not loaded:
        return Migration([], unreadable)
    base = Path(os.path.commonpath([str(p.parent) for p in loaded]))
    given_run_dir = _children_given_run_dir(loaded)
    for item in loaded.values():
        item.rel = item.source.relative_to(base)
        with _odd_values(item):
            convert_top(item.doc, item.notes)
            if item.source in given_run_dir:
                _declare_run_dir(item)
    wanted: list[tuple[Path, str, Migrated, int]] = []  # (child, capture, parent, line)
    for item in loaded.values():
        with _odd_values(item):
            wanted += _convert(item, loaded)
    for child, capture, parent, line in wanted:
        _add_output(loaded.get(child), capture, parent, line)
    _child_step_limits(loaded)
    if out is not None:
        clash = next((m for m in loaded.values() if (out / m.rel).resolve() == m.source), None)
        if clash is not None:
            problem = f"{out}: --out would overwrite {clash.source}; name another folder"
            return Migration([], [*unreadable, problem])
    if out is None:
        with tempfile.TemporaryDirectory(prefix="ll-migrate-") as scratch:
            _write_and_check(list(loaded.values()), Path(scratch))
    else:
        _write_and_check(list(loaded.values()), out)
    ordered = [loaded[p] for p in dict.fromkeys(queue_order(paths, loaded))]
    migration = Migration(ordered, unreadable)
    if out is not None:
        (out / NOTES_FILE).write_text(notes_markdown(migration), encoding="utf-8")
    return migration


@contextmanager
def _odd_values(item: Migrated) -> Iterator[None]:
    """A value of a type upstream's own validator would refuse (a list where a name goes)
    stops that file's conversion, noted for a person, and never the whole command."""
    try:
        yield
    except (TypeError, AttributeError, ValueError, KeyError, RecursionError) as exc:
        item.notes.hand(
            0,
            f"a value of an unexpected type stopped the conversion ({type(exc).__name__}: "
            f"{str(exc)[:80]}); the file is written unconverted: check it with upstream's "
            "validator first",
        )
        item.doc = load(item.source)


def queue_order(paths: list[Path], loaded: dict[Path, Migrated]) -> Iterator[Path]:
    """The files named first, in their order, then the sub-loops brought in."""
    for p in paths:
        if p.resolve() in loaded:
            yield p.resolve()
    yield from loaded


def _loop_line(doc: CommentedMap, ref: str) -> int:
    states = doc.get("states")
    for state in states.values() if isinstance(states, dict) else []:
        if isinstance(state, dict) and state.get("loop") == ref:
            return line_of(state, "loop")
    return 0


def _loop_refs(doc: CommentedMap) -> Iterator[str]:
    states = doc.get("states")
    for state in states.values() if isinstance(states, dict) else []:
        if isinstance(state, dict) and isinstance(state.get("loop"), str):
            yield state["loop"]


def _convert(item: Migrated, loaded: dict[Path, Migrated]) -> list[tuple[Path, str, Migrated, int]]:
    """The states and texts of one file; the child outputs its texts read, to add."""
    doc, notes = item.doc, item.notes

    def loop_path(ref: str) -> str | None:
        child = resolve(ref, item.source.parent)
        if child is None:
            return None
        return os.path.relpath(child.resolve(), item.source.parent)

    def child_inputs(ref: str) -> list[str]:
        child = resolve(ref, item.source.parent)
        found = loaded.get(child.resolve()) if child is not None else None
        if found is None:
            return []
        context = found.doc.get("context")
        keys = {str(k) for k in context} if isinstance(context, dict) else set()

        def look(text: str) -> str:
            keys.update(m.group(1) for m in CONTEXT_USE.finditer(text))
            return text

        walk_strings(found.doc.get("states"), look, skip=("x-upstream",))
        return sorted(keys)

    context = doc.get("context")
    own = frozenset(str(k) for k in context) if isinstance(context, dict) else frozenset()
    links = Links(loop_path, child_inputs, own | {"run_dir"})
    states = doc.get("states")
    longest = 0  # the most states added after one state: steps one upstream step may take
    if isinstance(states, CommentedMap):
        upstream_states = list(states.items())
        for name, state in upstream_states:
            if isinstance(state, CommentedMap):
                line = line_of(states, name)
                pos = list(states).index(name)
                added = convert_state(str(name), state, line, notes, links)
                for new_name, new in added:
                    pos += 1
                    states.insert(pos, new_name, new)
                    convert_state(new_name, new, line, notes, links)
                longest = max(longest, len(added))
        for name, state in upstream_states:  # not the states added above
            if not isinstance(state, CommentedMap):
                continue
            found = split_exit_check(
                str(name), state, {str(n) for n in states}, line_of(states, name), notes
            )
            if found is not None:
                states.insert(list(states).index(name) + 1, *found)
                longest = max(longest, 1)
        if longest:
            _more_steps(doc, 1 + longest, notes)
    _bash(doc, notes)
    _settle(item)
    _route_unrouted(item)
    _route_unrouted(item)  # a route added to a slash step makes it judged: more verdicts
    wanted: list[tuple[Path, str, Migrated, int]] = []
    for state_name, capture, line in rewrite_loop(item.doc, item.notes):
        state = states[state_name] if isinstance(states, dict) else None
        child = resolve(str(state.get("loop")), item.source.parent) if state else None
        if state is None or child is None:
            continue
        state.setdefault("capture", state_name)
        wanted.append((child.resolve(), capture, item, line))
    return wanted


def _bash(doc: CommentedMap, notes: Notes) -> None:
    """Upstream runs every shell action with `bash -c`; `ll`'s default shell is `/bin/sh`."""
    states = doc.get("states")
    shell = [
        s
        for s in (states.values() if isinstance(states, dict) else [])
        if isinstance(s, CommentedMap) and isinstance(s.get("action"), str) and not _slash(s)
    ]
    if not shell or "shell" in doc:
        return
    doc.insert(_top_pos(doc), "shell", "bash")
    notes.carried(
        0,
        "`shell: bash`: upstream runs every shell action with `bash -c` (bash syntax such as "
        "`[[`, arrays, `pipefail` and `<<<` included); `ll`'s default is `/bin/sh`",
    )


def _slash(state: CommentedMap) -> bool:
    from little_loops.migrate.routes import _is_slash

    return _is_slash(state)


def _top_pos(doc: CommentedMap) -> int:
    order = list(doc)
    return order.index("states") if "states" in order else len(order)


STOP_STATE = "no_route"


def _plain(node: object) -> object:
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    return node


def _route_unrouted(item: Migrated) -> None:
    """Verdicts upstream left unrouted ended its run in error at that state; here every
    verdict a state can give must be routed. Each goes where upstream sent it: `no` to
    `on_error` when there is one (upstream's fallback), anything else to a terminal that
    ends the run as upstream's did (outcome failure, exit 1)."""
    from little_loops.load.builder import Builder
    from little_loops.load.checks import verdicts
    from little_loops.load.composer import SourceMap
    from little_loops.model.loop import ERROR_VERDICTS
    from little_loops.model.router import route

    doc, notes = item.doc, item.notes
    states = doc.get("states")
    if not isinstance(states, CommentedMap):
        return
    plain = _plain(doc)
    assert isinstance(plain, dict)
    loop, _ = Builder(SourceMap()).loop(plain, path=item.source, sha256="")
    stop: str | None = None

    def stop_state() -> str:
        nonlocal stop
        if stop is None:
            stop = STOP_STATE
            while stop in states:
                stop += "_"
            states[stop] = CommentedMap(
                description="upstream ended the run in error here: the verdict had no route",
                terminal=True,
                outcome="failure",
            )
        return stop

    errors_unrouted: list[int] = []
    for name, state in loop.states.items():
        raw = states.get(name)
        if state.terminal or state.is_fork or not isinstance(raw, CommentedMap):
            continue
        possible = ERROR_VERDICTS if state.is_loop else verdicts(state)
        for verdict in sorted(possible):
            if route(loop, state, verdict) is not None:
                continue
            line = line_of(states, name)
            if verdict in ERROR_VERDICTS:
                errors_unrouted.append(line)
                continue
            table = raw.get("route")
            fallback = raw.get("on_error") or (
                table.get("_error") if isinstance(table, dict) else None
            )
            if verdict == "failure" and isinstance(fallback, str):
                target, why = fallback, "upstream sent an unrouted `no` to `on_error`"
            else:
                target, why = stop_state(), "upstream ended the run in error there"
            _add_route(raw, verdict, target)
            notes.carried(
                line,
                f"state '{name}': verdict `{verdict}` had no route ({why}); routed to '{target}'",
            )
    if errors_unrouted and "on_error" not in doc:
        doc.insert(_top_pos(doc), "on_error", stop_state())
        notes.carried(
            errors_unrouted[0],
            "an `error` or `timeout` no state routes ended upstream's run in error: "
            f"`on_error: {stop}` (a terminal with outcome failure) ends it the same way",
            errors_unrouted,
        )


def _settle(item: Migrated) -> None:
    """What upstream's loop held but could never use: routes of verdicts a state never
    gives, routes on terminals, states no route reaches. Dropped (kept under `x-upstream`),
    so that the file passes `ll validate --strict`; the run goes the same way."""
    from little_loops.load.builder import Builder
    from little_loops.load.checks import _closure, _edges, verdicts
    from little_loops.load.composer import SourceMap

    doc, notes = item.doc, item.notes
    states = doc.get("states")
    if not isinstance(states, CommentedMap):
        return
    plain = _plain(doc)
    assert isinstance(plain, dict)
    loop, _ = Builder(SourceMap()).loop(plain, path=item.source, sha256="")
    shorthands = {"success": "on_success", "failure": "on_failure", "error": "on_error"}
    for name, state in loop.states.items():
        raw = states.get(name)
        if not isinstance(raw, CommentedMap) or state.is_loop or state.is_fork:
            continue
        line = line_of(states, name)
        if state.terminal:
            keys = [k for k in (*shorthands.values(), "on_timeout", "route", "next") if k in raw]
            if keys:
                kept = raw.setdefault("x-upstream", CommentedMap())
                for key in keys:
                    kept[key] = raw.pop(key)
                notes.carried(
                    line, "routes on a terminal state are never used; kept under `x-upstream`"
                )
            continue
        possible = verdicts(state)
        table = raw.get("route") if isinstance(raw.get("route"), CommentedMap) else None
        for verdict, key in shorthands.items():
            if verdict in possible or key not in raw:
                continue
            if verdict == "error" and "timeout" in possible and "on_timeout" not in raw:
                rename(raw, "on_error", "on_timeout")
                continue
            raw.setdefault("x-upstream", CommentedMap())[key] = raw.pop(key)
            notes.carried(line, _NEVER_GIVEN)
        for verdict in list(table or []):
            if str(verdict).startswith("_") or verdict in possible or table is None:
                continue
            raw.setdefault("x-upstream", CommentedMap()).setdefault("route", CommentedMap())[
                verdict
            ] = table.pop(verdict)
            notes.carried(line, _NEVER_GIVEN)
    plain = _plain(doc)
    assert isinstance(plain, dict)
    loop, _ = Builder(SourceMap()).loop(plain, path=item.source, sha256="")
    names = frozenset(loop.states)
    edges = {n: _edges(loop, st, names) for n, st in loop.states.items()}
    roots = {loop.initial}
    if loop.on_max_iterations:
        roots.add(loop.on_max_iterations)
    if isinstance(doc.get("on_error"), str):
        roots.add(str(doc["on_error"]))
    reachable = _closure(roots, edges)
    unreached = [n for n in loop.states if n not in reachable]
    if unreached and loop.initial in states:
        kept = doc.setdefault("x-upstream", CommentedMap())
        lines = [line_of(states, n) for n in unreached]
        unused = kept.setdefault("states", CommentedMap())
        for name in unreached:
            unused[name] = states.pop(name)
        notes.carried(
            lines[0],
            f"states no route reaches ({', '.join(unreached[:6])}): upstream never ran them "
            "either; kept under `x-upstream`",
            lines,
        )


_NEVER_GIVEN = (
    "a route for a verdict the state never gives (upstream's evaluator could not give it "
    "either) is never taken; kept under `x-upstream`"
)


def _add_route(state: CommentedMap, verdict: str, target: str) -> None:
    shorthand = {"success": "on_success", "failure": "on_failure"}.get(verdict)
    if "route" not in state and shorthand is not None and shorthand not in state:
        state[shorthand] = target
        return
    from little_loops.migrate.routes import _as_route

    _as_route(state).setdefault(verdict, target)


def _more_steps(doc: CommentedMap, factor: int, notes: Notes) -> None:
    """States added after a state make one upstream step several: the limit grows with them."""
    before = doc.get("max_iterations", 50)
    if not isinstance(before, int):
        return
    doc["max_iterations"] = before * factor
    notes.changed(
        line_of(doc, "max_iterations"),
        f"`max_iterations: {before * factor}` (upstream {before}): a step here may be followed "
        f"by up to {factor - 1} added check states, which count as steps",
    )


def _children_given_run_dir(loaded: dict[Path, Migrated]) -> set[Path]:
    """Sub-loops whose callers pass `run_dir` (or their whole context): upstream's
    `${context.run_dir}` in them was the caller's folder."""
    found: set[Path] = set()
    for item in loaded.values():
        states = item.doc.get("states")
        for state in states.values() if isinstance(states, dict) else []:
            if not isinstance(state, dict) or "loop" not in state:
                continue
            bound = state.get("with")
            passes = state.get("context_passthrough") or (
                isinstance(bound, dict) and "run_dir" in bound
            )
            child = resolve(str(state["loop"]), item.source.parent)
            if passes and child is not None:
                found.add(child.resolve())
    return found


LIMIT_STATE = "max_steps_reached"


def _child_step_limits(loaded: dict[Path, Migrated]) -> None:
    """Upstream's parent sends a sub-loop that ran out of steps to its `on_timeout`, else its
    `on_no`; here such a child gives `error`. A child with no `on_max_iterations` gets one,
    a terminal the parent routes by name where upstream went."""
    for item in loaded.values():
        states = item.doc.get("states")
        for name, state in states.items() if isinstance(states, dict) else []:
            if not isinstance(state, CommentedMap) or not isinstance(state.get("loop"), str):
                continue
            table = state.get("route") if isinstance(state.get("route"), dict) else {}
            target = state.get("on_timeout", table.get("timeout"))
            if target is None:
                target = state.get("on_failure", table.get("failure"))
            found = resolve(str(state["loop"]), item.source.parent)
            child = loaded.get(found.resolve()) if found is not None else None
            if target is None or child is None:
                continue
            limit = _limit_terminal(child)
            if limit is None:
                continue
            from little_loops.migrate.routes import _as_route

            _as_route(state).setdefault(limit, target)
            item.notes.carried(
                line_of(states, name),
                f"state '{name}': upstream went to '{target}' when the sub-loop ran out of "
                f"steps; the child ends at '{limit}' then, routed here by that name",
            )


def _limit_terminal(child: Migrated) -> str | None:
    """The child's `on_max_iterations` terminal, added when it has none."""
    doc, states = child.doc, child.doc.get("states")
    if not isinstance(states, CommentedMap):
        return None
    if "on_max_iterations" in doc:
        named = states.get(doc["on_max_iterations"])
        is_terminal = isinstance(named, dict) and named.get("terminal")
        return str(doc["on_max_iterations"]) if is_terminal else None
    name = LIMIT_STATE
    while name in states:
        name += "_"
    states[name] = CommentedMap(
        description="upstream's caller took its failure route when this loop ran out of steps",
        terminal=True,
        outcome="failure",
    )
    doc.insert(_top_pos(doc), "on_max_iterations", name)
    child.notes.carried(
        line_of(doc, "states"),
        f"`on_max_iterations: {name}` (a terminal): a caller routes a run that ran out of "
        "steps by that name, where upstream's caller went on `no` (here the run's outcome "
        "stays `max_iterations`, exit 4)",
    )
    return name


def _declare_run_dir(item: Migrated) -> None:
    context = item.doc.get("context")
    if not isinstance(context, dict):
        context = CommentedMap()
        item.doc.insert(list(item.doc).index("states"), "context", context)
    if "run_dir" not in context:
        context["run_dir"] = "${loop.run_dir}"
        item.notes.carried(
            line_of(item.doc, "context"),
            "a caller passes `run_dir`, so `run_dir` is a context input here, by default "
            "`${loop.run_dir}` (upstream's runner set it the same way)",
        )


def _add_output(child: Migrated | None, capture: str, parent: Migrated, line: int) -> None:
    """A parent read the child's capture upstream: the child declares it as an output here."""
    if child is None:
        return
    outputs = child.doc.setdefault("outputs", CommentedMap())
    if capture not in outputs:
        outputs[capture] = "${captured." + capture + ".output:default=}"
    parent.notes.carried(
        line,
        f"`${{captured.STATE.{capture}.output}}` read the sub-loop's own capture upstream: "
        f"here {child.rel} declares it under `outputs:`, read as `${{captured.STATE.outputs."
        f"{capture}}}`",
    )


def render(doc: CommentedMap, source: Path) -> str:
    buf = io.StringIO()
    yaml_rt().dump(doc, buf)
    head = f"# Converted from upstream little-loops ({source.name}) by `ll migrate`.\n"
    return head + buf.getvalue()


def _write_and_check(items: list[Migrated], out: Path) -> None:
    from little_loops.load.loader import (
        try_load,  # the loader only when there is something to check
    )

    for item in items:
        item.text = render(item.doc, item.source)
        target = out / item.rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(item.text, encoding="utf-8")
    for item in items:
        _, diagnostics = try_load(out / item.rel, digest=False)
        item.diagnostics = [
            f"{item.rel}:{d.line}:{d.col}: {d.message}"
            for d in diagnostics
            if d.severity == "error"
        ]


def notes_markdown(migration: Migration) -> str:
    lines = [
        "# Migration notes",
        "",
        "Written by `ll migrate` (docs/migrating.md). Line numbers are those of the upstream",
        "file. **carried**: rewritten so the loop does what it did upstream; **behaves",
        "differently**: it does not; **no equivalent**: dropped (its value is kept under",
        "`x-upstream`); **needs hand work**: a person must finish it.",
        "",
    ]
    for problem in migration.unreadable:
        lines += [f"- **unreadable**: {problem}", ""]
    for item in migration.files:
        status = "converted" if item.ok else "needs hand work"
        lines += [f"## {item.rel} ({status})", "", *item.notes.markdown()]
        for diagnostic in item.diagnostics:
            lines.append(f"- **needs hand work**: `ll validate` after migration: {diagnostic}")
        lines.append("")
    return "\n".join(lines)
