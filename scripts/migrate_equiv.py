"""The `ll migrate` equivalence harness: upstream little-loops files run by both runners.

A scenario is one upstream loop file from the shared corpus (../shared/upstream-loops) and one
scripted answer of the fake `claude` (tests/migrate/equiv/claude, behind its shell fast path
claude.sh): the judge says `yes` (or `no`) to everything and every prompt step prints `done`.
Both runs get the same sandbox: a fresh git repository as the working directory, a PATH of only
the fake `claude`, a `sleep` that returns at once, /usr/bin and /bin (so upstream's `ll-*`
tools and Python package are on neither side), the same context values, and no `backoff` (a
pause between steps changes no path).

    python scripts/migrate_equiv.py record --ll-loop /tmp/upvenv/bin/ll-loop
        runs upstream's `ll-loop` (from a scratch virtualenv holding its repository at commit
        a12b9397d; never vendored) and writes tests/migrate/equiv/expected.json
    python scripts/migrate_equiv.py figures
        converts the corpus with `ll migrate`, runs every scenario with `ll run` and prints
        the figures: files valid after migration, false hand-work notes, scenarios that
        behave the same

A scenario behaves the same when the states visited (the migration's added states left out:
stall checks, classify decisions, generated terminals), the final state and the outcome
(success or not) are equal. When upstream stopped at its step limit, `ll`'s path must begin
with upstream's first STEP_LIMIT states (what its `on_max_steps` did after the harness's limit
is not compared).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "upstream-loops"
EXPECTED = REPO / "tests" / "migrate" / "equiv" / "expected.json"
FAKE_CLAUDE = REPO / "tests" / "migrate" / "equiv" / "claude"
# its fast path, a shell script: the sandbox's `claude`, handing what it does not answer
# itself to the Python fake beside it (`claude-full`)
FAKE_CLAUDE_SH = REPO / "tests" / "migrate" / "equiv" / "claude.sh"
VERDICTS = ("yes", "no")
STEP_LIMIT = 20  # upstream's `-n`: enough for every corpus loop to show its shape
RUN_TIMEOUT = 60
UPSTREAM_COMMIT = "a12b9397d"


def corpus_files(corpus: Path = CORPUS) -> list[Path]:
    return sorted(corpus.glob("*.yaml")) + sorted(corpus.glob("oracles/*.yaml"))


def sandbox(root: Path) -> tuple[Path, dict[str, str]]:
    """A working directory (an empty git repository) and the environment both runners get."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy(FAKE_CLAUDE_SH, bin_dir / "claude")
    (bin_dir / "claude").chmod(0o755)
    shutil.copy(FAKE_CLAUDE, bin_dir / "claude-full")
    (bin_dir / "claude-full").chmod(0o755)
    (bin_dir / "sleep").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    (bin_dir / "sleep").chmod(0o755)
    home = root / "home"
    home.mkdir()
    cwd = root / "work"
    cwd.mkdir()
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "GIT_AUTHOR_NAME": "eq",
        "GIT_AUTHOR_EMAIL": "eq@example.invalid",
        "GIT_COMMITTER_NAME": "eq",
        "GIT_COMMITTER_EMAIL": "eq@example.invalid",
    }
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=cwd, env=env, check=True)
    subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "init"], cwd=cwd, env=env, check=True
    )
    return cwd, env


def read_yaml(path: Path) -> Any:
    """A loop file as PyYAML's safe loader reads it, on libyaml when PyYAML was built with it.

    The harness reads each corpus file about four times a scenario (its context, inputs,
    states and terminals): with PyYAML's pure-Python scanner that was about 10 s of CPU a
    test session; libyaml gives the same documents for every file of the corpus in a
    thirteenth of the time."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {}


def declared_context(path: Path, seen: frozenset[Path] = frozenset()) -> dict[str, Any]:
    """The loop's `context:` merged over the contexts of the files it inherits (`from:`),
    as upstream merges them: the keys that have a value before any input is given."""
    doc = read_yaml(path)
    merged: dict[str, Any] = {}
    base = doc.get("from")
    if isinstance(base, str):  # named from this file's folder or one above (upstream's loops)
        for folder in (path.parent, path.parent.parent):
            found = [c for c in (folder / f"{base}.yaml", folder / base) if c.is_file()]
            if found and found[0].resolve() not in seen:
                merged = declared_context(found[0], seen | {path.resolve()})
                break
    own = doc.get("context")
    if isinstance(own, dict):
        merged.update(own)
    return merged


def _texts(node: Any) -> Iterator[str]:
    """Every string of a loop, less `description:` (prose that may name a key in passing)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            if key != "description":
                yield from _texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _texts(value)


