"""`ll migrate` equivalence harness (issue 26): every scenario of the shared corpus run by `ll`
after `ll migrate`, compared with the path upstream's `ll-loop` took (recorded once, see
tests/migrate/equiv/expected.json and scripts/migrate_equiv.py).

One test per scenario, so that pytest-xdist spreads them (one test for all of them was the
suite's longest by far): each behaves the same, unless expected.json lists it under `differ`
with the reason (docs/migrating.md says more), where it is an expected failure that says so
when it passes. A last test holds the figure: the scenarios that must behave the same are at
least the `floor` measured last. `ll run` runs in this process (tests/project.py), in the
harness's sandbox and with exactly its environment; `python scripts/migrate_equiv.py figures`
runs the same scenarios with `ll` in a process of its own and prints the figure."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from project import Project, shared_dir, time_limit

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "upstream-loops"
EXPECTED = REPO / "tests" / "migrate" / "equiv" / "expected.json"
DATA: dict[str, Any] = json.loads(EXPECTED.read_text(encoding="utf-8"))
DIFFER: dict[str, str] = DATA["differ"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/upstream-loops absent"),
]


def harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "migrate_equiv", REPO / "scripts/migrate_equiv.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["migrate_equiv"] = module
    spec.loader.exec_module(module)
    return module


eq = harness()


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus converted by `ll migrate` (about ten CPU seconds): once a session, for
    every xdist worker."""
    with shared_dir(tmp_path_factory, "equiv-corpus") as (work, first):
        if first:
            proc = eq.migrate_corpus(CORPUS, work)
            (work / "migrate.stderr").write_text(proc.stderr, encoding="utf-8")
        stderr = (work / "migrate.stderr").read_text(encoding="utf-8")
    assert "Traceback" not in stderr, stderr
    return work


def ll_in_this_process(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """The harness's `invoke`: `ll ARGS` through the in-process runner, with `env` as the
    whole environment (every other variable of this process taken out for the call)."""
    unset: dict[str, str | None] = {name: None for name in os.environ if name not in env}

    # the harness's limit for a run in a process of its own
    with time_limit(eq.RUN_TIMEOUT, " ".join(["ll", *args])):
        done = Project(cwd).ll(*args, cwd=cwd, env={**unset, **env})
    return done.returncode, done.stdout, done.stderr


def _param(scenario: dict[str, Any]) -> Any:
    name = eq.scenario_name(scenario)
    marks = [pytest.mark.xfail(reason=DIFFER[name], strict=False)] if name in DIFFER else []
    return pytest.param(scenario, id=name, marks=marks)


@pytest.mark.parametrize("scenario", [_param(s) for s in DATA["scenarios"]])
def test_scenario_behaves_as_upstream_recorded(scenario: dict[str, Any], migrated: Path) -> None:
    ok, why = eq.behaves_the_same(scenario, migrated, DATA["step_limit"], ll_in_this_process)
    assert ok, f"{eq.scenario_name(scenario)}: {why}"


def test_the_scenarios_that_behave_the_same_are_at_least_the_floor() -> None:
    """With every scenario not under `differ` passing above, at least `floor` behave the same
    (the figure of docs/migrating.md); `differ` names only scenarios that exist."""
    names = [eq.scenario_name(s) for s in DATA["scenarios"]]
    assert len(names) == len(set(names))
    assert sorted(set(DIFFER) - set(names)) == []
    same = len(names) - len(DIFFER)
    print(f"\nequivalence: {same}/{len(names)} scenarios must behave the same")
    assert same >= DATA["floor"], "fewer scenarios behave the same than measured last"
