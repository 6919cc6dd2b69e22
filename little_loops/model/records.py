"""`record`: a dataclass decorator that is cheaper to define, for the records every `ll run` loads.

`dataclasses.dataclass` generates and compiles each method of each class at import: for a
frozen class `__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__` and `__delattr__`,
six compilations; and importing `dataclasses` imports `inspect` (with `ast`, `dis`,
`tokenize`, `linecache`), about a tenth of `ll run`'s start-up on its own (docs/performance.md,
"Start-up of `ll run`"). `record` takes the same options and gives the same behaviour, for the
options this package uses, without importing `dataclasses`: it collects the fields itself,
compiles `__init__` the first time the class is used (most of the event classes never are in
a run), and shares one `__eq__`, `__hash__`, `__repr__`, `__setattr__` and `__delattr__`
between all classes. `field`, `fields` and `replace` are this module's, for records; to the
type checker all four are the `dataclasses` ones.

`dataclasses.fields`, `replace`, `asdict` and `is_dataclass` still work on a record: its
`__dataclass_fields__` is made, from `dataclasses`, the first time something reads it (only
code that has imported `dataclasses` does).

Differences from `dataclass`, none of which this package relies on: a frozen record refuses
every attribute assignment (not only to its fields on a subclass), `__dataclass_params__` says
`frozen=False`, and `__repr__` does not guard against a record that contains itself.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from operator import attrgetter
from types import CodeType, FunctionType, MappingProxyType

__all__ = ["MISSING", "Field", "field", "fields", "record", "replace"]


class _Missing:
    """No default (dataclasses.MISSING, for a record's own fields)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_NO_METADATA: Mapping[Any, Any] = MappingProxyType({})


class Field:
    """One field of a record: what `dataclasses.Field` says of it, for the options used here."""

    __slots__ = (
        "compare",
        "default",
        "default_factory",
        "hash",
        "init",
        "kw_only",
        "metadata",
        "name",
        "repr",
        "type",
    )

    def __init__(
        self,
        default: Any,
        default_factory: Any,
        init: bool,
        repr: bool,
        hash: bool | None,
        compare: bool,
        metadata: Mapping[Any, Any] | None,
        kw_only: Any,
    ) -> None:
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare
        self.metadata = _NO_METADATA if metadata is None else MappingProxyType(dict(metadata))
        self.kw_only = kw_only

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, type={self.type!r}, default={self.default!r})"


TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from dataclasses import dataclass as record
    from dataclasses import field, fields, replace
    from typing import Any
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

    def field(
        *,
        default: Any = MISSING,
        default_factory: Any = MISSING,
        init: bool = True,
        repr: bool = True,
        hash: bool | None = None,
        compare: bool = True,
        metadata: Mapping[Any, Any] | None = None,
        kw_only: Any = MISSING,
    ) -> Any:
        """`dataclasses.field`, for a record."""
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        return Field(default, default_factory, init, repr, hash, compare, metadata, kw_only)

    def fields(class_or_instance: Any) -> tuple[Field, ...]:
        """The fields of a record (or `dataclasses.fields` of a dataclass)."""
        found = getattr(class_or_instance, "__record_fields__", None)
        if found is None:
            import dataclasses

            return dataclasses.fields(class_or_instance)
        return tuple(found.values())

    def replace(obj: Any, /, **changes: Any) -> Any:
        """A copy of a record with `changes` (or `dataclasses.replace` of a dataclass)."""
        found = getattr(obj.__class__, "__record_fields__", None)
        if found is None:
            import dataclasses

            return dataclasses.replace(obj, **changes)
        for f in found.values():
            if not f.init:
                if f.name in changes:
                    raise ValueError(
                        f"field {f.name} is declared with init=False, it cannot be specified "
                        "with replace()"
                    )
                continue
            if f.name not in changes:
                changes[f.name] = getattr(obj, f.name)
        return obj.__class__(**changes)


def _make(cls: type, *, init: bool, repr: bool, eq: bool, frozen: bool, kw_only: bool) -> type:
    own = cls.__dict__
    # What dataclass would count as a `__hash__` written in the class body (one that Python
    # set to None because the body defines `__eq__` is not).
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    found = _collect(cls, kw_only)
    if found is None:  # annotations that are not strings, or a dataclass base: dataclass itself
        import dataclasses

        made: type = dataclasses.dataclass(
            init=init, repr=repr, eq=eq, frozen=frozen, kw_only=kw_only
        )(cls)
        return made
    all_fields = tuple(found.values())
    if not cls.__doc__:  # (dataclass calls inspect.signature for it: slow the first time)
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in all_fields if f.init)})"
    if init and "__init__" not in own:
        cls.__init__ = _LazyInit(cls, all_fields, frozen)  # type: ignore[misc]
    if repr and "__repr__" not in own:
        cls._record_shown = tuple(f.name for f in all_fields if f.repr)  # type: ignore[attr-defined]
        cls.__repr__ = _repr  # type: ignore[assignment,method-assign]
    if eq:
        compared = tuple(f.name for f in all_fields if f.compare)
        cls._record_key = _key(compared)  # type: ignore[attr-defined]
        if "__eq__" not in own:
            cls.__eq__ = _eq  # type: ignore[assignment,method-assign]
        if not explicit_hash:
            if frozen:
                hashed = tuple(
                    f.name for f in all_fields if (f.compare if f.hash is None else f.hash)
                )
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


