"""Every example in `ll --help` and each command's `--help` runs as written (issue 24, finding 3).

Each example line runs, through the real `ll` in a shell, in a sandbox of its own: a copy of
this repository's loops/, with the runs its run ids name made beforehand (a finished run, a
run paused by `ll step`, one suspended at a question, one still running, a parent paused
before its fork with its branches under artifacts/), so that the line does what it says.
Passing means: no usage error (exit 2), no crash (exit 70), no traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from project import Project

REPO = Path(__file__).resolve().parents[2]
RUN_ID = re.compile(r"\b\d{8}-\d{6}-(?P<loop>[a-z0-9-]+)-[0-9a-f]{4}\b")

# An upstream-format file for the `ll migrate` examples (our own, a few keys of that format).
UPSTREAM = """\
name: fix-quality-and-tests
initial: lint
max_steps: 6
states:
  lint:
    action: "true"
    action_type: shell
    on_yes: done
    on_no: fix
  fix:
    action_type: prompt
    action: Fix the lint errors.
    next: lint
  done:
    terminal: true
"""

SLOW = """\
name: slow
initial: wait
states:
  wait: {action: sleep 60, next: done}
  done: {terminal: true}
"""


@functools.cache
def _help(*command: str) -> str:
    # In process, once: every xdist worker reads about 60 help pages while collecting.
    done = Project(REPO).ll(*command, "--help")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _commands() -> list[tuple[str, ...]]:
    listed = _help().split("Commands:", 1)[1].splitlines()
    names = [line.split()[0] for line in listed if line.startswith("  ") and line.strip()]
    found: list[tuple[str, ...]] = [()]
    for name in names:
        text = _help(name)
        if "Commands:" in text:  # a group: its subcommands
            sub = text.split("Commands:", 1)[1].splitlines()
            found += [(name, s.split()[0]) for s in sub if s.startswith("  ") and s.strip()]
        else:
            found.append((name,))
    return found


def examples() -> list[tuple[str, str]]:
    """(command, example line) for every `ll ...` line under Example(s): in a help text; a
    line continued with a backslash is joined; a trailing `# comment` is dropped."""
    out = []
    for command in _commands():
        text = _help(*command)
        if "Example" not in text:
            continue
        block = re.split(r"Examples?:\n", text, maxsplit=1)[1].split("\n\n", 1)[0]
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip())
            if line.startswith("ll "):
                out.append((" ".join(command) or "ll", line))
    return out


EXAMPLES = examples()


def test_every_command_has_an_example() -> None:
    have = {name for name, _ in EXAMPLES}
    missing = sorted(" ".join(c) for c in _commands() if c and " ".join(c) not in have)
    assert missing == [], missing
    assert len(EXAMPLES) >= 25


# -- the sandbox ----------------------------------------------------------------------------


def _as(sandbox: Path, run_id: str, *args: str) -> None:
    """`ll ARGS`, in process, whose new run gets `run_id` (the examples name their runs)."""
    import little_loops.cli.launch as la
    import little_loops.record.store as st
    import little_loops.run.runner as rn

    def named(name: str, now: object = None) -> str:
        return run_id

    with pytest.MonkeyPatch.context() as patch:
        for module in (st, rn, la):
            patch.setattr(module, "new_run_id", named, raising=False)
        Project(sandbox).ll(*args, env={"CI": "true"})


def _running(sandbox: Path, run_id: str, *args: str) -> subprocess.Popen[str]:
    """`ll ARGS` whose new run gets `run_id`, left running: a process of its own."""
    code = (
        "import sys\n"
        "import little_loops.cli.launch as la, little_loops.record.store as st\n"
        "import little_loops.run.runner as rn\n"
        f"f = lambda name, now=None: {run_id!r}\n"
        "st.new_run_id = rn.new_run_id = la.new_run_id = f\n"
        "from little_loops.entry import main\n"
        "sys.argv = ['ll', *sys.argv[1:]]\n"
        "main()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=sandbox,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "CI": "true"},
    )
    return proc


def _prepare(sandbox: Path, command: str, line: str) -> list[subprocess.Popen[str]]:
    """The runs the example's ids name, each in the state the example needs."""
    running = []
    for match in RUN_ID.finditer(line):
        run_id, loop = match.group(0), match.group("loop")
        file = f"loops/{loop}.yaml"
        if command == "stop":
            (sandbox / "slow.yaml").write_text(SLOW, encoding="utf-8")
            proc = _running(sandbox, run_id, "run", "slow.yaml")
            state = sandbox / ".loops" / "runs" / run_id / "state.json"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and '"running"' not in _read(state):
                time.sleep(0.2)
            running.append(proc)
        elif command == "join":
            _as(sandbox, run_id, "step", file, "--until", "rollout")
            for n, key in enumerate(("eu-west", "us-east", "ap-south")):
                branch = f"20261122-041431-{loop}-{n:04x}"
                _as(sandbox, branch, "run", file, "--branch", f"rollout={key}")
                shutil.move(sandbox / ".loops" / "runs" / branch, sandbox / "artifacts" / key)
        elif loop == "publish":  # a question waits (CI: the run suspends)
            _as(sandbox, run_id, "run", file)
        elif command in ("step", "resume"):  # paused by `ll step`
            _as(sandbox, run_id, "step", file, "-n", "2")
        elif loop == "judge-release-notes":
            _as(sandbox, run_id, "run", file, "--replay", f"loops/{loop}.cassette.jsonl")
        else:
            _as(sandbox, run_id, "run", file)
        assert (sandbox / ".loops" / "runs" / run_id).is_dir(), f"{line}: run not made"
    if line in ("ll resume", "ll status"):  # the latest run here
        _as(sandbox, "20261122-041430-fix-until-green-0a0a", "step", "loops/fix-until-green.yaml")
    return running


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "loops", tmp_path / "loops")
    shutil.copytree(REPO / "schemas", tmp_path / "schemas")
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "upstream" / "loops").mkdir(parents=True)
    (tmp_path / "upstream" / "loops" / "fix-quality-and-tests.yaml").write_text(UPSTREAM)
    return tmp_path


