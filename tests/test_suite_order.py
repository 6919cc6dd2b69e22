"""How the suite orders its tests for pytest-xdist (tests/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import conftest
import pytest


@dataclass
class FakeItem:
    """What the ordering reads of a test: its name and its markers."""

    name: str
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


@dataclass
class FakeConfig:
    """A pytest config, an xdist worker's when it has `workerinput`."""

    worker: bool

    def __getattr__(self, name: str) -> Any:
        if name == "workerinput" and self.worker:
            return {"workerid": "gw0"}
        raise AttributeError(name)


def _items() -> list[FakeItem]:
    return [
        FakeItem("a"),
        FakeItem("b", {"slow"}),
        FakeItem("c", {"integration"}),
        FakeItem("d", {"slow", "integration"}),
        FakeItem("e"),
    ]


def test_slow_tests_come_first_and_each_part_keeps_its_order() -> None:
    items = cast(list[pytest.Item], _items())
    assert [i.name for i in conftest.slow_first(items)] == ["b", "d", "a", "c", "e"]
    assert [i.name for i in items] == ["a", "b", "c", "d", "e"]  # a new list


@pytest.mark.parametrize(("worker", "order"), [(True, "bdace"), (False, "abcde")])
def test_only_an_xdist_worker_reorders_what_it_collected(worker: bool, order: str) -> None:
    items = cast(list[pytest.Item], _items())
    conftest.pytest_collection_modifyitems(cast(pytest.Config, FakeConfig(worker)), items)
    assert "".join(i.name for i in items) == order


def test_this_session_hands_out_the_slow_tests_first_when_xdist_runs_it(
    request: pytest.FixtureRequest,
) -> None:
    """The hook is the one pytest runs: in this very session, every test marked `slow`
    precedes every other on an xdist worker; one process keeps the files' order."""
    items = request.session.items
    slow = [item.get_closest_marker("slow") is not None for item in items]
    if hasattr(request.config, "workerinput"):
        assert slow == sorted(slow, reverse=True)
    else:
        files = [item.path for item in items]
        runs = [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]
        assert len(runs) == len(set(runs))  # each file's tests together, as collected