def _collect(cls: type, kw_only: bool) -> dict[str, Field] | None:
    """The fields of `cls` (its bases' first), set on it as `__record_fields__`; None for a
    class `record` leaves to dataclass. The class's annotations are strings (every module here
    has `from __future__ import annotations`); `ClassVar` ones are not fields."""
    own = cls.__dict__
    notes = own.get("__annotations__", {})
    if any(not isinstance(t, str) for t in notes.values()):
        return None
    found: dict[str, Field] = {}
    for base in cls.__mro__[-1:0:-1]:
        inherited = base.__dict__.get("__record_fields__")
        if inherited is not None:
            found.update(inherited)
        elif "__dataclass_fields__" in base.__dict__:
            return None
    for name, kind in notes.items():
        if kind.startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = _own_field(own.get(name, MISSING))
        if isinstance(value, Field):
            f = value
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        else:
            if value is not MISSING and value.__class__.__hash__ is None:
                raise ValueError(f"mutable default {type(value)} for field {name} is not allowed")
            f = Field(value, MISSING, True, True, None, True, None, MISSING)
        f.name = name
        f.type = kind
        if f.kw_only is MISSING:
            f.kw_only = kw_only
        found[name] = f
    cls.__record_fields__ = found  # type: ignore[attr-defined]
    cls.__dataclass_fields__ = _AsDataclass(cls, "__dataclass_fields__")  # type: ignore[attr-defined]
    cls.__dataclass_params__ = _AsDataclass(cls, "__dataclass_params__")  # type: ignore[attr-defined]
    matched = tuple(f.name for f in found.values() if f.init and not f.kw_only)
    setattr(cls, "__match_args__", matched)  # noqa: B010 (mypy: a class attribute it owns)
    return found


def _own_field(value: Any) -> Any:
    """A `dataclasses.field(...)` written in a record's body as this module's `Field`."""
    dataclasses = sys.modules.get("dataclasses")  # (not imported: not one of its fields)
    if dataclasses is None or not isinstance(value, dataclasses.Field):
        return value
    missing = dataclasses.MISSING
    return Field(
        MISSING if value.default is missing else value.default,
        MISSING if value.default_factory is missing else value.default_factory,
        value.init,
        value.repr,
        value.hash,
        value.compare,
        value.metadata or None,
        MISSING if value.kw_only is missing else value.kw_only,
    )


class _AsDataclass:
    """`__dataclass_fields__` and `__dataclass_params__` of a record, made (with `dataclasses`)
    the first time they are read: by `dataclasses.fields`, `replace`, `asdict`, `is_dataclass`,
    or a dataclass deriving from the record."""

    def __init__(self, cls: type, name: str) -> None:
        self.cls = cls
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        import dataclasses

        cls = self.cls
        made: dict[str, Any] = {}
        for f in cls.__record_fields__.values():  # type: ignore[attr-defined]
            real: Any = dataclasses.field(
                default=dataclasses.MISSING if f.default is MISSING else f.default,
                default_factory=(
                    dataclasses.MISSING if f.default_factory is MISSING else f.default_factory
                ),
                init=f.init,
                repr=f.repr,
                hash=f.hash,
                compare=f.compare,
                metadata=dict(f.metadata) or None,
                kw_only=f.kw_only,
            )
            real.name = f.name
            real.type = f.type
            real._field_type = dataclasses._FIELD  # type: ignore[attr-defined]
            made[f.name] = real
        params = dataclasses.dataclass(init=False, repr=False, eq=False)(
            type("_Params", (), {"__doc__": "-"})
        ).__dataclass_params__  # type: ignore[attr-defined]
        type.__setattr__(cls, "__dataclass_fields__", made)
        type.__setattr__(cls, "__dataclass_params__", params)
        return cls.__dict__[self.name]


class _LazyInit:
    """A record's `__init__` until the class is first used: the first read (making an
    instance, `inspect.signature`, `super().__init__`) compiles the real one and puts it in
    its place."""

    def __init__(self, cls: type, fields: tuple[Field, ...], frozen: bool) -> None:
        self.cls = cls
        self.fields = fields
        self.frozen = frozen

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        cls = self.cls
        made: Any = cls.__dict__.get("__init__")
        if made is self:
            made = _init(cls, self.fields, self.frozen)
            type.__setattr__(cls, "__init__", made)
        return made if obj is None else made.__get__(obj, owner)


