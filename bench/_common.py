"""What every benchmark script shares: the machine line and writing its section of the docs."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


def machine() -> str:
    """`2 CPUs (nproc), <CPU model>, Python 3.11.7, Linux <release>`."""
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} CPUs (nproc), {cpu}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def write_section(heading: str, body: str) -> None:
    """Replace (or add) `## heading` in docs/performance.md, leaving other sections alone."""
    text = DOC.read_text() if DOC.exists() else "# Performance\n"
    section = f"## {heading}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(heading)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section + "\n", text, count=1).rstrip("\n") + "\n"
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
