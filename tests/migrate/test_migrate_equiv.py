"""`ll migrate` equivalence harness (issue 26): every scenario of the shared corpus run by `ll`
after `ll migrate`, compared with the path upstream's `ll-loop` took (recorded once, see
tests/migrate/equiv/expected.json and scripts/migrate_equiv.py). Prints the figure and every
scenario that differs (docs/migrating.md says why); fails when fewer behave the same than the
`floor` measured last."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "upstream-loops"
EXPECTED = REPO / "tests" / "migrate" / "equiv" / "expected.json"

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


def test_migrated_corpus_behaves_as_upstream_recorded(tmp_path: Path) -> None:
    eq = harness()
    eq.migrate_corpus(CORPUS, tmp_path)
    data = json.loads(EXPECTED.read_text(encoding="utf-8"))
    results = eq.equivalence(CORPUS, tmp_path)
    same = sum(ok for _, ok, _ in results)
    print(f"\nequivalence: {same}/{len(results)} scenarios behave the same")
    for name, ok, why in results:
        if not ok:
            print(f"  DIFF {name}: {why}")
    assert len(results) == len(data["scenarios"])
    assert same >= data["floor"], "fewer scenarios behave the same than measured last"
