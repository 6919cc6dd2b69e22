"""Write the "Defaults" table of docs/loop-reference.md from the schema's `default` keywords.

Run: python scripts/gen_defaults.py   (tests/load/test_schema.py fails until the table is fresh)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parent.parent / "docs" / "loop-reference.md"
START = "<!-- defaults: made by scripts/gen_defaults.py from the schema; do not edit -->"
END = "<!-- defaults: end -->"

_WHERE = {
    "loop": "top level",
    "state": "a state",
    "retry": "a state's `retry`",
    "llm": "the loop's `llm`",
}


def _show(value: Any) -> str:
    if isinstance(value, str) and " " in value:
        return f'"{value}"'
    return f"`{json.dumps(list(value) if isinstance(value, tuple) else value)}`".replace('"', "")


def table() -> str:
    """The table, between its markers."""
    from little_loops.load.defaults import (
        block_names,
        defaults,
    )

    rows = [START, "", "| where | key | default |", "|---|---|---|"]
    for block in block_names():
        where = _WHERE.get(block, f"evaluator `{block}`")
        rows += [
            f"| {where} | `{key}` | {_show(value)} |" for key, value in defaults(block).items()
        ]
    return "\n".join([*rows, "", END])


def render(text: str) -> str:
    """`text` (the doc) with its table replaced by a fresh one."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return head + table() + tail


if __name__ == "__main__":
    sys.path.insert(0, str(DOC.parent.parent))
    DOC.write_text(render(DOC.read_text()))
    print(f"wrote the defaults table of {DOC}")
