"""graph.py: Mermaid and DOT drawings, the run overlay, and `ll graph` as a real process."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from project import Project

from little_loops.errors import RunError
from little_loops.model.loop import (
    Evaluate,
    Loop,
    Route,
    State,
)
from little_loops.report.graph import (
    MAX_ITERATIONS,
    STOPPED,
    dot,
    draw,
    mermaid,
    run_overlay,
)

REPO = Path(__file__).resolve().parents[2]
LL = [sys.executable, "-m", "little_loops"]
HAS_DOT = shutil.which("dot") is not None


def routes(**targets: str) -> Mapping[str, Route]:
    return {verdict: Route(target, "route") for verdict, target in targets.items()}


def lint_loop() -> Loop:
    """The SPEC's fix-lint example, with awkward names, starting at a state that is not first."""
    states = {
        "ask.human": State("ask.human", action="echo look", terminal=True, outcome="failure"),
        "check-src": State(
            "check-src", action="ruff check", routes=routes(success="done", failure="fix")
        ),
        "fix": State(
            "fix",
            action="/ll:fix",
            description='Apply "safe" fixes <quickly> | #1',
            routes={
                "success": Route("check-src", "route"),
                "partial": Route("check-src", "route"),
                "success_uncertain": Route("check-src", "route"),
                "failure": Route("$current", "route"),
                "failure_uncertain": Route("ask.human", "route"),
                "blocked": Route("escalate", "route"),
                "_error": Route("escalate", "route"),
            },
        ),
        "escalate": State("escalate", terminal=True, outcome="failure"),
        "done": State("done", terminal=True),
    }
    return Loop(
        "fix-lint",
        "check-src",
        states,
        on_error="escalate",
        on_max_iterations="ask.human",
        max_iterations=20,
    )


