"""Judge cost from the packaged price table `little_loops/data/prices.json`."""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

_DATE_SUFFIX = re.compile(r"-(?:\d{8}|latest)$")


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    text = resources.files("little_loops").joinpath("data/prices.json").read_text("utf-8")
    models = json.loads(text).get("models", {})
    return models if isinstance(models, dict) else {}


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> tuple[float, bool]:
    """(dollars, known): an unknown model costs 0 and says so."""
    table = _table()
    price = table.get(model) or table.get(_DATE_SUFFIX.sub("", model))
    if not isinstance(price, dict):
        return 0.0, False
    dollars = (
        input_tokens * float(price.get("input", 0)) + output_tokens * float(price.get("output", 0))
    ) / 1_000_000
    return round(dollars, 8), True
