"""`record` behaves as `dataclass` does, for the options the package uses (model/records.py)."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from little_loops.model.records import record


def pair(**options: Any) -> tuple[type, type]:
    """The same class body made by `dataclass` and by `record`."""

    def body() -> type:
        class Point:
            """A point."""

            KIND: ClassVar[str] = "point"
            x: int
            y: int = 0
            tags: list[str] = field(default_factory=list)
            note: str = field(default="", compare=False, repr=False)

        return Point

    return dataclass(**options)(body()), record(**options)(body())


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"kw_only": True}])
def test_record_matches_dataclass(options: dict[str, Any]) -> None:
    made = pair(**options)
    values = [
        kind(x=1, y=2, tags=["a"], note="n") if options.get("kw_only") else kind(1, 2, ["a"], "n")
        for kind in made
    ]
    for kind, value in zip(made, values, strict=True):
        assert str(inspect.signature(kind)) == str(inspect.signature(made[0]))
        assert [f.name for f in dataclasses.fields(kind)] == ["x", "y", "tags", "note"]
        assert all(map(dataclasses.is_dataclass, made))
        for name in ("KIND", "x", "y", "tags", "note"):  # class attributes as dataclass leaves them
            assert vars(kind).get(name, "-") == vars(made[0]).get(name, "-"), name
        assert kind.__doc__ == "A point."
        assert repr(value) == repr(values[0])
        assert repr(value).endswith("Point(x=1, y=2, tags=['a'])")
        assert value == dataclasses.replace(value, note="other")  # `note` is not compared
        assert value != dataclasses.replace(value, y=3)
        assert value != object()
        assert dataclasses.asdict(value) == {"x": 1, "y": 2, "tags": ["a"], "note": "n"}
        assert getattr(kind, "__match_args__") == getattr(made[0], "__match_args__")  # noqa: B009
        fresh = [kind(x=1), kind(x=1)]
        assert fresh[0].tags == []
        assert fresh[0].tags is not fresh[1].tags
        assert vars(kind)["__init__"].__qualname__.endswith("Point.__init__")


def test_frozen_record_refuses_assignment_and_hashes_by_fields() -> None:
    for kind in pair(frozen=True):
        value = kind(1, 2, (), "n")
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.x = 5
        with pytest.raises(dataclasses.FrozenInstanceError):
            del value.x
        assert hash(value) == hash(kind(1, 2, (), "other"))
        assert len({value, kind(1, 2, (), ""), kind(2, 0, ())}) == 2


def test_hash_follows_dataclass_rules() -> None:
    for kind in pair():
        assert kind.__hash__ is None  # eq without frozen: unhashable
    for kind in pair(eq=False):
        value = kind(1)
        assert value != kind(1)
        assert value == value
        assert "__eq__" not in vars(kind)
        assert "__hash__" not in vars(kind)


def test_record_keeps_methods_written_in_the_class() -> None:
    @record(frozen=True, eq=False, repr=False)
    class Base:
        """A base with its own equality."""

        a: int = 0

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Base)

        __hash__ = None  # type: ignore[assignment]

        def __repr__(self) -> str:
            return "base"

    @record(frozen=True, eq=False, repr=False)
    class Child(Base):
        """A child: inherits them."""

        b: int = 0

    assert Child(1, 2) == Base(3)
    assert repr(Child()) == "base"
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b"]
    assert Child(1, 2).b == 2


def test_a_frozen_model_class_is_a_record() -> None:
    """The model's classes are made by `record`, and still frozen at run time."""
    from little_loops.model.loop import Evaluate, Pos, State

    state = State("a", pos=Pos(2, 3), evaluate=Evaluate("exit_code"))
    assert State.__init__.__module__ != "dataclasses"
    assert "_record_key" in vars(State)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.name = "b"  # type: ignore[misc]
    assert state == State("a", pos=Pos(2, 3), evaluate=Evaluate("exit_code"))
    assert hash(Pos(2, 3)) == hash(Pos(2, 3))
    assert repr(Pos(2, 3)) == "Pos(line=2, col=3)"


