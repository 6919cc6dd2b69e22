"""What every benchmark script shares: the machine line, writing its section of the docs, and
counting a process's instructions."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
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


def instructions(
    argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> int | None:
    """The instructions one run of `argv` executes (valgrind's callgrind, the process alone),
    which the machine's load does not move; None without valgrind or without a count."""
    if shutil.which("valgrind") is None:
        return None
    err = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    ).stderr
    found = re.search(r"Collected : (\d+)", err)
    return int(found.group(1)) if found else None
