"""Defaults are written once, as the schema's `default` keywords: the loader reads them, the
editor schema carries them, docs/loop-reference.md's table is made from them (item 4, issue 12)."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from project import Project

from little_loops.load import builder
from little_loops.load.defaults import (
    EVALUATE,
    block_names,
    defaults,
    evaluator_types,
)
from little_loops.load.loader import load
from little_loops.model.loop import (
    DEFAULT_JUDGE_PROMPT,
    Evaluate,
    LlmDefaults,
    Loop,
    Retry,
    State,
)

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "loop-reference.md"
sys.path.insert(0, str(REPO / "scripts"))

from gen_defaults import END, START, render  # noqa: E402

MODEL = {"loop": Loop, "state": State, "retry": Retry, "llm": LlmDefaults, EVALUATE: Evaluate}

BARE = """\
name: bare
initial: check
states:
  check:
    action: "true"
    retry: {}
    evaluate: {type: convergence, target: 0}
    route: {target: done, _: done}
  done:
    terminal: true
"""


def test_the_docs_table_is_made_from_the_schema() -> None:
    text = DOC.read_text()
    assert START in text
    assert END in text
    assert render(text) == text, "docs/loop-reference.md is stale: run scripts/gen_defaults.py"


@pytest.mark.parametrize("block", list(MODEL))
def test_the_model_defaults_equal_the_schema(block: str) -> None:
    model = {f.name: f.default for f in dataclasses.fields(MODEL[block])}
    found = {k: v for k, v in defaults(block).items() if k in model and k != "prompt"}
    assert found, block
    for key, value in found.items():
        assert model[key] == value, (block, key)
    if block == "loop":
        assert set(defaults(block)) - set(model) == {"paradigm"}  # not in the model: compiled


def test_evaluator_types_agree_where_their_defaults_meet() -> None:
    seen: dict[str, Any] = {}
    for name in evaluator_types():
        for key, value in defaults(name).items():
            assert seen.setdefault(key, value) == value, (name, key)


def test_the_judge_default_prompt_is_the_schema_one() -> None:
    assert defaults("llm_structured")["prompt"] == DEFAULT_JUDGE_PROMPT


def test_a_bare_loop_gets_every_schema_default(tmp_path: Path) -> None:
    path = tmp_path / "bare.yaml"
    path.write_text(BARE)
    loop = load(path)
    state = loop.states["check"]
    assert state.retry is not None
    assert state.evaluate is not None
    for block, record in [
        ("loop", loop),
        ("state", state),
        ("retry", state.retry),
        ("llm", loop.llm),
        ("convergence", state.evaluate),
    ]:
        for key, value in defaults(block).items():
            if key != "paradigm":
                assert getattr(record, key) == value, (block, key)


def test_the_builder_takes_its_defaults_from_the_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No default is written in the builder: change the schema's, and the loaded loop follows."""

    def changed(block: str) -> Mapping[str, Any]:
        new = {"max_iterations": 7, "shell": "/bin/bash", "jitter": False, "max_delay": 5}
        return {k: new.get(k, v) for k, v in defaults(block).items()}

    monkeypatch.setattr(builder, "defaults", changed)
    path = tmp_path / "bare.yaml"
    path.write_text(BARE)
    loop = load(path)
    assert (loop.max_iterations, loop.shell) == (7, "/bin/bash")
    retry = loop.states["check"].retry
    assert retry is not None
    assert (retry.jitter, retry.max_delay) == (False, 5.0)


def test_ll_run_stops_at_the_schema_default_max_iterations(
    project: Project, tmp_path: Path
) -> None:
    (tmp_path / "spin.yaml").write_text(
        "name: spin\ninitial: a\nstates:\n  a:\n    action: 'true'\n"
        "    on_success: a\n    on_failure: done\n  done:\n    terminal: true\n"
    )
    ran = project.ll("run", "-q", "spin.yaml")
    steps = defaults("loop")["max_iterations"]
    assert ran.returncode == 4, ran.stderr
    assert f"max_iterations at 'a' after {steps} steps" in ran.stdout


def test_ll_schema_carries_the_defaults(project: Project) -> None:
    shown = project.ll("schema")
    assert shown.returncode == 0, shown.stderr
    schema = json.loads(shown.stdout)
    assert schema["properties"]["max_iterations"]["default"] == defaults("loop")["max_iterations"]
    assert schema["$defs"]["retry"]["properties"]["on"]["default"] == list(defaults("retry")["on"])


# -- the hand-written tables of docs/loop-reference.md say the same defaults ---------------------

# A section of the reference -> the block its key table describes.
SECTIONS = {
    "## Top-level keys": "loop",
    "### `llm`": "llm",
    "### `retry`": "retry",
    "### `llm_structured`": "llm_structured",
}


def doc_defaults() -> Iterator[tuple[str, str, str]]:
    """(block, key, the default the table's second column gives) for every table row that
    gives one."""
    block = None
    for line in DOC.read_text().splitlines():
        if line.startswith("#"):
            block = SECTIONS.get(line.strip())
        m = re.match(r"\| `(\w+)` \| ([^|]+) \|", line)
        if block is None or m is None:
            continue
        key, cell = m.group(1), m.group(2).strip()
        if block == "loop":  # "whole number ≥ 1, default 50" or "`fsm` (default)"
            said = re.search(r"default (\S+)$", cell) or re.match(r"(\S+) \(default\)$", cell)
            if said is None:
                continue
            cell = said.group(1)
        yield block, key, cell


def plain(text: str) -> str:
    return text.strip('`"')


def test_the_hand_written_tables_agree_with_the_schema() -> None:
    from gen_defaults import _show

    found = list(doc_defaults())
    checked = 0
    for block, key, cell in found:
        if key in defaults(block):
            assert plain(cell) == plain(_show(defaults(block)[key])), (block, key, cell)
            checked += 1
    assert checked >= 20  # the tables were found


def test_every_block_is_in_the_table() -> None:
    table = DOC.read_text().partition(START)[2].partition(END)[0]
    for block in block_names():
        for key in defaults(block):
            assert f"| `{key}` |" in table, (block, key)
