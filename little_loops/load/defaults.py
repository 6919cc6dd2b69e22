"""Every default of a loop file, read once from the packaged schema's `default` keywords.

The schema is the one place a default is written: the builder takes its defaults from here,
`ll schema` hands them to editors, and docs/loop-reference.md's table of defaults is generated
from them (scripts/gen_defaults.py). Tests fail when the model's dataclass defaults, the judge's
default prompt or the docs disagree with the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType

from little_loops.load.schema import loop_schema

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

# Blocks of a loop file that have defaults, besides the evaluator types: where their keys are.
_BLOCKS: Mapping[str, tuple[str, ...]] = {
    "loop": ("properties",),
    "state": ("$defs", "state", "properties"),
    "retry": ("$defs", "retry", "properties"),
    "llm": ("$defs", "llm", "properties"),
}
EVALUATE = "evaluate"  # every evaluator type's defaults together (they agree where they meet)


def evaluator_types() -> tuple[str, ...]:
    """The evaluator type names, as the schema lists them."""
    enum = loop_schema()["$defs"]["evaluator"]["properties"]["type"]["enum"]
    return tuple(str(name) for name in enum)


def block_names() -> tuple[str, ...]:
    """Every block `defaults` answers for, in the order the reference docs list them."""
    return (*_BLOCKS, *evaluator_types())


@cache
def defaults(block: str) -> Mapping[str, Any]:
    """Key -> default of one block: "loop", "state", "retry", "llm", an evaluator type, or
    `EVALUATE` (all evaluator types). A list default comes as a tuple, like the model's."""
    if block == EVALUATE:
        merged: dict[str, Any] = {}
        for name in evaluator_types():
            merged.update(defaults(name))
        return MappingProxyType(merged)
    node: Any = loop_schema()
    for part in _BLOCKS.get(block, ("$defs", block, "properties")):
        node = node[part]
    return MappingProxyType(
        {
            key: tuple(prop["default"]) if isinstance(prop["default"], list) else prop["default"]
            for key, prop in node.items()
            if isinstance(prop, Mapping) and "default" in prop
        }
    )
