"""Print a pip constraints file that holds each dependency at the lower bound pyproject.toml gives.

The `minimums` session of noxfile.py installs `.[test]` through it, so that the suite runs on the
oldest releases this project says it supports. Packages named without a lower bound (the type
stubs) and everything they pull in are left free: pip takes their newest releases.

Run: python scripts/minimums.py > /tmp/minimums.txt
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _array(text: str, key: str) -> list[str]:
    """The strings of the TOML array `key = [...]`, comments and all on their own lines."""
    match = re.search(rf"^{re.escape(key)} = \[\n(.*?)^\]", text, re.M | re.S)
    if match is None:
        raise SystemExit(f"{PYPROJECT.name}: no '{key} = [' array")
    return re.findall(r'^\s*"([^"]+)"', match.group(1), re.M)


def requirements(text: str, extras: tuple[str, ...] = ("test",)) -> list[Requirement]:
    """The project's dependencies and those of `extras`, as written in pyproject.toml."""
    found = _array(text, "dependencies")
    for extra in extras:
        found += _array(text, extra)
    return [Requirement(line) for line in found]


def lowest(req: Requirement) -> str | None:
    """`name==X` for a `>=X` bound, or None when the requirement gives no lower bound."""
    bounds = [spec.version for spec in req.specifier if spec.operator in (">=", "==", "~=")]
    return f"{req.name}=={bounds[0]}" if bounds else None


def constraints(text: str) -> list[str]:
    pins = {pin for req in requirements(text) if (pin := lowest(req)) is not None}
    return sorted(pins, key=str.lower)


def main() -> int:
    print("# Lowest versions from pyproject.toml's bounds (scripts/minimums.py)")
    for line in constraints(PYPROJECT.read_text(encoding="utf-8")):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
