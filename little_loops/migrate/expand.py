"""`ll migrate`: upstream's shared pieces expanded into the loop that uses them.

Upstream builds a loop from other files at load time: `from: BASE` inherits a whole loop,
`import: [lib/X.yaml]` + a state's `fragment: NAME` (with `with:` for its `parameters`) copies
state fields in, and `flow:` + `state_defs:` strings states together. This format has none of
these, so the migrated file holds the result, written out.
"""

from __future__ import annotations

import copy
import functools
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from little_loops.migrate.notes import (
    Notes,
    line_of,
)

_PARAM = re.compile(r"\$\{param\.([A-Za-z0-9_-]+)\}")


class Unreadable(Exception):
    """A file that cannot be read as a YAML mapping: `ll migrate` exits 2."""


def yaml_rt() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    return y


# What stops the loader's own reading stops ours: a document too large once its aliases are
# expanded (an alias bomb), nested too deep.
_LIMITS = ("too-large", "too-deep", "recursive-alias")


def _bounded_text(path: Path) -> str:
    """The file's text, read as `ll validate` reads a loop file: a pipe waited on for a few
    seconds, a device or directory refused, at most 1 MiB, UTF-8. `_parsed` then checks it
    for alias bombs and depth before ruamel.yaml, which has no such limits, expands anything."""
    from little_loops.load.source import (
        decode,
        read_bytes,
    )

    def refuse(message: str) -> Unreadable:
        return Unreadable(f"{path}: cannot read: {message}")

    if path.exists() and not (path.is_file() or path.is_fifo()):
        raise refuse("not a regular file (a device or a directory); give a loop file")
    data = read_bytes(path, str(path))
    if not isinstance(data, bytes):
        raise refuse(data.message)
    text = decode(data, str(path))
    if not isinstance(text, str):
        raise refuse(text.message)
    return text


def load(path: Path) -> CommentedMap:
    """A YAML mapping with its comments, or Unreadable with a one-line reason."""
    return _parse(str(path), _bounded_text(path))


def _library(path: Path) -> CommentedMap:
    """An `import:`ed library, to read only (its fragments are copied before they are used).

    One library (`lib/common.yaml`) is imported by most loops of a folder, and ruamel.yaml's
    round-trip parser is slow (0.15 s for its 22 KB): a text parsed once in this process is not
    parsed again. Keyed on the text itself, so an edited library is read afresh."""
    return _parsed_library(str(path), _bounded_text(path))


def _parse(path: str, text: str) -> CommentedMap:
    from little_loops.load.composer import compose

    for limit in compose(text, path)[2]:
        if limit.code in _LIMITS:
            raise Unreadable(f"{path}:{limit.line}: {limit.message}")
    try:
        doc = yaml_rt().load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise Unreadable(f"{path}{where}: not valid YAML: {problem}") from None
    except Exception as exc:  # ruamel raises a few non-YAMLError types on odd input
        raise Unreadable(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, CommentedMap):
        raise Unreadable(f"{path}: not a loop file: the top level is not a mapping")
    return doc


_parsed_library = functools.lru_cache(maxsize=32)(_parse)


# The folder being converted (the common folder of the files named): no file outside it is
# ever read, so nothing from elsewhere on disk is copied into --out. None: no limit (tests).
ROOT: ContextVar[Path | None] = ContextVar("ROOT", default=None)


def _candidate(ref: str, here: Path) -> Path | None:
    for base in (here, here.parent, here.parent.parent):
        for name in (ref, ref + ".yaml", ref + ".yml"):
            candidate = base / name
            if candidate.is_file():
                return candidate
    return None


def outside(ref: str, here: Path) -> Path | None:
    """The file `ref` would name when it lies outside the folder being converted (an absolute
    path, `..`, a link pointing out): never read. None when it is inside, or names nothing."""
    root = ROOT.get()
    found = _candidate(ref, here)
    if root is None or found is None:
        return None
    return None if found.resolve().is_relative_to(root) else found


def resolve(ref: str, here: Path) -> Path | None:
    """Upstream names files relative to its loops folder: try this file's folder, then up.
    A file outside the folder being converted is not found (`outside` says why)."""
    if outside(ref, here) is not None:
        return None
    return _candidate(ref, here)


def outside_note(key: str, ref: object, found: Path) -> str:
    return (
        f"`{key}: {ref}` names {found}, outside the folder being converted ({ROOT.get()}); "
        "it is not read, so nothing of it is copied: bring it into the folder, or do by hand "
        "what it did"
    )


def expand_from(doc: CommentedMap, path: Path, notes: Notes, depth: int = 0) -> None:
    """`from: BASE`: the base loop's keys, states and context entries this file lacks."""
    ref = doc.get("from")
    if ref is None:
        return
    line = line_of(doc, "from")
    del doc["from"]
    far = outside(str(ref), path.parent) if isinstance(ref, str) else None
    if far is not None:
        notes.hand(line, outside_note("from", ref, far))
        return
    found = resolve(str(ref), path.parent) if isinstance(ref, str) else None
    if found is None or depth > 4:
        notes.hand(line, f"`from: {ref}`: the base loop was not found; merge its states by hand")
        return
    base = load(found)
    expand_from(base, found, notes, depth + 1)
    overridden = _deep_merge(doc, base)
    notes.carried(
        line,
        f"`from: {ref}`: the base loop is merged in as upstream does (this file's keys win "
        "at every level; a state it names only in part keeps the base's other keys)"
        + (f"; overridden in part: {', '.join(overridden[:8])}" if overridden else ""),
    )


