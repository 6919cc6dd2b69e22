"""`ll report`: one self-contained HTML page of a run, its children and its fork branches.

Inline CSS, script and SVG; nothing is fetched, so it opens from a CI artifact or a mail
attachment. The server side (here) lays out the graphs and writes the bounded tables; the
script (`data/report.js`) draws the timeline and the step list as they scroll into view, so a
run of 20,000 steps or a fork of 1,000 branches stays quick in a browser.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from html import escape
from pathlib import Path
from typing import Any

from little_loops.errors import EXIT_USAGE, LoopError
from little_loops.model.loop import Loop
from little_loops.record.events import journal_entry
from little_loops.record.history import STOPPED, History, is_num
from little_loops.record.store import RUNS, RunDir, find_run, write_named_file
from little_loops.report.page_data import RunRead, collect, read_tree, verdict_class, walk

DEFAULT_NAME = "report.html"
MAX_GRAPHS = 6  # the root loop and the first child loop files


def _asset(name: str) -> str:
    return (Path(__file__).parent.parent / "data" / name).read_text(encoding="utf-8")


def resolve_run(base: Path, target: str | None) -> Path:
    """A run's directory from what the user gave: a run id (or a unique prefix), a child's id
    (`RUN/0002-deploy/3`), a run directory's path, or nothing (the latest run here)."""
    if target is not None:
        path = Path(target)
        if (path / "state.json").is_file() or (path / "events.jsonl").is_file():
            return path
        if not path.is_symlink() and journal_entry(path) is not None:
            return path  # a child or a branch with no directory of its own
        if "/" in target and not path.exists():
            head, _, rest = target.partition("/")
            top = find_run(base, head).root
            found = _child_dir(top, rest.split("/"))
            if found is not None:
                return found
            raise LoopError(
                f"no child run '{target}': run {top.name} has no such child (its children are "
                f"under {top / 'sub'})",
                exit_code=EXIT_USAGE,
            )
    return find_run(base, target).root


def _child_dir(top: Path, parts: list[str]) -> Path | None:
    """`RUN/0002-eu` names `sub/0002-eu/`, a fork's branch `RUN/0002-deploy/ap-south` names
    `sub/0002-deploy/ap-south/`, and deeper children go on the same way (`sub/` at each run)."""
    here = top
    for part in parts:
        if part in ("", ".", "..") or "\x00" in part:
            return None
        if (here / "sub" / part).is_dir() or journal_entry(here / "sub" / part) is not None:
            here = here / "sub" / part  # a directory, or a `loop:` child's journal entry
        elif (here / part).is_dir() and not (here / "events.jsonl").is_file():
            here = here / part  # inside a fork's directory: a branch
        elif journal_entry(here / part) is not None:
            here = here / part  # an action branch: an entry of its fork's journal
        else:
            return None
    told = (here / "events.jsonl").is_file() or journal_entry(here) is not None
    return here if told else None


def _load(file: str, base: Path) -> Loop | None:
    from little_loops.load.loader import load

    if not file:
        return None
    path = Path(file)
    if not path.is_absolute():
        path = base / path
    try:
        return load(path)
    except (LoopError, OSError):
        return None


def _overlay(runs: Iterable[RunRead]) -> tuple[dict[str, int], set[tuple[str, str]]]:
    visits: dict[str, int] = {}
    taken: set[tuple[str, str]] = set()
    for run in runs:
        counts, pairs = run.history.overlay()
        for state, count in counts.items():
            visits[state] = visits.get(state, 0) + count
        taken |= pairs
    return visits, taken


def _last_edge(history: History) -> tuple[str, str] | None:
    """The (from, to) state names of the route that ended the run: into the terminal it
    reached, or from the state whose failed verdict stopped it (to the stop)."""
    steps = history.steps
    end = history.complete
    if steps and steps[-1].stopped_run and end is not None and end.exit_code in STOPPED:
        return steps[-1].state, STOPPED[end.exit_code]
    for step in reversed(steps):
        if step.routed_to is not None:
            return step.state, step.routed_to
    return None


def _graph(loop: Loop | None, name: str, runs: list[RunRead], with_last: bool) -> str:
    from little_loops.report.graph_picture import Edge, Node, Picture, picture
    from little_loops.report.page_graph import svg

    visits, taken = _overlay(runs)
    last = _last_edge(runs[0].history) if with_last else None
    if loop is not None:
        pic = picture(loop, visits, taken)
        ids = {
            node.title: node.id
            for node in pic.nodes
            if node.kind in ("state", "success", "failure")
        }
        last_ids = None
        if last is not None and last[0] in ids:
            if last[1] in ids:
                last_ids = (ids[last[0]], ids[last[1]])
            else:  # the stop: the taken edge from that state to a stop node
                for edge in pic.edges:
                    if edge.src == ids[last[0]] and edge.dst.startswith("ll_stop") and edge.taken:
                        last_ids = (edge.src, edge.dst)
        return svg(pic, last=last_ids)
    # The loop file is gone or no longer loads: the states and routes the run itself took.
    names = sorted({s for pair in taken for s in pair if not s.startswith("$")} | set(visits))
    nodes = [Node(f"s{i}", n, "state", None, visits.get(n, 0)) for i, n in enumerate(names)]
    ids = {n.title: n.id for n in nodes}
    edges = [
        Edge(ids[a], ids[b], "normal", [], True) for a, b in sorted(taken) if a in ids and b in ids
    ]
    note = '<p class="note">The loop file did not load; only the path taken is drawn.</p>'
    last_ids = (ids[last[0]], ids[last[1]]) if last and last[0] in ids and last[1] in ids else None
    return note + svg(Picture(name, nodes, edges), last=last_ids)