# a value each runner accepts for a required input of a declared type
TYPED_VALUE = {"integer": "1", "number": "1", "boolean": "true"}


def inputs_of(path: Path) -> dict[str, str]:
    """Values for the inputs a loop leaves without a value (the same for both runners):
    `demo`, or `1` / `true` for an input declared as a number or a boolean."""
    import re

    doc = read_yaml(path)
    keys: list[str] = []
    if isinstance(doc.get("input_key"), str):
        keys.append(doc["input_key"])
    if isinstance(doc.get("required_inputs"), list):
        keys += [str(k) for k in doc["required_inputs"]]
    params = doc.get("parameters")
    typed: dict[str, str] = {}
    if isinstance(params, dict):
        for k, v in params.items():
            if isinstance(v, dict) and v.get("required"):
                keys.append(str(k))
                typed[str(k)] = TYPED_VALUE.get(str(v.get("type")), "demo")
    context = declared_context(path)
    for text in _texts(doc):
        for m in re.finditer(r"\$\{context\.([^}.]+)", text):
            raw = m.group(1)
            if ":default=" in raw or raw.endswith("?"):
                continue
            raw = raw.removesuffix(":shell")
            if raw not in context:
                keys.append(raw)
    return {k: typed.get(k, "demo") for k in dict.fromkeys(keys) if k != "run_dir"}


def without_backoff(src: Path, dst: Path) -> None:
    """The file as it is, less a top-level `backoff:` line."""
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    dst.write_text("".join(x for x in lines if not x.startswith("backoff:")), encoding="utf-8")


def copy_tree(src: Path, dst: Path) -> None:
    for path in src.rglob("*.yaml"):
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        without_backoff(path, target)


@dataclass
class Run:
    path: list[str]
    final: str | None
    outcome: str  # success | failure | limit
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "final": self.final, "outcome": self.outcome}


# -- upstream ------------------------------------------------------------------------------