def _point_class() -> type:
    @record(frozen=True)
    class Point:
        """A point."""

        x: int
        y: int = 0

    return Point


def test_compiled_inits_are_kept_between_processes(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`use_code_cache`: what one process compiled, the next reads (records.py)."""
    import marshal
    import sys

    from little_loops.model import records

    kept = tmp_path / "cache" / "inits"
    monkeypatch.setattr(records, "_SHIPPED", [{}])  # (the package's own are not compiled)
    monkeypatch.setattr(records, "_CODE", {})
    monkeypatch.setattr(records, "_NEW", [])
    monkeypatch.setattr(records, "_CODE_FILE", [])
    monkeypatch.setattr("atexit.register", lambda f: None)
    records.use_code_cache(str(kept))  # nothing there yet
    assert _point_class()(1, 2).y == 2
    assert len(records._NEW) == 1
    records._keep_code()  # what atexit does
    assert marshal.loads(kept.read_bytes())[""] == sys.version
    # The next process: nothing compiled.
    monkeypatch.setattr(records, "_CODE", {})
    monkeypatch.setattr(records, "_CODE_FILE", [])
    records.use_code_cache(str(kept))
    assert _point_class()(3).x == 3
    assert records._NEW == []
    before = kept.stat().st_mtime_ns
    records._keep_code()
    assert kept.stat().st_mtime_ns == before  # nothing new: not written


@pytest.mark.parametrize(
    "content",
    [b"", b"junk", b"\xfb\x00", "marshal:other-python", "marshal:not-code"],
)
def test_a_code_cache_that_is_not_ours_is_ignored(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, content: bytes | str
) -> None:
    import marshal
    import sys

    from little_loops.model import records

    kept = tmp_path / "inits"
    if content == "marshal:other-python":
        content = marshal.dumps({"": "2.7", "def __init__(self): pass\n": compile("", "", "exec")})
    elif content == "marshal:not-code":
        content = marshal.dumps({"": sys.version, "def __init__(self, x):\n": 42})
    assert isinstance(content, bytes)
    kept.write_bytes(content)
    monkeypatch.setattr(records, "_SHIPPED", [{}])
    monkeypatch.setattr(records, "_CODE", {})
    monkeypatch.setattr(records, "_NEW", [])
    monkeypatch.setattr(records, "_CODE_FILE", [])
    monkeypatch.setattr("atexit.register", lambda f: None)
    records.use_code_cache(str(kept))
    assert records._CODE == {}
    point = _point_class()
    assert point(1, 2) == point(1, 2)
    assert records._NEW  # compiled here


def test_the_shipped_inits_are_fresh() -> None:
    """model/_inits.py holds the `__init__` of every record of the package (gen_inits.py)."""
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(repo / "scripts"))
    from gen_inits import OUT, render, sources

    assert OUT.read_text(encoding="utf-8") == render(sources()), (
        "little_loops/model/_inits.py is stale: run python scripts/gen_inits.py"
    )


def test_a_package_record_takes_its_shipped_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing compiled: the `__init__` is the shipped one's code, with this class's defaults."""
    from little_loops.model import _inits, records

    made: list[str] = []
    monkeypatch.setattr(records, "_NEW", made)
    monkeypatch.setattr(records, "_CODE", {})

    @record(frozen=True)
    class Spot:  # the fields of model/loop.py's Pos, other defaults
        line: int = 7
        col: int = 9

    assert Spot() == Spot(7, 9)
    assert Spot(col=5, line=2).col == 5
    assert made == []
    assert Spot.__init__.__code__.co_filename == _inits.__file__
    assert Spot.__init__.__qualname__.endswith("Spot.__init__")
    assert Spot.__init__.__defaults__ == (7, 9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Spot().line = 3  # type: ignore[misc]