# A line of words, options and plain quotes: no pipe, redirection, glob, variable or `~`.
PLAIN = re.compile(r"""ll( +([\w@%+=:,./-]+|'[^']*'|"[^"$`\\]*"))+""")


@contextlib.contextmanager
def _collector() -> Iterator[str]:
    """A loopback OpenTelemetry collector (OTLP/HTTP: every export answered 200 and an empty
    ExportTraceServiceResponse), the one docs/observability.md starts before `ll run --otel`;
    with nothing listening, the exporter would retry for some eight seconds."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _run_line(
    sandbox: Path, line: str, running: list[subprocess.Popen[str]]
) -> subprocess.CompletedProcess[str]:
    """`line` run by bash in `sandbox` with `ll` on the PATH; the processes of `running` are
    ended after it. A line that exports a trace (`--otel`) has a collector listening."""
    bindir = sandbox / "bin"
    bindir.mkdir()
    (bindir / "ll").write_text(f'#!/bin/sh\nexec {sys.executable} -m little_loops "$@"\n')
    (bindir / "ll").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "CI": "true"}
    with contextlib.ExitStack() as stack:
        if "--otel" in line:
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = stack.enter_context(_collector())
        try:
            if PLAIN.fullmatch(line):
                # no shell syntax: bash would pass `ll` what shlex.split gives, so the real
                # `ll` runs in process (a fresh interpreter is most of such a line's cost)
                said = Project(sandbox).ll(*shlex.split(line)[1:], env=env)
                done = subprocess.CompletedProcess(line, said.returncode, said.stdout, said.stderr)
            else:
                done = subprocess.run(
                    ["bash", "-o", "pipefail", "-c", line],
                    cwd=sandbox,
                    capture_output=True,
                    text=True,
                    timeout=300,
                    env=env,
                    check=False,
                )
        finally:
            for proc in running:
                if proc.poll() is None:
                    proc.kill()
                proc.communicate()
    if "--otel" in line:
        assert "could not be exported" not in done.stderr, done.stderr
    return done


@pytest.mark.slow
@pytest.mark.parametrize(("command", "line"), EXAMPLES, ids=[line for _, line in EXAMPLES])
def test_help_example_runs_as_written(command: str, line: str, sandbox: Path) -> None:
    if "| dot " in line and shutil.which("dot") is None:
        pytest.skip("Graphviz (dot) is not installed")
    running = _prepare(sandbox, command.split()[0], line)
    done = _run_line(sandbox, line, running)
    said = done.stdout + done.stderr
    assert done.returncode not in (2, 70), f"{line}: exit {done.returncode}\n{said}"
    assert "Traceback" not in said, said
    if command == "stop":
        assert done.returncode == 0, said
    if command == "join":
        assert done.returncode == 0, said
        assert "gathered 3 branches" in said


def test_run_help_example_and_plan_matrix_example_work(project: Project, tmp_path: Path) -> None:
    """Finding 3: `ll run --help`'s example exited 2; `ll plan-matrix --help`'s named a state
    its loop does not have."""
    shutil.copytree(REPO / "loops", tmp_path / "loops")
    lines = {c: line for c, line in EXAMPLES if c in ("run", "plan-matrix")}
    run = project.ll(*lines["run"].split()[1:])
    assert run.returncode in (0, 1), run.stdout + run.stderr
    plan = project.ll(*lines["plan-matrix"].split()[1:])
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["include"]


# -- the docs' shell blocks -------------------------------------------------------------------


def doc_commands() -> list[tuple[str, str]]:
    """(where, line) for every `ll ...` line of a ```sh or ```bash block in README.md and
    docs/*.md (a pipeline or `&&` chain whose first command is `ll`)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_docs import DOCS, blocks

    out = []
    for path in DOCS:
        for block in blocks(path):
            if block.lang not in ("sh", "bash"):
                continue
            for line in block.text.splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip())
                if line.startswith("ll "):
                    out.append((block.id, line))
    return out


DOC_COMMANDS = doc_commands()
# Lines that name a file of the reader's own project, written from the page around them (a
# recipe's loop, a cassette recorded with a key, an upstream checkout): not in this repository.
YOURS = re.compile(r"docs-up-to-date|upstream|first\.yaml|converted/|fix-quality-and-tests|~/")


def test_doc_commands_are_found() -> None:
    assert len(DOC_COMMANDS) >= 25
    runnable = [line for _, line in DOC_COMMANDS if not YOURS.search(line)]
    assert len(runnable) >= 20


@pytest.mark.slow
@pytest.mark.parametrize(("where", "line"), DOC_COMMANDS, ids=[w for w, _ in DOC_COMMANDS])
def test_doc_command_runs_as_written(where: str, line: str, sandbox: Path) -> None:
    if YOURS.search(line):
        pytest.skip("names a file of the reader's project, not of this repository")
    if "| dot " in line and shutil.which("dot") is None:
        pytest.skip("Graphviz (dot) is not installed")
    command = line.split()[1]
    running = _prepare(sandbox, command, line)
    if command in ("logs", "status", "judge") and not RUN_ID.search(line):
        _as(
            sandbox,
            "20261122-041430-judge-release-notes-0b0b",
            "run",
            "loops/judge-release-notes.yaml",
            "--replay",
            "loops/judge-release-notes.cassette.jsonl",
        )
    if line.startswith("ll resume --answer"):  # the latest run waits for an answer
        _as(sandbox, "20261122-041430-publish-0c0c", "run", "loops/publish.yaml")
    done = _run_line(sandbox, line, running)
    said = done.stdout + done.stderr
    assert done.returncode not in (2, 70, 127), f"{where}: {line}: exit {done.returncode}\n{said}"
    assert "Traceback" not in said, said