def _graphs(top: RunRead, base: Path, root_loop: Loop | None) -> str:
    runs = walk(top)
    groups: dict[str, list[RunRead]] = {}
    for run in runs[1:]:
        if run.kind == "branch" and not run.file:
            continue  # a fork's action branch: a one-step run of the caller's state
        key = run.history.start.file if run.history.start else run.file
        if key:
            groups.setdefault(key, []).append(run)
    parts = []
    title = top.history.loop or top.root.name
    loop = root_loop or _load(_state_file(top.root), base)
    parts.append(_graph_box(title, _graph(loop, title, [top], True), "the run"))
    for file, members in list(groups.items())[: MAX_GRAPHS - 1]:
        name = members[0].history.loop or Path(file).stem
        what = f"{len(members)} run{'s' if len(members) != 1 else ''}, visits summed"
        parts.append(_graph_box(name, _graph(_load(file, base), name, members, False), what))
    if len(groups) > MAX_GRAPHS - 1:
        parts.append(
            f'<p class="note">{len(groups) - MAX_GRAPHS + 1} more loop files not drawn.</p>'
        )
    return "\n".join(parts)


def _graph_box(name: str, body: str, what: str) -> str:
    return (
        f'<div class="graphbox"><h3>{escape(name)} <span class="note">({escape(what)})</span>'
        f"</h3>{body}</div>"
    )


def _state_file(root: Path) -> str:
    try:
        value = RunDir(root).read_state().get("loop_file")
    except LoopError:
        return ""
    return value if isinstance(value, str) else ""


def _money(value: float) -> str:
    return f"${value:.4f}" if value else "-"


def _costs(data: dict[str, Any]) -> str:
    """Steps, time and cost per state of each loop, summed over the runs of the tree."""
    totals: dict[tuple[str, str], list[float]] = {}
    for run in data["runs"]:
        for state, (n, sec, cost, failed) in run["per_state"].items():
            row = totals.setdefault((run["loop"], state), [0, 0.0, 0.0, 0])
            row[0] += n
            row[1] += sec
            row[2] += cost
            row[3] += failed
    rows = sorted(totals.items(), key=lambda item: (-item[1][1], item[0]))
    body = "".join(
        f"<tr><td>{escape(loop)}</td><td>{escape(state)}</td><td class=n>{int(n)}</td>"
        f"<td class=n>{int(failed)}</td><td class=n>{sec:.2f}s</td>"
        f"<td class=n>{_money(cost)}</td></tr>"
        for (loop, state), (n, sec, cost, failed) in rows[:400]
    )
    more = (
        f'<p class="note">{len(rows) - 400} more states not listed.</p>' if len(rows) > 400 else ""
    )
    return (
        "<table class=grid><tr><th>loop</th><th>state</th><th>steps</th><th>failed</th>"
        f"<th>time</th><th>cost</th></tr>{body}</table>{more}"
    )


def _questions(data: dict[str, Any]) -> str:
    rows = []
    for run in data["runs"]:
        for q in run.get("questions") or ():
            answered = q.get("answer")
            rows.append(
                f"<tr><td>{escape(str(q.get('id')))}</td><td>{escape(str(q.get('prompt')))}</td>"
                f"<td>{escape(' | '.join(q.get('choices') or []) or 'text')}</td>"
                f"<td>{escape(str(q.get('asked_at') or ''))}</td>"
                f"<td>{escape(str(answered)) if answered is not None else '<b>waiting</b>'}"
                f"{escape(' — ' + q['note']) if q.get('note') else ''}</td>"
                f"<td>{escape(str(q.get('by') or ''))}</td>"
                f"<td>{escape(str(q.get('via') or ''))}</td>"
                f"<td>{escape(str(q.get('answered_at') or ''))}</td></tr>"
            )
            if len(rows) >= 500:
                break
    if not rows:
        return '<p class="note">No questions were asked.</p>'
    return (
        "<table class=grid><tr><th>question</th><th>prompt</th><th>choices</th><th>asked</th>"
        "<th>answer</th><th>by</th><th>via</th><th>answered</th></tr>" + "".join(rows) + "</table>"
    )


def _captured(data: dict[str, Any]) -> str:
    captured = data.get("captured") or {}
    if not captured:
        return '<p class="note">Nothing captured.</p>'
    rows = "".join(
        f"<tr><th>{escape(name)}</th><td><pre>"
        f"{escape(json.dumps(value, indent=1, ensure_ascii=False, default=str))}</pre></td></tr>"
        for name, value in captured.items()
    )
    return f"<table class=kv>{rows}</table>"