def run_upstream(ll_loop: Path, loops: Path, rel: str, verdict: str) -> Run:
    with tempfile.TemporaryDirectory(prefix="eq-up-") as scratch:
        root = Path(scratch)
        copy_tree(loops, root / "loops")
        cwd, env = sandbox(root)
        env["EQ_VERDICT"] = verdict
        args = [str(ll_loop), "run", str(root / "loops" / rel), "-n", str(STEP_LIMIT), "--no-lock"]
        for key, value in inputs_of(loops / rel).items():
            args += ["--context", f"{key}={value}"]
        try:
            proc = subprocess.run(
                args,
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
            code = proc.returncode
        except subprocess.TimeoutExpired:
            return Run([], None, "timeout", "upstream did not finish")
        events = sorted((root / "loops" / rel).parent.glob(Path(rel).name + "-*.events.jsonl"))
        if not events:
            return Run([], None, "none", f"no events (exit {code}): {proc.stderr[-300:]}")
        path: list[str] = []
        final, ended = None, ""
        depth = 0
        for line in events[-1].read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            kind = event.get("event")
            if kind == "loop_start":
                depth += 1
            if depth == 1 and kind == "state_enter":
                path.append(event["state"])
            if kind == "loop_complete":
                depth -= 1
                if depth == 0:
                    final, ended = event.get("final_state"), event.get("terminated_by", "")
        if ended == "terminal" and final is not None:
            path.append(final)
        outcome = "limit" if ended == "max_steps" else "success" if code == 0 else "failure"
        return Run(path, final, outcome, ended)


def record(ll_loop: Path, corpus: Path, out: Path, only: list[str] | None = None) -> None:
    scenarios = []
    before = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
    if only:
        scenarios = [s for s in before.get("scenarios", []) if s["file"] not in only]
    for file in corpus_files(corpus):
        rel = str(file.relative_to(corpus))
        if only and rel not in only:
            continue
        for verdict in VERDICTS:
            run = run_upstream(ll_loop, corpus, rel, verdict)
            print(f"{rel} {verdict}: {run.outcome} {' > '.join(run.path)} {run.note}", flush=True)
            if run.outcome in ("timeout", "none"):
                continue
            scenarios.append({"file": rel, "verdict": verdict, "upstream": run.as_dict()})
    scenarios.sort(key=lambda s: (s["file"], s["verdict"]))
    data = {
        "how": (
            "Recorded by `python scripts/migrate_equiv.py record --ll-loop "
            "/tmp/upvenv/bin/ll-loop`: upstream's `ll-loop run FILE -n "
            f"{STEP_LIMIT} --no-lock [--context KEY=VALUE]` (VALUE: `demo`, or `1`/`true` "
            "for a required input declared as a number/boolean, for each input the loop and "
            "the files it inherits (`from:`) leave without a value) from a scratch virtualenv "
            "(`python3 -m venv /tmp/upvenv && /tmp/upvenv/bin/pip install "
            "UPSTREAM/scripts`) holding BrennonTWilliams/little-loops at commit "
            f"{UPSTREAM_COMMIT}, on a copy of ../shared/upstream-loops less `backoff:`, in the "
            "sandbox of scripts/migrate_equiv.py (fake claude answering EQ_VERDICT). `path` "
            "is upstream's state_enter events plus the terminal reached; `outcome` is "
            "success (exit 0), failure (exit 1 before the limit) or limit (stopped at -n)."
        ),
        "step_limit": STEP_LIMIT,
        "scenarios": scenarios,
    }
    for key in ("floor", "floor_how", "differ", "rerecorded"):
        if key in before:
            data[key] = before[key]
    if only:
        data["rerecorded"] = sorted({*before.get("rerecorded", []), *only})
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


# -- ll ------------------------------------------------------------------------------------


def migrate_corpus(corpus: Path, out: Path) -> subprocess.CompletedProcess[str]:
    copy_tree(corpus, out / "src")
    files = [str(p) for p in corpus_files(out / "src")]
    return subprocess.run(
        [sys.executable, "-m", "little_loops", "migrate", *files, "--out", str(out / "dst")],
        capture_output=True,
        text=True,
        timeout=600,
    )


# `invoke(args, cwd, env)` runs `ll ARGS` in `cwd` with exactly `env` (nothing else of this
# process's environment) and gives (exit code, stdout, stderr). The default starts a process;
# the test passes one that runs `ll` in its own process (tests/project.py), the same command.
Invoke = Callable[[list[str], Path, dict[str, str]], tuple[int, str, str]]


def ll_in_a_process(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    # this repository on `ll`'s own path only: a step's `python3` must not find our
    # package (upstream's side has no `little_loops` either)
    argv = [
        sys.executable,
        "-c",
        f"import runpy, sys; sys.path.insert(0, {str(REPO)!r}); "
        "runpy.run_module('little_loops', run_name='__main__', alter_sys=True)",
        *args,
    ]
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stdout, proc.stderr


def run_ll(
    migrated: Path, source: Path, verdict: str, limit: int, invoke: Invoke = ll_in_a_process
) -> Run:
    with tempfile.TemporaryDirectory(prefix="eq-ll-") as scratch:
        cwd, env = sandbox(Path(scratch))
        env.update(
            EQ_VERDICT=verdict,
            LL_MODEL="claude://sonnet",
            LL_CLAUDE=str(Path(scratch) / "bin" / "claude"),
        )
        args = [
            "run",
            str(migrated),
            "--json",
            "--no-input",
            "--max-iterations",
            str(limit),
            "--allow-concurrent",
        ]
        for key, value in inputs_of(source).items():
            args += ["--set", f"{key}={value}"]
        try:
            code, stdout, stderr = invoke(args, cwd, env)
        except subprocess.TimeoutExpired:
            return Run([], None, "timeout")
        path: list[str] = []
        final = None
        top = None
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict) or event.get("depth", 0):
                continue
            top = top or event.get("run_id")
            if event.get("run_id") != top:  # a child run's event
                continue
            if event.get("event") == "state_enter" or event.get("type") == "state_enter":
                path.append(str(event.get("state")))
                final = path[-1]
        outcome = {0: "success", 4: "limit"}.get(code, "failure")
        return Run(path, final, outcome, stderr[-400:])


def same(
    up: dict[str, Any], ours: Run, states: set[str], terminals: frozenset[str] = frozenset()
) -> tuple[bool, str]:
    # upstream records a terminal only where the run ends (`maintain` passes through silently)
    mine = [s for i, s in enumerate(ours.path) if s in states]
    mine = [s for i, s in enumerate(mine) if s not in terminals or i == len(mine) - 1]
    if up["outcome"] == "limit":
        # upstream's `-n` limit is the harness's, not the loop's: the state its
        # `on_max_steps` went to after it is left out (ll runs on, to a higher limit)
        head = up["path"][:STEP_LIMIT]
        ok = mine[: len(head)] == head
        return ok, "" if ok else f"path {mine} vs upstream {up['path']}"
    final = mine[-1] if mine else None
    if mine != up["path"]:
        return False, f"path {mine} vs upstream {up['path']}"
    if final != up["final"]:
        return False, f"final {final} vs {up['final']}"
    if ours.outcome != up["outcome"]:
        return False, f"outcome {ours.outcome} vs {up['outcome']}"
    return True, ""


def terminal_names(source: Path) -> frozenset[str]:
    doc = read_yaml(source)
    found = doc.get("states")
    states: dict[str, Any] = found if isinstance(found, dict) else {}
    return frozenset(n for n, s in states.items() if isinstance(s, dict) and s.get("terminal"))


def state_names(source: Path) -> set[str]:
    doc = read_yaml(source)
    names = set(doc.get("states") or {}) | set(doc.get("state_defs") or {})
    for step in doc.get("flow") or []:
        names.add(str(step).split("?")[0])
    if "from" in doc:  # the base's states, too
        for base in (source.parent / f"{doc['from']}.yaml", source.parent / str(doc["from"])):
            if base.is_file():
                names |= state_names(base)
    return names


def scenario_name(scenario: dict[str, Any]) -> str:
    return f"{scenario['file']} [{scenario['verdict']}]"


def behaves_the_same(
    scenario: dict[str, Any], work: Path, step_limit: int, invoke: Invoke = ll_in_a_process
) -> tuple[bool, str]:
    """Whether `ll` runs one scenario of expected.json as upstream did (and if not, why), on
    the corpus `migrate_corpus` converted into `work`."""
    rel = scenario["file"]
    source = work / "src" / rel
    ours = run_ll(work / "dst" / rel, source, scenario["verdict"], 3 * step_limit, invoke)
    ok, why = same(scenario["upstream"], ours, state_names(source), terminal_names(source))
    if not ok and not ours.path:
        why += " | " + ours.note.strip().replace("\n", " ")[-200:]
    return ok, why


def equivalence(corpus: Path, work: Path, only: str | None = None) -> list[tuple[str, bool, str]]:
    from concurrent.futures import ThreadPoolExecutor

    data = json.loads(EXPECTED.read_text(encoding="utf-8"))
    chosen = [s for s in data["scenarios"] if not only or only in s["file"]]

    def one(scenario: dict[str, Any]) -> tuple[str, bool, str]:
        return scenario_name(scenario), *behaves_the_same(scenario, work, data["step_limit"])

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, chosen))


