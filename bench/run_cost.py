"""`ll run`'s fixed CPU cost: a two-state loop (one `true`, one terminal), each run a fresh process.

    python bench/run_cost.py [--repeat 15] [--install [VENV]] [--importtime N] [--instructions]

The figure is the minimum CPU time (user + system of the `ll` process and the children it
waited for, from `wait4`) over the repeats: the least moved by other work on a shared machine.
Beside it: `python -c pass` (the interpreter alone) and the import of `little_loops.record.events`
alone (the event classes).

Two installs are measured: the Python running this script (in the development virtualenv that
is an editable install, whose path finder runs in every process) and, with `--install`, a
regular install as users have it: `pip install .` (with constraints/test.txt) into VENV (default
a temporary virtualenv, deleted afterwards; an existing VENV is reused and the package
reinstalled into it), run through its `ll` script. Bytecode is written and warmed first
(PYTHONDONTWRITEBYTECODE is removed from the children's environment), as users' runs have it.
`--importtime N` also prints the N modules of largest own import time (`-X importtime`, the
minimum over the repeats) of `ll run` in the last install measured. The figures are quoted by
hand in docs/performance.md ("Start-up of `ll run`").

`ll run` keeps two caches under `$XDG_CACHE_HOME/little-loops` (load/source.py's parse cache,
model/records.py's compiled `__init__`s): the runs measured here have them, as every run of a
file after its first does, in a cache directory of their own (a temporary one). The row
"first run" is measured with the caches out of reach (XDG_CACHE_HOME names a file), as the
first run of a file, or of a new version of ll, is. `--instructions` adds the instructions
each command executes (valgrind's callgrind, the `ll` process alone): a count that the other
work of a shared machine does not move, unlike CPU time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import instructions, machine  # noqa: E402

TARGET_S = 0.1
LOOP = "name: two\ninitial: a\nstates:\n  a: {action: 'true', next: b}\n  b: {terminal: true}\n"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cpu(argv: list[str], cwd: Path, repeat: int, env: dict[str, str] | None = None) -> float:
    env = env or ENV
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)  # warm the .pyc
    best = float("inf")
    for _ in range(repeat):
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _, _, usage = os.wait4(proc.pid, 0)
        best = min(best, usage.ru_utime + usage.ru_stime)
    return best


def millions(argv: list[str], cwd: Path, env: dict[str, str] | None) -> float | None:
    """Millions of instructions the process executes (`_common.instructions`)."""
    counted = instructions(argv, cwd=cwd, env=env or ENV)
    return None if counted is None else counted / 1e6


def importtime(py: str, ll: list[str], cwd: Path, repeat: int, top: int) -> list[str]:
    """The `top` modules of largest own import time of `ll run`, minimum over `repeat` runs."""
    best: dict[str, int] = {}
    for _ in range(repeat):
        err = subprocess.run(
            [py, "-X", "importtime", *ll[1:], "run", "-q", "two.yaml"],  # ll[0] is py
            cwd=cwd,
            env=ENV,
            capture_output=True,
            text=True,
            check=False,
        ).stderr
        for line in err.splitlines():
            if not line.startswith("import time:") or "[us]" in line:
                continue
            own, _, shown = line.removeprefix("import time:").split("|", 2)
            name = shown.strip()
            best[name] = min(best.get(name, 1 << 60), int(own))
    total = sum(best.values())
    lines = [f"all {len(best)} modules: {total / 1000:.1f} ms"]
    for module, micros in sorted(best.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{micros / 1000:6.1f} ms  {module}")
    return lines


def regular_install(venv: Path) -> Path:
    """`pip install .` (not editable) into `venv`; its Python."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # A reused virtualenv keeps its dependencies; the package itself is built afresh.
    subprocess.run([*pip, "-c", str(REPO / "constraints" / "test.txt"), str(REPO)], check=True)
    subprocess.run([*pip, "--no-deps", "--force-reinstall", str(REPO)], check=True)
    build = REPO / "build"
    if build.is_dir():
        shutil.rmtree(build)  # what pip leaves behind in the tree
    return py


def measure(
    py: str, ll: list[str], where: Path, repeat: int, what: str, count: bool
) -> list[tuple[str, float, str, float | None]]:
    cold = {**ENV, "XDG_CACHE_HOME": str(where / "two.yaml")}  # a file: no cache there
    commands: list[tuple[str, list[str], str, dict[str, str] | None]] = [
        (f"`python -c pass` ({what})", [py, "-c", "pass"], "", None),
        (
            f"`python -c 'import little_loops.record.events'` ({what})",
            [py, "-c", "import little_loops.record.events"],
            "",
            None,
        ),
        (f"`ll run -q two.yaml` ({what})", [*ll, "run", "-q", "two.yaml"], "ll", None),
        (
            f"`ll run -q two.yaml`, first run: no caches ({what})",
            [*ll, "run", "-q", "two.yaml"],
            "ll",
            cold,
        ),
    ]
    return [
        (
            label,
            cpu(argv, where, repeat, env),
            kind,
            millions(argv, where, env) if count else None,
        )
        for label, argv, kind, env in commands
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--install",
        nargs="?",
        const="",
        metavar="VENV",
        help="also measure a regular install (pip install .) in VENV (default: a temporary one)",
    )
    parser.add_argument("--importtime", type=int, default=0, metavar="N")
    parser.add_argument("--instructions", action="store_true", help="count them (valgrind)")
    args = parser.parse_args()
    dev = sys.executable
    with tempfile.TemporaryDirectory(prefix=".bench-run-cost-", dir=".") as tmp:
        where = Path(tmp).resolve()
        (where / "two.yaml").write_text(LOOP)
        ENV["XDG_CACHE_HOME"] = str(where / "cache")  # the caches of these runs alone
        count = args.instructions
        rows = measure(
            dev, [dev, "-m", "little_loops"], where, args.repeat, "development venv", count
        )
        last = (dev, [dev, "-m", "little_loops"])
        if args.install is not None:
            venv = Path(args.install) if args.install else where / "venv"
            py = str(regular_install(venv.resolve()))
            ll = [py, str(Path(py).parent / "ll")]
            rows += measure(py, ll, where, args.repeat, "regular install", count)
            last = (py, ll)
        top = importtime(*last, where, args.repeat, args.importtime) if args.importtime else []
    lines = [
        f"`python bench/run_cost.py --repeat {args.repeat}"
        f"{' --install' if args.install is not None else ''}"
        f"{' --instructions' if args.instructions else ''}`: minimum CPU time "
        f"(user + system, `wait4`) of {args.repeat} fresh processes each, bytecode written.",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| command | CPU | minus `python -c pass` | instructions | target |",
        "|---|---|---|---|---|",
    ]
    floor = 0.0
    for label, value, kind, ir in rows:
        if label.startswith("`python -c pass`"):
            floor = value
        target = ""
        if kind == "ll":
            whole = "ok" if value <= TARGET_S else "missed"
            extra = "ok" if value - floor <= TARGET_S else "missed"
            target = f"<= {TARGET_S} s: whole process {whole}, minus python {extra}"
        counted = f"{ir:.0f} M" if ir is not None else "-"
        lines.append(
            f"| {label} | {value * 1000:.0f} ms | +{(value - floor) * 1000:.0f} ms | {counted} "
            f"| {target} |"
        )
    body = "\n".join(lines) + "\n"
    print(body)
    if top:
        what = "regular install" if args.install is not None else "development venv"
        print(f"`-X importtime` of `ll run -q two.yaml` ({what}), own time:")
        print("\n".join(top))


if __name__ == "__main__":
    main()