def _header(data: dict[str, Any]) -> str:
    top = data["runs"][0]
    outcome = top.get("outcome") or "running"
    cls = {"success": "ok", "interrupted": "warn", "suspended": "warn", "running": "warn"}.get(
        outcome, "fail"
    )
    steps = sum(run["steps"] for run in data["runs"])
    cost = top["cost"] if is_num(top["cost"]) else 0.0
    duration = (top["end"] - top["start"]) / 1000
    failing = sum(1 for run in data["runs"][1:] if verdict_class(run.get("outcome")) == "fail")
    meta = [
        f"run {escape(top['id'])}",
        f"file {escape(top['file'])}" if top["file"] else "",
        f"{top['steps']} steps"
        + (f" ({steps} in the whole tree)" if steps != top["steps"] else ""),
        f"{len(data['runs']) - 1} child runs" + (f", {failing} failed" if failing else "")
        if len(data["runs"]) > 1
        else "",
        f"{duration:.2f}s",
        f"cost {_money(cost)}",
        f"exit code {top.get('exit')}" if top.get("exit") is not None else "",
    ]
    left = data["left_out"]
    cut = []
    if left["runs"]:
        cut.append(f"{left['runs']} child runs not read")
    if left["rows"]:
        cut.append(f"{left['rows']} steps not listed")
    if left["details"]:
        cut.append(f"the details of {left['details']} steps left out")
    why = top.get("why") or (
        "waiting for answers: " + ", ".join(top.get("pending")) if top.get("pending") else ""
    )
    return (
        f'<header><h1>{escape(top["loop"] or top["id"])} <span class="badge o-{cls}" '
        f'id="outcome">{escape(outcome)}</span></h1>'
        f'<div class="meta">{"".join(f"<span>{m}</span>" for m in meta if m)}</div>'
        + (f'<div class="why">{escape(why)}</div>' if why else "")
        + (
            f'<div class="note">To keep this page small: {escape("; ".join(cut))}. '
            f"'ll logs {escape(top['id'])} --step N' shows any step.</div>"
            if cut
            else ""
        )
        + "</header>"
    )


_LEGEND = (
    '<span class="legend"><span><i style="background:#40c057"></i>success</span>'
    '<span><i style="background:#fa5252"></i>failure, error, timeout</span>'
    '<span><i style="background:#fab005"></i>uncertain</span>'
    '<span><i style="background:#4dabf7"></i>other verdict</span>'
    '<span><i style="background:#ced4da"></i>no verdict</span></span>'
)


def page(
    run_root: Path,
    *,
    base: Path | None = None,
    loop: Loop | None = None,
    mask: Callable[[Any], Any] | None = None,
) -> str:
    """The HTML of the report of the run in `run_root`."""
    base = base or _base_of(run_root)
    top, reader = read_tree(run_root)
    data = collect(top, reader, mask=mask)
    graphs = _graphs(top, base, loop)
    if mask is not None:
        graphs = mask(graphs)
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    blob = blob.replace("</", "<\\/").replace("<!--", "<\\!--")
    title = escape(f"{data['runs'][0]['loop']} · {data['runs'][0]['id']} · ll report")
    parts = {
        "TITLE": title,
        "CSS": _asset("report.css"),
        "HEADER": _header(data),
        "GRAPHS": graphs,
        "LEGEND": _LEGEND,
        "QUESTIONS": _questions(data),
        "COSTS": _costs(data),
        "CAPTURED": _captured(data),
        "SCRIPT": _asset("report.js"),
        "DATA": blob,
    }
    # One pass over the template: a marker inside a value (a state named @@DATA@@) stays text.
    template = _asset("report.html").split("\n", 1)[1]
    return re.sub(r"@@([A-Z]+)@@", lambda found: parts[found[1]], template)


def _base_of(run_root: Path) -> Path:
    """The directory a run was started in: above `.loops/runs/<id>` (or the cwd)."""
    parts = run_root.resolve().parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i - 1 : i + 1] == RUNS.parts:
            return Path(*parts[: i - 1])
    return Path.cwd()


def write_report(
    run_root: Path,
    out: Path | None = None,
    *,
    base: Path | None = None,
    loop: Loop | None = None,
    mask: Callable[[Any], Any] | None = None,
) -> Path:
    """Write the report (default: `report.html` in the run directory); returns its path."""
    target = out if out is not None else run_root / DEFAULT_NAME
    text = page(run_root, base=base, loop=loop, mask=mask)
    try:
        if target.parent != Path():
            target.parent.mkdir(parents=True, exist_ok=True)
        write_named_file(target, text)
    except OSError as exc:
        raise LoopError(f"cannot write the report to {target}: {exc.strerror or exc}") from None
    return target


def env_mask() -> Callable[[Any], Any] | None:
    """What the reporting process knows to be secret (its secret-looking environment)."""
    from little_loops.record.secrets import Redactor

    redactor = Redactor.for_run(os.environ, {}, ())
    return redactor.obj if redactor else None
