"""Draw a loop as a Mermaid flowchart or a Graphviz DOT graph, optionally with a run's path.

Both formats are drawn from one intermediate picture (`graph_picture.picture`), so they
always agree:

- every state is a box labelled with its name (and its description, shortened); node ids are
  `s0`, `s1`, ... in file order, because state names may hold `-` and `.`;
- a small `start` node points at the initial state;
- terminal states are rounded and coloured: green for `outcome: success`, red for `failure`;
- routes are edges labelled with their verdicts; verdicts that share a source, a target and a
  kind share one edge (`success / partial`); a `next` edge is the success edge and reads
  `success (next)`, the default route `_`;
- `_uncertain` routes are dashed orange, `error` / `timeout` / `_error` routes dashed red;
- the loop-level `on_error` is drawn once, from a note node with a dashed red edge to its
  target, rather than from every state that relies on it (for `error`, `timeout` and any
  verdict but success of a `next` state, SPEC section 6);
- a verdict that nothing routes, so that the run stops at the state, is a dashed red edge to a
  `stops (exit 1)` or `stops (exit 3)` node;
- `on_max_iterations` is drawn the same way, from a note node naming the limit;
- with `maintain: true`, each terminal has a dashed `maintain` edge back to where it restarts.

With a run overlay (`visits`, `taken`; see `run_overlay`) visited states show their visit count,
states never visited are dimmed, and taken edges are thick and blue. A taken edge that the
static picture does not draw (a state falling back on the loop's `on_error`) is added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from little_loops.errors import RunError
from little_loops.model.loop import (
    Loop,
    State,
)
from little_loops.record.events import journaled_events
from little_loops.record.history import MAX_ITERATIONS as MAX_ITERATIONS
from little_loops.record.history import STOPPED as STOPPED
from little_loops.record.history import History
from little_loops.report.graph_picture import (
    Edge,
    EdgeKind,
    NodeKind,
    picture,
)

_MERMAID_ENTITIES = {
    "#": "#35;",
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    "`": "#96;",
    "|": "#124;",
}

_MERMAID_CLASSES = {
    "start": "fill:#333,stroke:#333,color:#fff",
    "success": "fill:#d8f3dc,stroke:#2d6a4f,stroke-width:2px,color:#1b4332",
    "failure": "fill:#ffe3e3,stroke:#c92a2a,stroke-width:2px,color:#7d1a1a",
    "note": "fill:#fff9db,stroke:#adb5bd,stroke-dasharray:4 3,color:#495057",
    "stop": "fill:#fff,stroke:#c92a2a,stroke-dasharray:4 3,color:#7d1a1a",
    "visited": "stroke:#1c7ed6,stroke-width:3px",
    "unvisited": "opacity:0.45",
}

_MERMAID_LINKS: dict[EdgeKind, str] = {
    "normal": "",
    "uncertain": "stroke:#e67700,stroke-dasharray:6 4",
    "error": "stroke:#c92a2a,stroke-dasharray:6 4",
    "note": "stroke:#868e96,stroke-dasharray:3 3",
}


def _mermaid_link_style(edge: Edge) -> str:
    """One linkStyle per edge: a later linkStyle for the same link replaces, not merges."""
    if not edge.taken:
        return _MERMAID_LINKS[edge.kind]
    dashes = ",stroke-dasharray:6 4" if edge.kind != "normal" else ""
    return f"stroke:#1c7ed6,stroke-width:3px{dashes}"


def _mermaid_text(text: str) -> str:
    """Text safe inside a quoted Mermaid label: entity codes for the characters Mermaid parses."""
    text = " ".join(text.split())
    return "".join(_MERMAID_ENTITIES.get(ch, ch) for ch in text)


def _visits_line(count: int) -> str:
    return f"{count} visit{'s' if count != 1 else ''}"


def mermaid(
    loop: Loop,
    *,
    visits: Mapping[str, int] | None = None,
    taken: set[tuple[str, str]] | None = None,
    children: Mapping[str, Loop] | None = None,
) -> str:
    """A `flowchart TD` that GitHub renders as is; `visits`/`taken` overlay a run's path;
    `children` (a `loop:` state's name -> its child loop) are drawn as subgraphs."""
    pic = picture(loop, visits, taken)
    lines = ["flowchart TD"]
    for node in pic.nodes:
        parts = [_mermaid_text(node.title)]
        if node.detail:
            parts.append(_mermaid_text(node.detail))
        if node.visits:
            parts.append(_visits_line(node.visits))
        label = "<br/>".join(parts)
        if node.kind == "start":
            lines.append(f'    {node.id}(("{label}"))')
        elif node.kind in ("success", "failure", "stop"):
            lines.append(f'    {node.id}(["{label}"])')
        elif node.kind == "note":
            lines.append(f'    {node.id}>"{label}"]')
        else:
            lines.append(f'    {node.id}["{label}"]')
    styled: dict[str, list[int]] = {}
    for index, edge in enumerate(pic.edges):
        if edge.taken:
            arrow = "==>"
        elif edge.kind == "normal":
            arrow = "-->"
        else:
            arrow = "-.->"
        label = f'|"{_mermaid_text(edge.label)}"|' if edge.label else ""
        lines.append(f"    {edge.src} {arrow}{label} {edge.dst}")
        style = _mermaid_link_style(edge)
        if style:
            styled.setdefault(style, []).append(index)
    for name, style in _MERMAID_CLASSES.items():
        lines.append(f"    classDef {name} {style}")
    members: dict[str, list[str]] = {}
    for node in pic.nodes:
        if node.kind != "state":
            members.setdefault(node.kind, []).append(node.id)
        if node.visits is not None and node.kind not in ("start", "note"):
            members.setdefault("visited" if node.visits else "unvisited", []).append(node.id)
    for name in _MERMAID_CLASSES:
        if members.get(name):
            lines.append(f"    class {','.join(members[name])} {name}")
    for style, indexes in styled.items():
        lines.append(f"    linkStyle {','.join(map(str, indexes))} {style}")
    ids = {name: f"s{i}" for i, name in enumerate(loop.states)}
    for name, child in (children or {}).items():
        if name in ids:
            lines.extend(_mermaid_subgraph(ids[name], loop.states[name], child))
    return "\n".join(lines) + "\n"


def _mermaid_subgraph(caller: str, state: State, child: Loop) -> list[str]:
    """A `loop:` state's child as a subgraph beside it (its own states and routes), after
    every styled link so the link numbers above stay right."""
    pic = picture(child, None, None)
    box = f"{caller}_child"
    title = _mermaid_text(f"{state.name}: loop {state.loop}")
    lines = [f'    subgraph {box} ["{title}"]']
    for node in pic.nodes:
        label = _mermaid_text(node.title)
        shape = f'(["{label}"])' if node.kind in ("success", "failure", "stop") else f'["{label}"]'
        if node.kind == "start":
            shape = f'(("{label}"))'
        elif node.kind == "note":
            shape = f'>"{label}"]'
        lines.append(f"        {box}_{node.id}{shape}")
    for edge in pic.edges:
        arrow = "-->" if edge.kind == "normal" else "-.->"
        label = f'|"{_mermaid_text(edge.label)}"|' if edge.label else ""
        lines.append(f"        {box}_{edge.src} {arrow}{label} {box}_{edge.dst}")
    lines.append("    end")
    lines.append(f"    {caller} -.- {box}")
    return lines


def children_of(loop: Loop) -> dict[str, Loop]:
    """The child loops of `loop`'s `loop:` states that load; one that does not is left out
    (`ll validate` says why)."""
    from little_loops.errors import LoopError
    from little_loops.load.loader import load

    found: dict[str, Loop] = {}
    for name, state in loop.states.items():
        if state.loop is not None:
            try:
                found[name] = load(loop.dir / state.loop)
            except LoopError:
                continue
    return found


# -- DOT ------------------------------------------------------------------------------------


def _dot_quote(text: str) -> str:
    """A DOT double-quoted string; newlines become DOT's centred line break."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{text}"'


_DOT_NODES: dict[NodeKind, str] = {
    "state": 'shape=box, style="rounded"',
    "success": 'shape=box, style="rounded,filled,bold", fillcolor="#d8f3dc", color="#2d6a4f"',
    "failure": (
        'shape=box, style="rounded,filled,bold", fillcolor="#ffe3e3", color="#c92a2a", '
        "peripheries=2"
    ),
    "start": 'shape=circle, style=filled, fillcolor="#333333", fontcolor=white, fontsize=9',
    "note": 'shape=note, style="filled,dashed", fillcolor="#fff9db", color="#868e96"',
    "stop": 'shape=box, style="rounded,dashed", color="#c92a2a", fontcolor="#7d1a1a"',
}

_DOT_EDGES: dict[EdgeKind, str] = {
    "normal": "",
    "uncertain": 'style=dashed, color="#e67700", fontcolor="#e67700"',
    "error": 'style=dashed, color="#c92a2a", fontcolor="#c92a2a"',
    "note": 'style=dashed, color="#868e96", fontcolor="#868e96"',
}


def dot(
    loop: Loop,
    *,
    visits: Mapping[str, int] | None = None,
    taken: set[tuple[str, str]] | None = None,
    children: Mapping[str, Loop] | None = None,
) -> str:
    """A Graphviz `digraph` (render with `dot -Tsvg`); `visits`/`taken` overlay a run's path;
    `children` (a `loop:` state's name -> its child loop) are drawn as clusters."""
    pic = picture(loop, visits, taken)
    lines = [
        f"digraph {_dot_quote(pic.name)} {{",
        "    rankdir=TB;",
        '    node [fontname="Helvetica", fontsize=11];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    for node in pic.nodes:
        parts = [node.title]
        if node.detail:
            parts.append(node.detail)
        if node.visits:
            parts.append(_visits_line(node.visits))
        attrs = [f"label={_dot_quote(chr(10).join(parts))}", _DOT_NODES[node.kind]]
        if node.visits is not None and node.kind not in ("start", "note"):
            attrs.append("penwidth=3" if node.visits else 'fontcolor="#adb5bd"')
        lines.append(f"    {node.id} [{', '.join(attrs)}];")
    for edge in pic.edges:
        attrs = []
        if edge.label:
            attrs.append(f"label={_dot_quote(edge.label)}")
        if edge.taken:
            attrs.append('penwidth=3, color="#1c7ed6", fontcolor="#1c7ed6"')
            if edge.kind != "normal":
                attrs.append("style=dashed")
        elif _DOT_EDGES[edge.kind]:
            attrs.append(_DOT_EDGES[edge.kind])
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"    {edge.src} -> {edge.dst}{suffix};")
    ids = {name: f"s{i}" for i, name in enumerate(loop.states)}
    for name, child in (children or {}).items():
        if name in ids:
            lines.extend(_dot_cluster(ids[name], loop.states[name], child))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_cluster(caller: str, state: State, child: Loop) -> list[str]:
    """A `loop:` state's child as a cluster (Graphviz draws a `cluster_` subgraph boxed),
    tied to its caller by a dotted line."""
    pic = picture(child, None, None)
    box = f"{caller}_child"
    lines = [
        f"    subgraph cluster_{box} {{",
        f"        label={_dot_quote(f'{state.name}: loop {state.loop}')};",
        '        style="rounded,dashed"; color="#868e96";',
    ]
    for node in pic.nodes:
        shape = f"label={_dot_quote(node.title)}, {_DOT_NODES[node.kind]}"
        lines.append(f"        {box}_{node.id} [{shape}];")
    for edge in pic.edges:
        attrs = [f"label={_dot_quote(edge.label)}"] if edge.label else []
        if _DOT_EDGES[edge.kind]:
            attrs.append(_DOT_EDGES[edge.kind])
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"        {box}_{edge.src} -> {box}_{edge.dst}{suffix};")
    lines.append("    }")
    first = f"{box}_{pic.nodes[0].id}" if pic.nodes else box
    lines.append(f'    {caller} -> {first} [style=dotted, arrowhead=none, color="#868e96"];')
    return lines


# -- run overlay ----------------------------------------------------------------------------


def run_overlay(run_dir: Path) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Visit counts per state and the (from, to) pairs routed, from a run's events.jsonl
    (see `History.overlay`)."""
    return _history(run_dir).overlay()


def overlay_from_events(
    events: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """`run_overlay` for events already in memory."""
    return History.from_events(events).overlay()


def _history(run_dir: Path) -> History:
    path = run_dir / "events.jsonl"
    if not path.is_file() and journaled_events(path) is None:  # an action branch's: journaled
        raise RunError(f"{path}: missing; the run has no event log to draw")
    return History.from_file(path)


def draw(loop: Loop, fmt: str = "mermaid", *, run_dir: Path | None = None) -> str:
    """`ll graph`: the loop in `fmt` ("mermaid" or "dot"), with `run_dir`'s path when given.

    A run of another loop (by name) is refused, since its states would not match the file's.
    """
    visits: dict[str, int] | None = None
    taken: set[tuple[str, str]] | None = None
    if run_dir is not None:
        history = _history(run_dir)
        for start in history.segments:
            if start.loop and start.loop != loop.name:
                raise RunError(
                    f"run '{run_dir.name}' is a run of loop '{start.loop}', not of '{loop.name}' "
                    f"({loop.path}); pick a run of this loop from 'll history {loop.name}'"
                )
        visits, taken = history.overlay()
    if fmt == "dot":
        return dot(loop, visits=visits, taken=taken, children=children_of(loop))
    return mermaid(loop, visits=visits, taken=taken, children=children_of(loop))
