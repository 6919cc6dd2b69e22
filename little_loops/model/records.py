"""`record`: a dataclass decorator that is cheaper to define, for the records every `ll run` loads.

`dataclasses.dataclass` generates and compiles each method of each class at import: for a
frozen class `__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__` and `__delattr__`,
six compilations; the model's classes alone cost about a tenth of `ll run`'s start-up that way
(docs/performance.md, "Start-up of `ll run`"). `record` takes the same options and gives the
same behaviour, for the options this package uses, with one compilation per class: it lets
`dataclass` collect the fields (so `dataclasses.fields`, `replace` and `asdict` work as ever)
without generating methods, compiles `__init__` itself, and shares one `__eq__`, `__hash__`,
`__repr__`, `__setattr__` and `__delattr__` between all classes. To the type checker it is
`dataclasses.dataclass` itself.

Differences from `dataclass`, none of which this package relies on: a frozen record refuses
every attribute assignment (not only to its fields on a subclass), `__dataclass_params__` says
`frozen=False`, and `__repr__` does not guard against a record that contains itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, FrozenInstanceError
from operator import attrgetter
from typing import TYPE_CHECKING, Any

__all__ = ["record"]

if TYPE_CHECKING:
    from dataclasses import dataclass as record
else:

    def record(
        cls: type | None = None,
        /,
        *,
        init: bool = True,
        repr: bool = True,
        eq: bool = True,
        frozen: bool = False,
        kw_only: bool = False,
    ) -> Any:
        """`@record`, `@record(frozen=True)`, ...: `dataclass` with these options."""

        def wrap(cls: type) -> type:
            return _make(cls, init=init, repr=repr, eq=eq, frozen=frozen, kw_only=kw_only)

        return wrap if cls is None else wrap(cls)


def _make(cls: type, *, init: bool, repr: bool, eq: bool, frozen: bool, kw_only: bool) -> type:
    own = cls.__dict__
    # What dataclass would count as a `__hash__` written in the class body (one that Python
    # set to None because the body defines `__eq__` is not).
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    fields = _collect(cls, kw_only)
    if not cls.__doc__:  # (dataclass calls inspect.signature for it: slow the first time)
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in fields if f.init)})"
    if init and "__init__" not in own:
        cls.__init__ = _init(cls, fields, frozen)  # type: ignore[misc]
    if repr and "__repr__" not in own:
        cls._record_shown = tuple(f.name for f in fields if f.repr)  # type: ignore[attr-defined]
        cls.__repr__ = _repr  # type: ignore[assignment,method-assign]
    if eq:
        cls._record_key = _key(tuple(f.name for f in fields if f.compare))  # type: ignore[attr-defined]
        if "__eq__" not in own:
            cls.__eq__ = _eq  # type: ignore[assignment,method-assign]
        if not explicit_hash:
            if frozen:
                hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
                cls._record_hash = _key(hashed)  # type: ignore[attr-defined]
                cls.__hash__ = _hash  # type: ignore[assignment]
            else:
                cls.__hash__ = None  # type: ignore[assignment]
    if frozen:
        if "__setattr__" in own or "__delattr__" in own:
            raise TypeError(f"{cls.__name__}: a frozen record cannot define __setattr__")
        cls.__setattr__ = _refuse_set  # type: ignore[method-assign,assignment]
        cls.__delattr__ = _refuse_delete  # type: ignore[method-assign,assignment]
    return cls


# The marks dataclass gives its fields and classes (dataclasses.fields keeps the fields whose
# `_field_type` is `_FIELD`); a Python without them has `record` go through dataclass itself.
_FIELD = getattr(dataclasses, "_FIELD", None)
_PARAMS = getattr(
    dataclasses.dataclass(init=False, repr=False, eq=False)(type("_Params", (), {"__doc__": "-"})),
    "__dataclass_params__",
    None,
)


def _collect(cls: type, kw_only: bool) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of `cls` (its bases' first), set on it as dataclass sets them: what
    `dataclasses.fields`, `replace` and `asdict` read. The class's annotations are strings
    (every module here has `from __future__ import annotations`); `ClassVar` ones are not
    fields. Done here rather than by dataclass, which costs twice as much per field."""
    own = cls.__dict__
    notes = own.get("__annotations__", {})
    if _FIELD is None or _PARAMS is None or any(not isinstance(t, str) for t in notes.values()):
        made: type = dataclasses.dataclass(init=False, repr=False, eq=False, kw_only=kw_only)(cls)
        return dataclasses.fields(made)
    found: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:
        found.update(getattr(base, "__dataclass_fields__", {}))
    for name, kind in notes.items():
        if kind.startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = own.get(name, MISSING)
        if isinstance(value, dataclasses.Field):
            f = value
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        else:
            if value is not MISSING and value.__class__.__hash__ is None:
                raise ValueError(f"mutable default {type(value)} for field {name} is not allowed")
            f = dataclasses.field(default=value)
        f.name = name
        f.type = kind
        f._field_type = _FIELD  # type: ignore[attr-defined]
        if f.kw_only is MISSING:
            f.kw_only = kw_only
        found[name] = f
    cls.__dataclass_fields__ = found  # type: ignore[attr-defined]
    cls.__dataclass_params__ = _PARAMS  # type: ignore[attr-defined]
    matched = tuple(f.name for f in found.values() if f.init and not f.kw_only)
    setattr(cls, "__match_args__", matched)  # noqa: B010 (mypy: a class attribute it owns)
    return tuple(found.values())


class _Factory:
    """The default of a parameter whose field has a default_factory."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _init(cls: type, fields: tuple[dataclasses.Field[Any], ...], frozen: bool) -> Any:
    """Compile `__init__` for these fields, as dataclass would write it. A frozen record's
    fields go straight into the instance's `__dict__` (its `__setattr__` refuses)."""
    names: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields:
        name = f.name
        value = name
        param = name
        if f.default is not MISSING:
            names[f"_default_{name}"] = f.default
            param = f"{name}=_default_{name}"
        elif f.default_factory is not MISSING:
            names[f"_factory_{name}"] = f.default_factory
            param = f"{name}=_FACTORY"
            value = f"_factory_{name}() if {name} is _FACTORY else {name}"
        if not f.init:
            if f.default is not MISSING:
                value = f"_default_{name}"
            elif f.default_factory is not MISSING:
                value = f"_factory_{name}()"
            else:
                continue
        else:
            (keyword if f.kw_only else positional).append(param)
        body.append(f"    __d[{name!r}] = {value}" if frozen else f"    self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    head = ["    __d = self.__dict__"] if frozen else []
    source = f"def __init__({params}):\n" + "\n".join(head + body or ["    pass"]) + "\n"
    exec(source, names)
    made = names["__init__"]
    made.__qualname__ = f"{cls.__qualname__}.__init__"
    # As dataclass annotates it: what inspect.signature and get_type_hints read.
    made.__annotations__ = {f.name: f.type for f in fields if f.init}
    made.__annotations__["return"] = None
    return made


def _key(names: tuple[str, ...]) -> Any:
    """The tuple of these attributes of an instance (a tuple even for one name, or none)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return lambda self: ()


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    key = self._record_key
    return key(self) == key(other)


def _hash(self: Any) -> int:
    return hash(self._record_hash(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._record_shown)
    return f"{self.__class__.__qualname__}({shown})"


def _refuse_set(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delete(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")
