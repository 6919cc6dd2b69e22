"""Judge cost from the packaged price table `little_loops/data/prices.json`."""

from __future__ import annotations

import functools
import json
import os
import re

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

# A dated or pinned release of a listed model: claude-sonnet-4-5-20250929, gpt-4o-2024-08-06,
# gpt-4-0613, claude-3-5-haiku-latest. Such ids are priced like the listed id they extend.
_RELEASE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)")


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    text = _packaged("data/prices.json")
    models = json.loads(text).get("models", {})
    return models if isinstance(models, dict) else {}


def _packaged(name: str) -> str:
    """A data file of the package: read beside this module in the usual install (importing
    `importlib.resources` costs `ll validate` of a judged loop about 20 M instructions, with
    `typing`), through `importlib.resources` in a zipped or otherwise unusual one."""
    beside = os.path.join(os.path.dirname(os.path.dirname(__file__)), name)
    if os.path.isfile(beside):
        with open(beside, encoding="utf-8") as f:
            return f.read()
    from importlib import resources

    return resources.files("little_loops").joinpath(name).read_text("utf-8")


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> tuple[float, bool]:
    """(dollars, known): an unknown model costs 0 and says so."""
    price = _price(model)
    if not isinstance(price, dict):
        return 0.0, False
    dollars = (
        input_tokens * float(price.get("input", 0)) + output_tokens * float(price.get("output", 0))
    ) / 1_000_000
    return round(dollars, 8), True


def max_output_tokens(model: str) -> int | None:
    """The most output tokens the API takes as `max_tokens` for `model`, when listed."""
    price = _price(model)
    limit = price.get("max_output") if isinstance(price, dict) else None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def _price(model: str) -> Any:
    """The listed id itself, else the longest listed id that `model` extends by a release
    suffix (a date or `-latest`)."""
    table = _table()
    if model in table:
        return table[model]
    best = max(
        (
            key
            for key in table
            if model.startswith(key) and _RELEASE_SUFFIX.fullmatch(model, len(key))
        ),
        key=len,
        default=None,
    )
    return table.get(best) if best is not None else None
