"""The evaluator registry (item 5 of issue 12): one Protocol, one typed config per type, one
table, no import cycle; and the module seams of the loader (item 6) without cycles either."""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from little_loops.evaluators import EvalInput, possible_verdicts
from little_loops.evaluators.configs import OutputContains, config_of
from little_loops.evaluators.registry import EVALUATOR_TYPES, EVALUATORS, evaluate
from little_loops.model.loop import Evaluate
from little_loops.model.records import fields

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "little_loops"
SCHEMA = json.loads((PACKAGE / "loop.schema.json").read_text())


@pytest.mark.parametrize("name", EVALUATOR_TYPES)
def test_each_typed_config_holds_exactly_its_schema_keys(name: str) -> None:
    in_schema = set(SCHEMA["$defs"][name]["properties"]) - {"type"}
    assert {f.name for f in fields(EVALUATORS[name].config)} == in_schema


def test_the_registry_is_the_schema_enum() -> None:
    assert set(EVALUATOR_TYPES) == set(SCHEMA["$defs"]["evaluator"]["properties"]["type"]["enum"])


def test_a_typed_config_reads_only_its_keys() -> None:
    spec = Evaluate("output_contains", pattern="ok", negate=True, path=".x", samples=3)
    assert EVALUATORS["output_contains"].config is OutputContains
    config = config_of(OutputContains, spec)
    assert config == OutputContains(pattern="ok", literal=False, negate=True, source=None)
    assert [f.name for f in fields(config)] == ["pattern", "literal", "negate", "source"]


def test_possible_verdicts_are_the_evaluators_own_plus_the_actions() -> None:
    spec = Evaluate("convergence", target=0)
    own = EVALUATORS["convergence"].verdicts(spec)
    assert possible_verdicts(spec, action_type=None) == own
    assert possible_verdicts(spec, action_type="shell") == own | {"timeout"}
    assert possible_verdicts(spec, action_type="slash") == own | {"timeout", "error"}
    assert possible_verdicts(None, action_type=None) == {"success"}


TEXTS = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["0", "1", "3.5", "-2", '{"a": [1, 2]}', "[]", "null", "x 1", "ok"]),
)
SPECS = st.sampled_from(
    [
        Evaluate("exit_code"),
        Evaluate("output_contains", pattern="o"),
        Evaluate("output_contains", pattern="(", negate=True),
        Evaluate("output_numeric", operator="ge", target=1),
        Evaluate("output_numeric", operator="lt", target="x"),
        Evaluate("output_json", path=".a[1]", operator="eq", target=2),
        Evaluate("output_json", path=".a", operator="gt", target=0),
        Evaluate("convergence", target=0, tolerance=0.5),
        Evaluate("convergence", direction="maximize", previous="${context.p}"),
        Evaluate("all", of=(Evaluate("exit_code"), Evaluate("output_numeric", target=1))),
        Evaluate("any", of=(Evaluate("output_contains", pattern="1"), Evaluate("exit_code"))),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    spec=SPECS,
    text=TEXTS,
    code=st.one_of(st.none(), st.integers(-2, 3)),
    prev=st.one_of(st.none(), st.floats(-5, 5)),
)
def test_no_evaluator_gives_a_verdict_it_does_not_declare(
    spec: Evaluate, text: str, code: int | None, prev: float | None
) -> None:
    inp = EvalInput(text=text, exit_code=code, previous_value=prev, resolve=lambda t: text)
    assert evaluate(spec, inp).verdict in possible_verdicts(spec, action_type=None)


# -- imports: no cycle, lazy ones included ---------------------------------------------------


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: Collection[str]) -> set[str]:
    """Every little_loops module `path` imports, at any depth of the code (lazy ones too), but
    not those under `if TYPE_CHECKING:`."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _statements(ast.parse(path.read_text()).body):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = (
                (base + "." + node.module if node.module else base)
                if node.level
                else (node.module or "")
            )
            # `from . import llm` imports the module `llm`; `from .x import f` the module `x`
            found.update(f"{target}.{alias.name}" for alias in node.names)
            if not any(f"{target}.{alias.name}" in modules for alias in node.names):
                found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of `body`, at any depth (function, class, loop, `try`, `with`, `match`
    bodies), but none under an `if TYPE_CHECKING:` (its `else` included). An import is always
    a statement, so this finds each one without visiting the expressions, which are most of a
    module's nodes (`ast.walk` over them was most of the graph's CPU, in every xdist worker)."""
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        for _, value in ast.iter_fields(node):
            if not isinstance(value, list):
                continue
            for child in value:
                if isinstance(child, ast.stmt):
                    yield from _statements([child])
                elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    yield from _statements(child.body)