def validity(work: Path) -> tuple[list[str], list[str], list[str], list[str]]:
    """(files, invalid after migration, hand-work notes, files failing --strict)."""
    notes = (work / "dst" / "MIGRATION-NOTES.md").read_text(encoding="utf-8")
    files, invalid, hand, strict_fail = [], [], [], []
    section = ""
    for line in notes.splitlines():
        if line.startswith("## "):
            section = line[3:].rsplit(" (", 1)[0]
            files.append(section)
            continue
        if section and "**needs hand work**" in line:
            if "`ll validate` after migration" in line:
                if section not in invalid:
                    invalid.append(section)
            else:
                hand.append(f"{section}: {line.split('**needs hand work**: ', 1)[1]}")
    done = [f for f in files if f not in invalid and not any(h.startswith(f + ":") for h in hand)]
    for rel in done:
        proc = subprocess.run(
            [sys.executable, "-m", "little_loops", "validate", "--strict", str(work / "dst" / rel)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            strict_fail.append(f"{rel}: {(proc.stdout + proc.stderr).strip()[-300:]}")
    return files, invalid, hand, strict_fail


def unseen_validity(folder: Path) -> tuple[int, int, list[str]]:
    """Upstream loop files outside the corpus: each converted alone; (files, valid, invalid)."""
    bad: list[str] = []
    total = 0
    for path in sorted(folder.rglob("*.yaml")):
        total += 1
        with tempfile.TemporaryDirectory(prefix="eq-unseen-") as out:
            proc = subprocess.run(
                [sys.executable, "-m", "little_loops", "migrate", str(path), "--out", out],
                capture_output=True,
                text=True,
                timeout=120,
            )
            notes = Path(out, "MIGRATION-NOTES.md")
            text = notes.read_text(encoding="utf-8") if notes.is_file() else proc.stderr
            if proc.returncode == 2 or "`ll validate` after migration" in text:
                bad.append(str(path.relative_to(folder)))
    return total, total - len(bad), bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--ll-loop", type=Path, required=True)
    rec.add_argument("--corpus", type=Path, default=CORPUS)
    rec.add_argument("--file", action="append", help="record only these (merged in)")
    fig = sub.add_parser("figures")
    fig.add_argument("--corpus", type=Path, default=CORPUS)
    fig.add_argument("--only", help="run only the scenarios of files whose name holds this")
    fig.add_argument("--unseen", type=Path, help="a folder of upstream loop files not in it")
    fig.add_argument("-v", action="store_true", help="list every scenario")
    args = parser.parse_args()
    if args.cmd == "record":
        record(args.ll_loop, args.corpus, EXPECTED, args.file)
        return 0
    with tempfile.TemporaryDirectory(prefix="eq-fig-") as scratch:
        work = Path(scratch)
        migrate_corpus(args.corpus, work)
        files, invalid, hand, strict_fail = validity(work)
        pct = 100 * (len(files) - len(invalid)) / len(files)
        print(f"valid after migration: {len(files) - len(invalid)}/{len(files)} ({pct:.1f} %)")
        for rel in invalid:
            print(f"  invalid: {rel}")
        print(f"needs-hand-work notes: {len(hand)}")
        for note in hand:
            print(f"  {note[:160]}")
        done = len(files) - len({h.split(":")[0] for h in hand} | set(invalid))
        passed = done - len(strict_fail)
        print(f"ll validate --strict on the {done} files with no hand work: {passed} pass")
        for fail in strict_fail:
            print(f"  strict: {fail}")
        results = equivalence(args.corpus, work, args.only)
        for name, ok, why in results:
            if args.v or not ok:
                print(f"  {'same' if ok else 'DIFF'} {name} {why}")
        good = sum(ok for _, ok, _ in results)
        share = 100 * good / max(1, len(results))
        print(f"equivalence: {good}/{len(results)} scenarios behave the same ({share:.1f} %)")
    if args.unseen:
        total, valid, bad = unseen_validity(args.unseen)
        share = 100 * valid / max(1, total)
        print(f"unseen upstream files valid after migration: {valid}/{total} ({share:.1f} %)")
        for rel in bad:
            print(f"  invalid: {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
