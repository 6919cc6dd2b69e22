"""The one picture both drawings of a loop are made from: nodes, edges and their kinds.

`graph` turns a `Picture` into Mermaid or DOT; building it here once is what keeps the two
formats in agreement (the rules are listed at the top of `graph`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from little_loops.load.checks import routed_verdicts
from little_loops.model.loop import (
    ERROR_VERDICTS,
    Loop,
    State,
)
from little_loops.model.router import (
    STOPS,
    fallbacks,
)
from little_loops.record.history import (
    MAX_ITERATIONS,
    STOPPED,
)

EdgeKind = Literal["normal", "uncertain", "error", "note"]
NodeKind = Literal["state", "success", "failure", "start", "note", "stop"]

_START_ID = "ll_start"
_ON_ERROR_ID = "ll_on_error"
_MAX_ID = "ll_max_iterations"
_STOP_IDS = {STOPS["failure"]: "ll_stop_1", STOPS["error"]: "ll_stop_3"}
_STOP_TAKEN = {STOPS["failure"]: STOPPED[1], STOPS["error"]: STOPPED[3]}
_DESCRIPTION_CHARS = 48


@dataclass
class Node:
    id: str
    title: str
    kind: NodeKind
    detail: str | None = None
    visits: int | None = None  # None: no overlay


@dataclass
class Edge:
    src: str
    dst: str
    kind: EdgeKind
    labels: list[str] = field(default_factory=list)
    taken: bool = False

    @property
    def label(self) -> str:
        return " / ".join(self.labels)


@dataclass
class Picture:
    name: str
    nodes: list[Node]
    edges: list[Edge]


def route_kind(verdict: str) -> EdgeKind:
    if verdict == "_error" or verdict in ERROR_VERDICTS:
        return "error"
    if verdict.endswith("_uncertain"):
        return "uncertain"
    return "normal"


def _fork_detail(state: State) -> str:
    """`parallel: lint ‖ types · join all` or `for_each: deploy.yaml · join all, 2 at a time`."""
    join = state.join
    need = (
        "all"
        if join is None
        else f"{join.verdict}: {join.need}"
        if join.verdict
        else str(join.need)
    )
    if state.parallel:
        what = "parallel: " + " ‖ ".join(state.parallel)
    else:
        what = f"for_each: {state.loop or state.action or ''}"
    pace = f", {state.max_concurrency} at a time" if state.max_concurrency else ""
    fast = ", fail_fast" if state.fail_fast else ""
    return f"{what} · join {need}{pace}{fast}"


def picture(
    loop: Loop,
    visits: Mapping[str, int] | None,
    taken: set[tuple[str, str]] | None,
) -> Picture:
    ids = {name: f"s{i}" for i, name in enumerate(loop.states)}
    taken = taken or set()
    nodes: list[Node] = [Node(_START_ID, "start", "start")]
    for name, state in loop.states.items():
        node_kind: NodeKind = "state"
        if state.terminal:
            node_kind = "failure" if state.outcome == "failure" else "success"
        detail = state.description
        if state.is_fork:  # a fork: its branches (or its items) and its join, under its name
            detail = _fork_detail(state) + (f" · {detail}" if detail else "")
        if detail is not None:
            detail = " ".join(detail.split())
            room = 2 * _DESCRIPTION_CHARS if state.is_fork else _DESCRIPTION_CHARS
            if len(detail) > room:
                detail = detail[: room - 1] + "…"
        count = None if visits is None else int(visits.get(name, 0))
        nodes.append(Node(ids[name], name, node_kind, detail or None, count))

    edges: list[Edge] = []
    by_key: dict[tuple[str, str, EdgeKind], Edge] = {}

    def add(src: str, dst: str, kind: EdgeKind, label: str, *, was_taken: bool) -> None:
        key = (src, dst, kind)
        edge = by_key.get(key)
        if edge is None:
            edge = by_key[key] = Edge(src, dst, kind)
            edges.append(edge)
        if label and label not in edge.labels:
            edge.labels.append(label)
        edge.taken = edge.taken or was_taken

    def target(state: State, name: str) -> str:
        return state.name if name == "$current" else name

    if loop.initial in ids:
        add(_START_ID, ids[loop.initial], "normal", "", was_taken=bool(visits))
    drawn: set[tuple[str, str]] = set()
    stop_nodes: dict[str, Node] = {}
    for state in loop.states.values():
        if state.terminal:
            if loop.maintain:
                dst = state.on_maintain or loop.initial
                if dst in ids:
                    hit = (state.name, dst) in taken
                    add(ids[state.name], ids[dst], "note", "maintain", was_taken=hit)
                    drawn.add((state.name, dst))
            continue
        pairs = [(verdict, route.target) for verdict, route in state.routes.items()]
        if state.next is not None:
            pairs.append(("success (next)", state.next.target))
        for verdict, raw in pairs:
            dst = target(state, raw)
            if dst not in ids:
                continue
            hit = (state.name, dst) in taken
            add(ids[state.name], ids[dst], route_kind(verdict), verdict, was_taken=hit)
            drawn.add((state.name, dst))
        possible = routed_verdicts(state)
        for where, verdicts in fallbacks(loop, state, possible).items():
            stop_id = _STOP_IDS.get(where)
            if stop_id is None:
                continue  # the loop's on_error: drawn once, from its note
            if stop_id not in stop_nodes:
                stop_nodes[stop_id] = Node(stop_id, where, "stop")
            hit = (state.name, _STOP_TAKEN[where]) in taken
            for verdict in verdicts:
                add(ids[state.name], stop_id, "error", verdict, was_taken=hit)

    nodes.extend(stop_nodes[i] for i in sorted(stop_nodes))
    if loop.on_error is not None and loop.on_error in ids:
        detail = "unrouted error / timeout / failed next"
        nodes.append(Node(_ON_ERROR_ID, "on_error", "note", detail))
        add(_ON_ERROR_ID, ids[loop.on_error], "error", "error / timeout", was_taken=False)
    if loop.on_max_iterations is not None and loop.on_max_iterations in ids:
        limit = f"after {loop.max_iterations} steps"
        nodes.append(Node(_MAX_ID, "max_iterations", "note", limit))
        hit = (MAX_ITERATIONS, loop.on_max_iterations) in taken
        add(_MAX_ID, ids[loop.on_max_iterations], "note", "limit", was_taken=hit)

    # A taken step the static picture has no edge for: draw it, so the path stays connected.
    for src, dst in sorted(taken):
        if (src, dst) in drawn or src not in ids or dst not in ids:
            continue
        label = "on_error" if dst == loop.on_error else ""
        edge_kind: EdgeKind = "error" if dst == loop.on_error else "normal"
        add(ids[src], ids[dst], edge_kind, label, was_taken=True)
    return Picture(loop.name, nodes, edges)


# -- Mermaid --------------------------------------------------------------------------------
