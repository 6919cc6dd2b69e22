"""A loop's graph as inline SVG for `ll report`, laid out on our side by `grandalf` (a
Sugiyama layered layout), with a run's visits, the edges it took and the one that ended it.

The picture is `graph_picture`'s, the same `ll graph` draws as Mermaid or DOT. grandalf is
imported here only, and this module only by the report: `ll --help` and `ll validate` never
load it. Without grandalf the page lists the routes instead of drawing them.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from little_loops.report.graph_picture import Edge, Node, Picture

_FONT = 12
_CHAR = 7.0  # about the width of a character of the page's sans-serif at 12px
_PAD = 14
_MAX_TITLE = 28
_MAX_DETAIL = 40
_MAX_LABEL = 24
_MAX_NODES = 300  # a bigger loop is listed, not drawn (its layout would take seconds)

_FILL = {
    "state": "#f8f9fa",
    "success": "#d3f9d8",
    "failure": "#ffe3e3",
    "start": "#343a40",
    "note": "#fff9db",
    "stop": "#ffc9c9",
}
_STROKE = {
    "state": "#868e96",
    "success": "#2b8a3e",
    "failure": "#c92a2a",
    "start": "#343a40",
    "note": "#e67700",
    "stop": "#c92a2a",
}


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Box:
    """The size grandalf reads (`w`, `h`) and the position it writes (`xy`)."""

    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h
        self.xy: tuple[float, float] = (0.0, 0.0)


def _size(node: Node) -> tuple[float, float]:
    if node.kind == "start":
        return 16.0, 16.0
    lines = [_short(node.title, _MAX_TITLE)]
    if node.detail:
        lines.append(_short(node.detail, _MAX_DETAIL))
    if node.visits:
        lines[0] += f"  x{node.visits}"
    width = max(len(line) for line in lines) * _CHAR + 2 * _PAD
    return max(width, 60.0), 18.0 * len(lines) + 12


Box = tuple[float, float, float, float]  # centre x, centre y, width, height
Points = list[tuple[float, float]]


def layout(pic: Picture) -> tuple[dict[str, Box], dict[int, Points]] | None:
    """Node boxes (centre x, centre y, w, h) and edge polylines by edge index; None when
    grandalf is missing or the loop is too big to draw."""
    if len(pic.nodes) > _MAX_NODES:
        return None
    try:
        from grandalf.graphs import Edge as GEdge
        from grandalf.graphs import Graph, Vertex
        from grandalf.layouts import SugiyamaLayout
        from grandalf.routing import EdgeViewer, route_with_lines
    except ImportError:
        return None
    vertices: dict[str, Any] = {}
    for node in pic.nodes:
        vertex = Vertex(node.id)
        vertex.view = _Box(*_size(node))
        vertices[node.id] = vertex
    gedges: dict[int, Any] = {}
    for index, edge in enumerate(pic.edges):
        if edge.src == edge.dst or edge.src not in vertices or edge.dst not in vertices:
            continue
        gedge = GEdge(vertices[edge.src], vertices[edge.dst])
        gedge.view = EdgeViewer()
        gedges[index] = gedge
    graph = Graph(list(vertices.values()), list(gedges.values()))
    boxes: dict[str, tuple[float, float, float, float]] = {}
    paths: dict[int, list[tuple[float, float]]] = {}
    offset = 0.0
    for component in graph.C:
        sugiyama = SugiyamaLayout(component)
        sugiyama.xspace, sugiyama.yspace = 30, 46
        sugiyama.route_edge = route_with_lines
        sugiyama.init_all()
        sugiyama.draw(3)
        xs = [v.view.xy[0] - v.view.w / 2 for v in component.sV]
        left = min(xs)
        right = max(v.view.xy[0] + v.view.w / 2 for v in component.sV)
        shift = offset - left
        for vertex in component.sV:
            x, y = vertex.view.xy
            boxes[vertex.data] = (x + shift, y, vertex.view.w, vertex.view.h)
        for index, gedge in gedges.items():
            if gedge in component.sE:
                points = getattr(gedge.view, "_pts", None) or []
                paths[index] = [(px + shift, py) for px, py in points]
        offset += right - left + 40
    return boxes, paths


def svg(pic: Picture, *, last: tuple[str, str] | None = None) -> str:
    """The picture as an `<svg>` element; `last` is the (from id, to id) of the edge that
    ended the run, drawn apart. A `<ul>` of routes when it cannot be laid out."""
    placed = layout(pic)
    if placed is None:
        return _listing(pic)
    boxes, paths = placed
    if not boxes:
        return ""
    left = min(x - w / 2 for x, _, w, _ in boxes.values()) - 40
    top = min(y - h / 2 for _, y, _, h in boxes.values()) - 20
    right = max(x + w / 2 for x, _, w, _ in boxes.values()) + 40
    bottom = max(y + h / 2 for _, y, _, h in boxes.values()) + 20
    width, height = right - left, bottom - top
    out = [
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" viewBox="{left:.0f} {top:.0f} '
        f'{width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" role="img">',
        "<defs>",
        *(
            f'<marker id="arrow-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            f'fill="{color}"/></marker>'
            for name, color in (
                ("plain", "#adb5bd"),
                ("taken", "#1c7ed6"),
                ("error", "#e03131"),
                ("last", "#c92a2a"),
            )
        ),
        "</defs>",
    ]
    names = {node.id: node for node in pic.nodes}
    for index, edge in enumerate(pic.edges):
        out.append(_edge(edge, paths.get(index), boxes, names, last))
    for node in pic.nodes:
        if node.id in boxes:
            out.append(_node(node, boxes[node.id]))
    out.append("</svg>")
    return "\n".join(part for part in out if part)


def _edge(
    edge: Edge,
    points: list[tuple[float, float]] | None,
    boxes: Mapping[str, tuple[float, float, float, float]],
    names: Mapping[str, Node],
    last: tuple[str, str] | None,
) -> str:
    is_last = last is not None and (edge.src, edge.dst) == last
    kind = "error" if edge.kind == "error" else "plain"
    if is_last or edge.taken:
        kind = "last" if is_last else "taken"
    classes = f"edge {kind}" + (" dashed" if edge.kind in ("error", "note", "uncertain") else "")
    label = escape(_short(edge.label, _MAX_LABEL))
    title = escape(f"{names[edge.src].title} → {names[edge.dst].title}: {edge.label or 'next'}")
    if edge.src == edge.dst:
        box = boxes.get(edge.src)
        if box is None:
            return ""
        x, y, w, _ = box
        sx = x + w / 2
        d = (
            f"M{sx:.1f},{y - 6:.1f} C{sx + 40:.1f},{y - 30:.1f} "
            f"{sx + 40:.1f},{y + 30:.1f} {sx:.1f},{y + 6:.1f}"
        )
        lx, ly = sx + 34, y
    else:
        if not points or len(points) < 2:
            return ""
        d = "M" + " L".join(f"{px:.1f},{py:.1f}" for px, py in points)
        mid = points[len(points) // 2 - 1 : len(points) // 2 + 1]
        lx = sum(p[0] for p in mid) / len(mid)
        ly = sum(p[1] for p in mid) / len(mid)
    text = f'<text class="elabel" x="{lx + 4:.1f}" y="{ly:.1f}">{label}</text>' if label else ""
    return (
        f'<g class="{classes}" data-from="{escape(edge.src)}" data-to="{escape(edge.dst)}">'
        f"<title>{title}</title>"
        f'<path d="{d}" fill="none" marker-end="url(#arrow-{kind})"/>{text}</g>'
    )


def _node(node: Node, box: tuple[float, float, float, float]) -> str:
    x, y, w, h = box
    fill, stroke = _FILL[node.kind], _STROKE[node.kind]
    visited = bool(node.visits)
    classes = (
        f"node {node.kind}"
        + (" visited" if visited else "")
        + (" unvisited" if node.visits == 0 else "")
    )
    title = escape(node.title + (f" — {node.detail}" if node.detail else ""))
    if node.kind == "start":
        return (
            f'<g class="{classes}"><title>start</title>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="7" fill="{fill}"/></g>'
        )
    head = escape(_short(node.title, _MAX_TITLE))
    lines = [f'<tspan class="ntitle">{head}</tspan>']
    if node.visits:
        lines[0] += f'<tspan class="visits"> &#215;{node.visits}</tspan>'
    rows = [lines[0]]
    if node.detail:
        rows.append(f'<tspan class="ndetail">{escape(_short(node.detail, _MAX_DETAIL))}</tspan>')
    top = y - h / 2
    text = "".join(
        f'<text x="{x:.1f}" y="{top + 20 + 18 * i:.1f}" text-anchor="middle">{row}</text>'
        for i, row in enumerate(rows)
    )
    width = 2.5 if visited else 1
    return (
        f'<g class="{classes}" data-state="{escape(node.title)}"><title>{title}</title>'
        f'<rect x="{x - w / 2:.1f}" y="{top:.1f}" width="{w:.1f}" height="{h:.1f}" rx="8" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>{text}</g>'
    )


def _listing(pic: Picture) -> str:
    names = {node.id: node.title for node in pic.nodes}
    items = "".join(
        f"<li{' class=taken' if edge.taken else ''}>{escape(names[edge.src])} → "
        f"{escape(names[edge.dst])}{': ' + escape(edge.label) if edge.label else ''}</li>"
        for edge in pic.edges
        if edge.src in names and edge.dst in names
    )
    return (
        '<p class="note">The drawing needs the grandalf package (pip install grandalf); '
        f"the routes:</p><ul class=routes>{items}</ul>"
    )