def _deep_merge(child: CommentedMap, base: Any, at: str = "") -> list[str]:
    """Upstream's `from:` merge, in place: mappings merge at every level, any other value
    of the child wins; the base's keys the child lacks come after the child's."""
    merged: list[str] = []
    if not isinstance(base, dict):
        return merged
    for key, value in base.items():
        if key not in child:
            child[key] = copy.deepcopy(value)
        elif isinstance(child[key], dict) and isinstance(value, dict):
            if at == "states":
                merged.append(str(key))
            merged += _deep_merge(child[key], value, str(key) if not at else f"{at}.{key}")
    return merged


def expand_flow(doc: CommentedMap, notes: Notes) -> None:
    """`flow: [a, "b?c:d", ...]` over `state_defs:`: each step's routes written out."""
    flow, defs = doc.get("flow"), doc.get("state_defs")
    if flow is None:
        return
    line = line_of(doc, "flow")
    defs = CommentedMap() if defs is None else defs
    if not isinstance(flow, list) or not flow or not isinstance(defs, dict):
        notes.hand(line, "`flow:` is not a list of steps over a `state_defs:` mapping")
        return
    names = [str(step).split("?")[0] for step in flow]
    states = CommentedMap()
    for i, step in enumerate(flow):
        name, _, branch = str(step).partition("?")
        skeleton = CommentedMap()
        if branch:
            yes, _, no = branch.partition(":")
            skeleton.update(on_yes=yes, on_no=no)
        elif i + 1 < len(names):
            skeleton["next"] = names[i + 1]
        if i + 1 == len(names):
            skeleton["terminal"] = True  # upstream: the flow's last entry ends it
        body = defs.get(name)
        if isinstance(body, CommentedMap):
            for key, value in skeleton.items():  # the definition wins, as upstream merges
                if key not in body:
                    body[key] = value
            states[name] = body
        else:
            states[name] = skeleton
    unused = [str(n) for n in defs if n not in states]
    if unused:
        notes.carried(
            line_of(defs, unused[0]),
            f"`state_defs` not in the `flow:` ({', '.join(unused)}): upstream builds states "
            "from the flow only; left out",
        )
    del doc["flow"]
    doc.pop("state_defs", None)
    doc.pop("states", None)
    doc["states"] = states
    if "initial" not in doc and names:
        doc.insert(1, "initial", names[0])
    notes.carried(line, "`flow:` + `state_defs:`: written out as `states:` with their routes")


def _routes(state: Any) -> bool:
    keys = ("next", "on_yes", "on_no", "on_success", "on_failure", "route", "loop")
    return isinstance(state, dict) and any(k in state for k in keys)


def expand_fragments(doc: CommentedMap, path: Path, notes: Notes) -> None:
    """`import:` libraries and each state's `fragment: NAME`, copied into the state."""
    imports = doc.get("import")
    library: dict[str, Any] = {}
    if imports is not None:
        line = line_of(doc, "import")
        for ref in imports if isinstance(imports, list) else [imports]:
            far = outside(str(ref), path.parent)
            if far is not None:
                notes.hand(line, outside_note("import", ref, far))
                continue
            found = resolve(str(ref), path.parent)
            if found is None:
                notes.hand(line, f"`import: {ref}`: the library was not found")
                continue
            frags = _library(found).get("fragments")
            if isinstance(frags, dict):
                library.update(frags)
        del doc["import"]
    local = doc.get("fragments")
    if isinstance(local, dict) and "states" in doc:
        library.update(local)  # the file's own fragments win over imported ones
        notes.carried(
            line_of(doc, "fragments"),
            "`fragments:` of this file: copied into the states that use them",
        )
        del doc["fragments"]
    states = doc.get("states")
    if not isinstance(states, dict):
        return
    used: dict[str, list[int]] = {}
    for name, state in states.items():
        if not isinstance(state, CommentedMap) or "fragment" not in state:
            continue
        frag_name = str(state["fragment"])
        line = line_of(states, name)
        fragment = library.get(frag_name)
        if not isinstance(fragment, dict):
            notes.hand(line, f"state '{name}': fragment '{frag_name}' is in no imported library")
            continue
        _apply_fragment(state, copy.deepcopy(fragment), name, line, notes)
        used.setdefault(frag_name, []).append(line)
    for frag_name, lines in used.items():
        notes.carried(lines[0], f"fragment '{frag_name}' copied into the states that use it", lines)


def _apply_fragment(
    state: CommentedMap, fragment: dict[str, Any], name: str, line: int, notes: Notes
) -> None:
    params = fragment.pop("parameters", None) or {}
    fragment.pop("description", None)
    bindings = state.get("with") if "loop" not in state and "loop" not in fragment else None
    values: dict[str, str] = {}
    for key, spec in params.items() if isinstance(params, dict) else []:
        if isinstance(bindings, dict) and key in bindings:
            values[key] = str(bindings[key])
        elif isinstance(spec, dict) and "default" in spec:
            values[key] = str(spec["default"])
    if isinstance(bindings, dict):
        for key, value in bindings.items():
            values.setdefault(str(key), str(value))
        del state["with"]
    missing: set[str] = set()

    def bind(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(1) in values:
                return values[m.group(1)]
            missing.add(m.group(1))
            return m.group(0)

        return _PARAM.sub(one, text)

    from little_loops.migrate.text import walk_strings

    walk_strings(fragment, bind)
    pos = list(state).index("fragment")
    del state["fragment"]
    for key, value in fragment.items():
        if key not in state:
            state.insert(pos, key, value)
            pos += 1
        elif isinstance(state[key], dict) and isinstance(value, dict):
            _deep_merge(state[key], value, "fragment")
    for key in sorted(missing):
        notes.hand(line, f"state '{name}': fragment parameter '{key}' has no value: bind it")