class _Factory:
    """The default of a parameter whose field has a default_factory."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def init_source(cls: type, fields: tuple[Field, ...], frozen: bool) -> tuple[str, dict[str, Any]]:
    """The source of `__init__` for these fields, as dataclass would write it, and the names
    it reads (defaults, factories). A frozen record's fields go straight into the instance's
    `__dict__` (its `__setattr__` refuses)."""
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
    return source, names


def _init(cls: type, fields: tuple[Field, ...], frozen: bool) -> Any:
    """`__init__` for these fields: shipped compiled (`_inits.py`, for the package's own
    records), kept from an earlier run (the code cache below), or compiled now."""
    source, names = init_source(cls, fields, frozen)
    shipped = _shipped().get(source)
    if shipped is not None:
        made = FunctionType(shipped.__code__, names)()
    else:
        code = _CODE.get(source)
        if code is None:
            code = _CODE[source] = compile(source, "<record __init__>", "exec")
            _NEW.append(source)
        exec(code, names)
        made = names["__init__"]
    made.__qualname__ = f"{cls.__qualname__}.__init__"
    # As dataclass annotates it: what inspect.signature and get_type_hints read.
    made.__annotations__ = {f.name: f.type for f in fields if f.init}
    made.__annotations__["return"] = None
    return made


_SHIPPED: list[dict[str, Any]] = []


def _shipped() -> dict[str, Any]:
    """The package's `__init__`s compiled when it was installed (its `.pyc`): `_inits.py`,
    written by scripts/gen_inits.py from every record of the package, by source text. A first
    run compiles none of them (about 0.8 M instructions each, some thirty a run)."""
    if not _SHIPPED:
        try:
            from little_loops.model._inits import INITS
        except ImportError:  # (scripts/gen_inits.py writing it afresh)
            INITS = {}
        _SHIPPED.append(INITS)
    return _SHIPPED[0]


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
    from dataclasses import FrozenInstanceError  # (an error: imported when there is one)

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delete(self: Any, name: str) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot delete field {name!r}")


# -- compiled `__init__`s kept between processes ---------------------------------------------
#
# Compiling is most of what a record costs the run that first makes one (a tenth of a
# millisecond or more each, some thirty records a run). `ll run` names a file
# (`use_code_cache`, cli/execute.py) where the compiled code of each `__init__` is kept by its
# source text, for this very Python (`sys.version`): the next run reads it instead of
# compiling. A file that cannot be read or written is as if there were none.

_CODE: dict[str, CodeType] = {}
_NEW: list[str] = []  # compiled by this process
_CODE_FILE: list[str] = []
_MAX_KEPT = 2000  # sources kept in the file: the records of a few versions of ll


def use_code_cache(path: str) -> None:
    """Take the compiled `__init__`s in `path`, and write the ones compiled here back at exit."""
    if _CODE_FILE:
        return
    _CODE_FILE.append(path)
    import atexit

    found = load_cache(path)
    if isinstance(found, dict) and found.get("") == sys.version:
        for source, code in found.items():
            if isinstance(source, str) and isinstance(code, CodeType):
                _CODE.setdefault(source, code)
        _NEW[:] = [source for source in _NEW if source not in found]  # (compiled before)
    atexit.register(_keep_code)


def load_cache(path: str) -> object:
    """What `keep_cache` wrote to `path` (in `marshal` form), or None when there is nothing
    this user may trust there (`read_cache_file`) or it cannot be read back."""
    import marshal

    data = read_cache_file(path)
    try:
        return marshal.loads(data) if data is not None else None
    except (ValueError, EOFError, TypeError):
        return None


def keep_cache(path: str, value: Any) -> None:
    """Write `value` to the cache file `path` in `marshal` form, whole or not at all (a temp
    file renamed over it: a process reading it meanwhile sees the old or the new), readable
    only by this user. A value marshal cannot write, or a cache that cannot be written, is
    simply not kept."""
    import marshal

    try:
        blob = marshal.dumps(value)
    except ValueError:  # (a YAML timestamp, for one)
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(tmp, flags, 0o600)
        try:
            os.write(fd, blob)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def read_cache_file(path: str) -> bytes | None:
    """The bytes of a cache file, or None when there is none, or when it is not this user's
    own (another user's, or writable by others: a cache under a shared `XDG_CACHE_HOME` must
    not hand this process code someone else wrote)."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                return None
            return f.read()
    except OSError:
        return None


def cache_dir() -> str | None:
    """Where `ll` keeps what it can make again: `$XDG_CACHE_HOME/little-loops`, by default
    `~/.cache/little-loops` (the parse cache, load/source.py; the code cache above). None
    without a home."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(root):  # no home (expanduser left "~"), or a relative XDG path
        return None
    return os.path.join(root, "little-loops")


def _keep_code() -> None:
    if not _NEW or not _CODE_FILE:
        return
    kept: dict[str, object] = {"": sys.version}
    kept.update(_CODE if len(_CODE) <= _MAX_KEPT else {s: _CODE[s] for s in _NEW})
    keep_cache(_CODE_FILE[0], kept)
    _NEW.clear()
