"""Start-up time of `ll`, next to a bare Python in the same run.

    python bench/startup.py [--repeat N] [--write-docs]

Each figure is the median wall time of N runs (default 15), each a fresh process:
`python -c pass` (the floor), `ll --help`, `ll --version`, and `ll validate` on a generated
50-state loop. Targets: `ll --help` <= 0.08 s, `ll validate` (50 states) <= 0.15 s.

Run it with the Python of a regular install, as users have it (an editable install is slower
to start, see the notes it writes):

    python3 -m venv /tmp/llb && /tmp/llb/bin/pip install . && /tmp/llb/bin/python bench/startup.py

`--write-docs` replaces the "## Start-up" section of docs/performance.md (and only that one).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import machine, write_section  # noqa: E402

TARGETS = {"ll --help": 0.08, "ll validate (50 states)": 0.15}


def fifty_state_loop() -> str:
    """A valid loop of 50 states: checks, evaluators of several kinds, a judge, terminals."""
    lines = [
        "name: bench-50",
        "initial: s0",
        "max_iterations: 200",
        "on_error: failed",
        "context:",
        "  src: src/",
        "  limit: 3",
        "states:",
    ]
    kinds = [
        ("ruff check ${context.src}", None),
        ("echo 3", "{type: output_numeric, operator: le, target: '${context.limit}'}"),
        ("echo ok", "{type: output_contains, pattern: '^ok$'}"),
        ("echo '{\"a\": [1]}'", "{type: output_json, path: '.a[0]', operator: eq, target: 1}"),
    ]
    for i in range(47):
        action, evaluate = kinds[i % len(kinds)]
        lines.append(f"  s{i}:")
        lines.append(f"    action: {json.dumps(action)}")
        if evaluate:
            lines.append(f"    evaluate: {evaluate}")
        lines.append(f"    capture: c{i}")
        lines.append(f"    on_success: s{i + 1}" if i < 46 else "    on_success: judge")
        lines.append("    on_failure: failed")
    lines += [
        "  judge:",
        "    action: /ll:review ${captured.c3.output}",
        "    evaluate: {type: llm_structured, prompt: Good?, uncertain_suffix: true}",
        "    route: {success: done, _: failed}",
        "  done: {terminal: true}",
        "  failed: {terminal: true, outcome: failure}",
    ]
    return "\n".join(lines) + "\n"


def median_wall(argv: list[str], repeat: int, env: dict[str, str]) -> float:
    # one warm-up run fills the bytecode cache, as `pip install` does for a real user
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def install() -> str:
    """How little_loops is installed for the Python running this benchmark."""
    import little_loops

    where = Path(little_loops.__file__).resolve()
    kind = "regular (site-packages)" if "site-packages" in where.parts else "editable (source tree)"
    # The kind only: the docs never name a path of the machine.
    return f"{kind}, {'a virtualenv' if sys.prefix != sys.base_prefix else 'the system Python'}"


def measure(repeat: int) -> list[tuple[str, float]]:
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        loop = Path(tmp) / "bench-50.yaml"
        loop.write_text(fifty_state_loop())
        check = subprocess.run(
            [py, "-m", "little_loops", "validate", str(loop)], capture_output=True, text=True
        )
        if check.returncode != 0:
            raise SystemExit(f"the generated loop does not validate:\n{check.stdout}")
        # `python -m little_loops` is how the tests run `ll`; the console script is the same
        # module behind a tiny wrapper, so it is what users see.
        ll = [str(Path(py).with_name("ll"))]
        if not Path(ll[0]).exists():
            ll = [py, "-m", "little_loops"]
        cases = [
            ("python -c pass", [py, "-c", "pass"]),
            ("ll --help", [*ll, "--help"]),
            ("ll --version", [*ll, "--version"]),
            ("ll validate (50 states)", [*ll, "validate", str(loop)]),
        ]
        # Bytecode caches on, kept out of the source tree.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        return [(name, median_wall(argv, repeat, env)) for name, argv in cases]


NOTES = """\
How the package is installed matters: an editable install (`pip install -e`, as the test
command does) runs the package from the checkout (built with setuptools, as it was until
issue 21, through a path finder that `site` ran in every process), and a virtualenv holding the
test tools loads more `.pth` files; both slowed even `python -c pass` (about 0.048 s against
0.014 s here, with setuptools). Users get a regular install, so that is what the table
measures. Where `ll validate` spends its time
(`python -X importtime`, warm caches): the interpreter and `site`, click about 35 ms
(the whole of `ll --help`'s excess over the floor is click and the CLI module), PyYAML about
20 ms (7 ms of it compiling one Unicode regex in `yaml.reader`), `little_loops.model.loop`'s frozen
dataclasses about 13 ms, the checks and their imports about 10 ms, and the validation of the
50 states about 15 ms. `jsonschema` is not imported at all: importing it alone costs about
0.13 s here, more than the whole budget, so `little_loops/load/schema.py` checks documents with a
small interpreter of the keywords `loop.schema.json` uses, and the tests (`test_schema.py`,
`test_fuzz_loader.py`) prove it agrees with jsonschema's Draft 2020-12 validator. `hashlib`
(OpenSSL) is skipped too: `ll validate` does not need the file's digest.
"""


def report(results: list[tuple[str, float]], repeat: int) -> str:
    floor = results[0][1]
    rows = [
        "| command | median wall | minus `python -c pass` | target |",
        "|---|---|---|---|",
    ]
    for name, seconds in results:
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            verdict = f"<= {target:.2f} s: {'ok' if seconds <= target else 'MISSED'}"
        rows.append(f"| `{name}` | {seconds:.3f} s | {seconds - floor:+.3f} s | {verdict} |")
    return (
        f"`python bench/startup.py --repeat {repeat} --write-docs`: median wall time of "
        f"{repeat} runs of each command, each a fresh process, all in one invocation, with "
        "warm bytecode caches (as after `pip install`; the cache goes to a temporary "
        "`PYTHONPYCACHEPREFIX`).\n\n"
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.\n\n"
        f"Install: {install()}.\n\n" + "\n".join(rows) + "\n\n" + NOTES
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per command (median)")
    parser.add_argument("--write-docs", action="store_true", help="update docs/performance.md")
    args = parser.parse_args()
    body = report(measure(args.repeat), args.repeat)
    print(body)
    if args.write_docs:
        write_section("Start-up", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
