"""What defining the event classes costs: `little_loops/record/events.py` executed, timed alone.

    python bench/event_classes.py [--before REV] [--repeat 40]

The module's code is compiled once and executed `--repeat` times into fresh module objects;
the figure is the minimum CPU time (`time.process_time`) of one execution: the class
definitions (dataclass processing) and the module's other top-level work, without the imports
it shares with the rest of `ll` (they are cached after the first). With `--before REV` the same
is done for the file as it was at that git revision, alternating with the current one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FILE = "little_loops/record/events.py"


def cost(source: str, name: str, repeat: int) -> float:
    code = compile(source, FILE, "exec")
    best = float("inf")
    for _ in range(repeat):
        module = types.ModuleType(name)
        sys.modules[name] = module  # dataclasses looks the module up by name
        started = time.process_time()
        exec(code, module.__dict__)
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", help="a git revision to compare with")
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    now = (REPO / FILE).read_text(encoding="utf-8")
    old = None
    if args.before:
        old = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{args.before}:{FILE}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    for _ in range(3):
        line = f"now {cost(now, '_bench_events_now', args.repeat) * 1000:.1f} ms"
        if old is not None:
            line += (
                f", at {args.before} {cost(old, '_bench_events_old', args.repeat) * 1000:.1f} ms"
            )
        print(line)


if __name__ == "__main__":
    main()