def node_ids(text: str) -> dict[str, str]:
    """Mermaid node id -> its label text, from the node declaration lines."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r'^    (\w+)(?:\["|\(\["|\(\("|>")(.*?)"(?:\]|\]\)|\)\))$', line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def edges(text: str) -> list[tuple[str, str, str, str]]:
    """(source id, arrow, label, target id) of every Mermaid link, in order."""
    out = []
    for line in text.splitlines():
        m = re.match(r'^    (\w+) (-->|-\.->|==>)(?:\|"(.*?)"\|)? (\w+)$', line)
        if m:
            out.append((m.group(1), m.group(2), m.group(3) or "", m.group(4)))
    return out


def assert_mermaid_well_formed(text: str) -> None:
    """Every line is one of the statement forms we emit; ids are safe; linkStyle indexes exist."""
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    links = edges(text)
    ids = node_ids(text)
    for line in lines[1:]:
        ok = (
            re.match(r'^    \w+(\["|\(\["|\(\("|>")[^"]*("\]|"\]\)|"\)\)|"\])$', line)
            or re.match(r'^    \w+ (-->|-\.->|==>)(\|"[^"]*"\|)? \w+$', line)
            or re.match(r"^    classDef \w+ [\w#:,. -]+$", line)
            or re.match(r"^    class [\w,]+ \w+$", line)
            or re.match(r"^    linkStyle [\d,]+ [\w#:,. -]+$", line)
        )
        assert ok, f"unexpected Mermaid line: {line!r}"
        m = re.match(r"^    linkStyle ([\d,]+) ", line)
        if m:
            assert all(int(i) < len(links) for i in m.group(1).split(","))
    for src, _arrow, _label, dst in links:
        assert src in ids
        assert dst in ids
    for node_id in ids:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", node_id)
        assert node_id not in ("end", "graph", "subgraph", "flowchart")


def by_name(text: str) -> dict[str, str]:
    """State name -> node id (the name is the label's first line)."""
    return {label.split("<br/>")[0]: node_id for node_id, label in node_ids(text).items()}


# -- Mermaid ---------------------------------------------------------------------------------


def test_mermaid_states_routes_and_styles() -> None:
    text = mermaid(lint_loop())
    assert_mermaid_well_formed(text)
    ids = by_name(text)
    assert set(ids) >= {"ask.human", "check-src", "fix", "escalate", "done", "start"}
    links = edges(text)
    labelled = {(s, lab, d) for s, _a, lab, d in links}
    # several verdicts to one target share an edge, joined with " / "
    assert (ids["fix"], "success / partial", ids["check-src"]) in labelled
    assert (ids["fix"], "failure", ids["fix"]) in labelled  # $current is a self-loop
    assert (ids["check-src"], "failure", ids["fix"]) in labelled
    # the initial state is marked by the start node, even when it is not the first state
    assert ("ll_start", "-->", "", ids["check-src"]) in links
    # terminal styles: success and failure differ
    assert f"    class {ids['done']} success" in text
    assert re.search(rf"^    class .*\b{ids['escalate']}\b.* failure$", text, re.M)
    assert f'{ids["done"]}(["done"])' in text


def test_mermaid_uncertain_and_error_routes_are_dashed_and_coloured() -> None:
    text = mermaid(lint_loop())
    ids = by_name(text)
    links = edges(text)

    def index(label: str) -> int:
        return next(i for i, (_s, _a, lab, _d) in enumerate(links) if lab == label)

    uncertain, error = index("success_uncertain"), index("_error")
    assert links[uncertain][1] == "-.->"
    assert links[error][1] == "-.->"
    assert links[index("blocked")][1] == "-->"
    styles = dict(
        (int(i), style)
        for m in re.finditer(r"^    linkStyle ([\d,]+) (.*)$", text, re.M)
        for i in m.group(1).split(",")
        for style in [m.group(2)]
    )
    assert "#e67700" in styles[uncertain]
    assert "#c92a2a" in styles[error]
    assert styles[uncertain] != styles[error]
    assert links[index("failure_uncertain")][3] == ids["ask.human"]


def test_mermaid_loop_on_error_and_max_iterations_are_notes() -> None:
    text = mermaid(lint_loop())
    ids = by_name(text)
    assert text.count("ll_on_error>") == 1
    assert ("ll_on_error", "-.->", "error / timeout", ids["escalate"]) in edges(text)
    assert "after 20 steps" in text
    assert ("ll_max_iterations", "-.->", "limit", ids["ask.human"]) in edges(text)


def test_mermaid_next_edges_and_default_route() -> None:
    loop = Loop(
        "n",
        "a",
        {
            "a": State("a", action="true", next=Route("b", "next")),
            "b": State("b", action="true", routes=routes(success="c", _="a")),
            "c": State("c", terminal=True),
        },
    )
    text = mermaid(loop)
    assert_mermaid_well_formed(text)
    labels = {lab for _s, _a, lab, _d in edges(text)}
    assert {"success (next)", "success", "_"} <= labels
    assert "ll_on_error" not in text
    assert "ll_max_iterations" not in text


def test_unrouted_verdicts_are_drawn_as_stops() -> None:
    # `next` is only the success edge: a failing `a` stops the run (SPEC section 6)
    shell: dict[str, Any] = {"action_type": "shell", "evaluate": Evaluate("exit_code")}
    loop = Loop(
        "n",
        "a",
        {
            "a": State("a", action="true", **shell, next=Route("b", "next")),
            "b": State("b", action="true", **shell, routes=routes(success="c", failure="a")),
            "c": State("c", terminal=True),
        },
    )
    text = mermaid(loop)
    assert_mermaid_well_formed(text)
    assert 'll_stop_1(["stops (exit 1)"])' in text
    assert 'll_stop_3(["stops (exit 3)"])' in text
    links = edges(text)
    assert ("s0", "-->", "success (next)", "s1") in links
    assert ("s0", "-.->", "failure", "ll_stop_1") in links
    assert ("s0", "-.->", "error / timeout", "ll_stop_3") in links
    assert ("s1", "-.->", "error / timeout", "ll_stop_3") in links
    assert not any(src == "s1" and dst == "ll_stop_1" for src, _a, _l, dst in links)
    # with a loop-wide on_error nothing stops: the note's edge stands for them all
    caught = mermaid(Loop("n", "a", loop.states, on_error="c"))
    assert "ll_stop" not in caught
    assert ("ll_on_error", "-.->", "error / timeout", "s2") in edges(caught)
    assert "stops (exit" in dot(loop)


def test_mermaid_escapes_labels() -> None:
    text = mermaid(lint_loop())
    label = node_ids(text)[by_name(text)["fix"]]
    assert label == "fix<br/>Apply #quot;safe#quot; fixes #lt;quickly#gt; #124; #35;1"
    assert_mermaid_well_formed(text)


def test_mermaid_long_descriptions_are_shortened() -> None:
    loop = Loop("d", "a", {"a": State("a", terminal=True, description="word " * 40)})
    label = node_ids(mermaid(loop))["s0"]
    assert len(label.split("<br/>")[1]) <= 48


def test_maintain_edges_back_from_terminals() -> None:
    loop = Loop(
        "m",
        "a",
        {
            "a": State("a", action="true", routes=routes(success="ok", failure="ok2")),
            "ok": State("ok", terminal=True),
            "ok2": State("ok2", terminal=True, on_maintain="ok"),
        },
        maintain=True,
    )
    text = mermaid(loop)
    assert ("s1", "-.->", "maintain", "s0") in edges(text)
    assert ("s2", "-.->", "maintain", "s1") in edges(text)


def test_mermaid_overlay_visits_and_taken_edges() -> None:
    loop = lint_loop()
    visits = {"check-src": 3, "fix": 2, "escalate": 1}
    taken = {("check-src", "fix"), ("fix", "check-src"), ("check-src", "escalate")}
    text = mermaid(loop, visits=visits, taken=taken)
    assert_mermaid_well_formed(text)
    ids = by_name(text)
    labels = node_ids(text)
    assert labels[ids["check-src"]] == "check-src<br/>3 visits"
    assert labels[ids["escalate"]] == "escalate<br/>1 visit"
    assert labels[ids["done"]] == "done"
    links = edges(text)
    assert (ids["check-src"], "==>", "failure", ids["fix"]) in links
    assert (ids["fix"], "==>", "success / partial", ids["check-src"]) in links
    assert (ids["check-src"], "-->", "success", ids["done"]) in links
    # the fall-back on the loop's on_error has no static edge: it is added, taken
    assert (ids["check-src"], "==>", "on_error", ids["escalate"]) in links
    assert ("ll_start", "==>", "", ids["check-src"]) in links
    visited = re.search(r"^    class ([\w,]+) visited$", text, re.M)
    unvisited = re.search(r"^    class ([\w,]+) unvisited$", text, re.M)
    assert visited
    assert set(visited.group(1).split(",")) == {
        ids["check-src"],
        ids["fix"],
        ids["escalate"],
    }
    assert unvisited
    assert ids["done"] in unvisited.group(1).split(",")


def test_overlay_highlights_the_max_iterations_jump() -> None:
    text = mermaid(lint_loop(), visits={"ask.human": 1}, taken={(MAX_ITERATIONS, "ask.human")})
    assert ("ll_max_iterations", "==>", "limit", by_name(text)["ask.human"]) in edges(text)


def test_overlay_ignores_states_the_loop_does_not_have() -> None:
    text = mermaid(lint_loop(), visits={"gone": 2}, taken={("gone", "fix"), ("fix", "gone")})
    assert_mermaid_well_formed(text)
    assert "gone" not in text


# -- DOT -------------------------------------------------------------------------------------


def test_dot_structure_and_quoting() -> None:
    text = dot(lint_loop(), visits={"fix": 1}, taken={("check-src", "fix")})
    assert text.startswith('digraph "fix-lint" {\n')
    assert text.rstrip().endswith("}")
    assert 'label="fix\\nApply \\"safe\\" fixes <quickly> | #1\\n1 visit"' in text
    assert re.search(r'^    s\d -> s\d \[label="success / partial"\];$', text, re.M)
    assert re.search(r'label="_error", style=dashed, color="#c92a2a"', text)
    assert re.search(r'label="success_uncertain", style=dashed, color="#e67700"', text)
    assert re.search(r'label="failure", penwidth=3, color="#1c7ed6"', text)
    assert 'fillcolor="#d8f3dc"' in text
    assert 'fillcolor="#ffe3e3"' in text
    assert "ll_start -> s1" in text


def test_dot_escapes_backslashes_and_newlines() -> None:
    loop = Loop('we"ird\\', "a", {"a": State("a", terminal=True, description="x\\y")})
    text = dot(loop)
    assert text.startswith('digraph "we\\"ird\\\\" {')
    assert 'label="a\\nx\\\\y"' in text


@pytest.mark.skipif(not HAS_DOT, reason="graphviz 'dot' is not installed")
@pytest.mark.parametrize("overlay", [False, True])
def test_dot_is_accepted_by_graphviz(tmp_path: Path, overlay: bool) -> None:
    loop = lint_loop()
    text = dot(loop, visits={"fix": 2}, taken={("fix", "fix")}) if overlay else dot(loop)
    proc = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "<svg" in proc.stdout


# -- run overlay -----------------------------------------------------------------------------


def write_events(run_dir: Path, events: list[dict[str, object]]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e) for e in events]
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n{torn", encoding="utf-8")
    return run_dir


def test_run_overlay_counts_visits_and_routes(tmp_path: Path) -> None:
    run = write_events(
        tmp_path / "r",
        [
            {"event": "loop_start", "loop": "fix-lint"},
            {"event": "state_enter", "step": 1, "state": "check-src"},
            {"event": "route", "step": 1, "from": "check-src", "to": "fix"},
            {"event": "state_enter", "step": 2, "state": "fix"},
            {"event": "loop_complete", "outcome": "interrupted"},
            {"event": "loop_start", "loop": "fix-lint", "resumed": True},
            {"event": "state_enter", "step": 2, "state": "fix"},  # re-run after a resume
            {"event": "route", "step": 2, "from": "fix", "to": "fix"},
            {"event": "state_enter", "step": 3, "state": "ask.human"},  # the on_max jump
        ],
    )
    visits, taken = run_overlay(run)
    assert visits == {"check-src": 1, "fix": 1, "ask.human": 1}
    assert taken == {("check-src", "fix"), ("fix", "fix"), (MAX_ITERATIONS, "ask.human")}


def test_run_overlay_marks_where_a_run_stopped(tmp_path: Path) -> None:
    run = write_events(
        tmp_path / "r",
        [
            {"event": "state_enter", "step": 1, "state": "check-src"},
            {"event": "loop_complete", "final_state": "check-src", "exit_code": 3},
        ],
    )
    assert run_overlay(run)[1] == {("check-src", STOPPED[3])}
    odd = write_events(
        tmp_path / "odd", [{"event": "loop_complete", "final_state": "a", "exit_code": [1]}]
    )
    assert run_overlay(odd)[1] == set()


def test_run_overlay_without_events_is_a_run_error(tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"events\.jsonl: missing"):
        run_overlay(tmp_path)


def test_draw_refuses_a_run_of_another_loop(tmp_path: Path) -> None:
    run = write_events(tmp_path / "r", [{"event": "loop_start", "loop": "other"}])
    with pytest.raises(RunError, match="is a run of loop 'other', not of 'fix-lint'"):
        draw(lint_loop(), "mermaid", run_dir=run)


def test_draw_formats() -> None:
    assert draw(lint_loop(), "mermaid").startswith("flowchart TD\n")
    assert draw(lint_loop(), "dot").startswith("digraph ")


# -- with the real loader and the shipped loops ----------------------------------------------

SHIPPED = sorted((REPO / "loops").glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_loop_draws(path: Path) -> None:
    from little_loops.load.loader import load

    loop = load(path)
    text = mermaid(loop)
    assert_mermaid_well_formed(text)
    assert set(by_name(text)) >= set(loop.states)
    if HAS_DOT:
        proc = subprocess.run(
            ["dot", "-Tsvg"], input=dot(loop), capture_output=True, text=True, timeout=30
        )
        assert proc.returncode == 0, proc.stderr


# -- `ll graph` ------------------------------------------------------------------------------

LOOP = """
name: tiny-loop
initial: check
on_error: broken
states:
  check:
    action: test -f marker
    on_success: done
    on_failure: make.it
  make.it:
    action: touch marker
    next: check
  done: {terminal: true}
  broken: {terminal: true, outcome: failure}
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(textwrap.dedent(LOOP), encoding="utf-8")
    return path


def test_ll_graph_mermaid_and_dot(tiny: Path, project: Project) -> None:
    proc = project.ll("graph", tiny, cwd=tiny.parent)
    assert proc.returncode == 0, proc.stderr
    assert_mermaid_well_formed(proc.stdout)
    assert 'make.it"]' in proc.stdout
    proc = project.ll("graph", tiny, "--format", "dot", cwd=tiny.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('digraph "tiny-loop" {')


def test_ll_graph_run_overlay(tiny: Path, project: Project) -> None:
    ran = project.ll("run", tiny, "-q", cwd=tiny.parent)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (run_id,) = [p.name for p in (tiny.parent / ".loops" / "runs").iterdir()]
    proc = project.ll("graph", tiny, "--run", run_id, cwd=tiny.parent)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert_mermaid_well_formed(text)
    labels = node_ids(text)
    ids = by_name(text)
    assert labels[ids["check"]] == "check<br/>2 visits"
    assert labels[ids["make.it"]] == "make.it<br/>1 visit"
    assert (ids["check"], "==>", "failure", ids["make.it"]) in edges(text)
    assert (ids["check"], "==>", "success", ids["done"]) in edges(text)


def test_ll_graph_missing_run_is_one_line_exit_3(tiny: Path, project: Project) -> None:
    (tiny.parent / ".loops" / "runs" / "20260101-000000-x-0000").mkdir(parents=True)
    proc = project.ll("graph", tiny, "--run", "no-such-run", cwd=tiny.parent)
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr.startswith("ll: error: ")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_ll_graph_invalid_file_exit_2(tmp_path: Path, project: Project) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ninitial: nowhere\nstates:\n  a: {terminal: true}\n")
    proc = project.ll("graph", bad, cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_ll_graph_help_has_an_example(tmp_path: Path, project: Project) -> None:
    proc = project.ll("graph", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert "Example:" in proc.stdout
    assert "--format" in proc.stdout
    assert "--run" in proc.stdout