@functools.cache
def _graph() -> Mapping[str, frozenset[str]]:
    """The package's import graph, parsed once for every test of this file (the files do not
    change while the tests run; parsing them all took about a second a test)."""
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: frozenset(m for m in _imports(path, modules) if m in modules and m != name)
        for name, path in modules.items()
    }


def _reaches(graph: Mapping[str, frozenset[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo += graph.get(node, ())
    return False


OWNED = [
    "little_loops.load.loader",
    "little_loops.load.source",
    "little_loops.load.composer",
    "little_loops.load.builder",
    "little_loops.load.defaults",
    "little_loops.load.schema",
    "little_loops.wording",
    "little_loops.load.checks",
    "little_loops.load.value_checks",
    "little_loops.load.paradigms",
    "little_loops.load.starters",
    "little_loops.model.loop",
    "little_loops.evaluators.registry",
    "little_loops.evaluators.contract",
    "little_loops.evaluators.configs",
    "little_loops.evaluators.deterministic",
    "little_loops.evaluators.jsonpath",
]


@pytest.mark.parametrize("name", OWNED)
def test_no_import_cycle_through(name: str) -> None:
    graph = _graph()
    back = sorted(m for m in graph[name] if _reaches(graph, m, name))
    assert back == [], f"{name} imports {back}, which import it back"


def test_evaluator_modules_do_not_import_the_registry() -> None:
    graph = _graph()
    for name in graph:
        # agreement (`ll judge test`) uses the registry; nothing the registry imports imports it
        if name.startswith("little_loops.evaluators.") and name not in (
            "little_loops.evaluators.registry",
            "little_loops.evaluators.agreement",
        ):
            assert "little_loops.evaluators.registry" not in graph[name], name
            assert "little_loops.evaluators" not in graph[name], name  # the package re-exports it


# -- through the real `ll` ---------------------------------------------------------------------

COMBINED = """\
name: combined
initial: check
states:
  check:
    action: >-
      echo '{"passed": 3, "failed": 0}'
    evaluate:
      type: all
      of:
        - type: exit_code
        - type: output_json
          path: .failed
          operator: eq
          target: 0
        - type: output_contains
          pattern: passed
    on_success: done
    on_failure: done
  done:
    terminal: true
"""


def test_ll_run_dispatches_nested_evaluators_through_the_registry(tmp_path: Path) -> None:
    (tmp_path / "combined.yaml").write_text(COMBINED)
    ran = subprocess.run(
        [sys.executable, "-m", "little_loops", "run", "--json", "combined.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    judged = [e for e in events if e.get("event") == "evaluate"]
    assert judged[0]["verdict"] == "success"
    assert [part["verdict"] for part in judged[0]["details"]["of"]] == ["success"] * 3


# -- the docs' evaluator tables say what the registry says ---------------------------------------


def _rows(doc: str, heading: str) -> list[list[str]]:
    text = (REPO / "docs" / doc).read_text().partition(heading)[2]
    rows = []
    lines = text.splitlines()[1:]
    for line, after in zip(lines, [*lines[1:], ""], strict=True):
        if line.startswith("#"):
            break
        if after.startswith("|---"):
            continue  # the header
        if line.startswith("| `") or (line.startswith("| ") and "`" in line.split("|")[2]):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _words(cell: str) -> set[str]:
    return {w for w in re.findall(r"`([a-z_]+)`", cell) if "uncertain" not in w}


def test_the_reference_table_gives_each_types_keys_and_verdicts() -> None:
    rows = _rows("loop-reference.md", "## Evaluators and their verdicts")
    seen = set()
    for kind, keys, verdicts in rows:
        for name in _words(kind):
            seen.add(name)
            evaluator = EVALUATORS[name]
            assert _words(verdicts) == evaluator.verdicts(Evaluate(name)), name
            if keys != "see below":
                assert _words(keys) == {f.name for f in fields(evaluator.config)}, name
    assert seen == set(EVALUATOR_TYPES)


def test_the_guide_table_gives_each_types_verdicts() -> None:
    rows = _rows("evaluators.md", "## Which evaluator?")
    seen = set()
    for _, kind, verdicts in rows:
        for name in _words(kind.split("(")[0]):
            seen.add(name)
            assert _words(verdicts) == EVALUATORS[name].verdicts(Evaluate(name)), name
    assert seen == set(EVALUATOR_TYPES)
