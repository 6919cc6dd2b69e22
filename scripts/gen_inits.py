"""Write little_loops/model/_inits.py: the `__init__` of every record of the package.

`record` (little_loops/model/records.py) writes each record's `__init__` as source text and
compiles it the first time the class is used; compiling is most of what a record costs a run.
This script finds every record class defined at the top of a module of the package (or in a
class there), and writes each distinct source once, inside a function that returns it, so the
package's `.pyc` holds them compiled: records.py `_init` takes them by their source text.

Run: python scripts/gen_inits.py   (tests/model/test_records.py fails until the copy is fresh)
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import little_loops
from little_loops.model import records

OUT = Path(__file__).resolve().parent.parent / "little_loops" / "model" / "_inits.py"

HEAD = '''"""The `__init__` of every record of the package, by its source text: made by
scripts/gen_inits.py (see little_loops/model/records.py `_init`); do not edit. Each function
returns the `__init__` it defines, reading its defaults from the globals it is given."""

# (the names these functions read are the globals records.py gives them)
'''


def record_classes() -> list[type]:
    """Every record class of the package a module or a class of it holds, in a stable order."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(little_loops.__path__, "little_loops."):
        if info.name == "little_loops.__main__" or info.name.endswith("._inits"):
            continue
        module = importlib.import_module(info.name)
        todo = [v for v in vars(module).values() if isinstance(v, type)]
        while todo:
            cls = todo.pop()
            if cls.__module__ != info.name:
                continue
            todo.extend(v for v in vars(cls).values() if isinstance(v, type))
            if "__record_fields__" in vars(cls) and _has_made_init(cls):
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [found[name] for name in sorted(found)]


def _has_made_init(cls: type) -> bool:
    made = vars(cls).get("__init__")
    return isinstance(made, records._LazyInit) or (
        made is not None and made.__qualname__ == f"{cls.__qualname__}.__init__"
    )


def sources() -> list[str]:
    """The distinct `__init__` sources of the package's records, sorted."""
    out = set()
    for cls in record_classes():
        frozen = cls.__setattr__ is records._refuse_set  # type: ignore[comparison-overlap]
        fields = tuple(cls.__record_fields__.values())  # type: ignore[attr-defined]
        out.add(records.init_source(cls, fields, frozen)[0])
    return sorted(out)


def render(texts: list[str]) -> str:
    lines = [HEAD, "", "INITS = {}", ""]
    for number, text in enumerate(texts):
        body = "".join(f"    {line}\n" for line in text.splitlines())
        lines.append(f"\ndef _{number}():\n{body}    return __init__\n")
        lines.append(f"INITS[{text!r}] = _{number}\n")
    return "\n".join(lines)


if __name__ == "__main__":
    OUT.write_text(render(sources()), encoding="utf-8")
    print(f"wrote {OUT}")
