"""Every complete loop in the docs runs, and does what its text says.

A whole loop file in a ```yaml block of README.md or docs/*.md (a block whose top level has
`states:` or `paradigm:`, see tests/e2e/test_docs.py) is followed by one or more scenarios, each an
HTML comment that the rendered page does not show:

    <!-- ll-run: {stubs: {ruff: [1, 0]}, judge: [failure, success], path: [check, fix, check,
         done], exit: 0} -->

The comment's text after `ll-run:` is a YAML mapping:

- `path` (list of state names, one a step) and `exit` (the exit code): what the text promises;
- `stubs`: command name -> its calls in order (the last repeats), each an exit code or a
  mapping `{exit: CODE, out: TEXT, err: TEXT}`. Each becomes an executable first on PATH that
  prints `out` (default `NAME: call N`; `""` prints nothing) and, for a non-zero code, `err` on
  stderr (default: a line saying it failed on purpose), so a doc loop's `ruff`,
  `pytest`, `make`, `curl` or `./deploy.sh` runs offline, prints the number a loop measures, and
  a failure path can be taken on purpose (failure injection);
- `files`: path -> text, written in the directory the run starts in (`./deploy.sh` stubs are
  written there too when the name starts with `./`);
- `claude`: the fake `claude`'s scenarios, one per call (tests/fake_claude.py);
- `judge`: the loopback judge's verdicts, one per request (the last repeats); an item may be a
  mapping with `verdict`, `confidence`, `reason`;
- `set`: context overrides (`--set KEY=VALUE`); `args`: further `ll run` arguments;
- `output`: text (or a list of texts) that must appear in what `ll run` printed;
- `xfail`: why the scenario cannot pass yet (a known bug in `ll`, fixed on another branch). It is
  a strict expected failure: once the bug is fixed the test fails until the key is removed.

A block with no scenario fails the test below: a doc loop nobody ran is a doc loop nobody knows
works.
"""

from __future__ import annotations

import json
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakes import install_fake_claude
from llm_server import LlmServer, llm_server_fixture, message  # noqa: F401  (a fixture)
from project import Project, time_limit
from test_docs import DOCS, Block, blocks, yaml_of

# Every loop of the docs run end to end through `ll`: minutes in all, so not in the fast set.
pytestmark = [pytest.mark.slow, pytest.mark.integration]

SCENARIO = re.compile(r"<!--\s*ll-run:(?P<body>.*?)-->", re.DOTALL)
KEYS = {"path", "exit", "stubs", "files", "claude", "judge", "set", "args", "output", "xfail"}


@dataclass(frozen=True)
class Scenario:
    block: Block
    index: int
    spec: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.block.id}#{self.index + 1}"


def _is_whole_loop(block: Block) -> bool:
    if block.lang not in ("yaml", "yml"):
        return False
    first = block.text.lstrip().splitlines()[:2]
    if any(line.startswith(("# partial", "# invalid")) for line in first):
        return False
    try:
        doc = yaml_of(block.text)
    except yaml.YAMLError:
        return False
    return isinstance(doc, dict) and ("states" in doc or "paradigm" in doc)


def _scenarios_after(path: Path, block: Block) -> list[dict[str, Any]]:
    """The ll-run comments between the end of `block` and the next non-comment text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rest = "\n".join(lines[block.end :])
    found: list[dict[str, Any]] = []
    pos = 0
    while True:
        gap = re.match(r"\s*", rest[pos:])
        start = pos + (gap.end() if gap else 0)
        match = SCENARIO.match(rest, start)
        if match is None:
            return found
        spec = yaml.safe_load(match["body"])
        assert isinstance(spec, dict), f"{block.id}: an ll-run comment must hold a YAML mapping"
        unknown = set(spec) - KEYS
        assert not unknown, f"{block.id}: unknown ll-run keys {sorted(unknown)}"
        assert "exit" in spec, f"{block.id}: an ll-run scenario needs `exit`"
        found.append(spec)
        pos = match.end()


def _doc_loops() -> list[tuple[Block, list[dict[str, Any]]]]:
    out = []
    for path in DOCS:
        for block in blocks(path):
            if _is_whole_loop(block):
                out.append((block, _scenarios_after(path, block)))
    return out


DOC_LOOPS = _doc_loops()
SCENARIOS = [
    pytest.param(
        Scenario(block, i, spec),
        id=Scenario(block, i, spec).id,
        marks=[pytest.mark.xfail(reason=str(spec["xfail"]), strict=True)]
        if "xfail" in spec
        else [],
    )
    for block, specs in DOC_LOOPS
    for i, spec in enumerate(specs)
]


def test_docs_have_whole_loops() -> None:
    assert len(DOC_LOOPS) >= 10


@pytest.mark.parametrize("block", [b for b, _ in DOC_LOOPS], ids=lambda b: b.id)
def test_every_doc_loop_has_a_scenario(block: Block) -> None:
    specs = dict(DOC_LOOPS)[block]
    assert specs, (
        f"{block.id}: a whole loop with no <!-- ll-run: ... --> scenario after it; "
        "say what running it does (see tests/e2e/test_doc_loops.py)"
    )


def _stub_call(name: str, item: Any) -> tuple[int, str | None, str | None]:
    if isinstance(item, dict):
        unknown = set(item) - {"exit", "out", "err"}
        assert not unknown, f"stub {name}: unknown keys {sorted(unknown)} (exit, out, err)"
        out, err = item.get("out"), item.get("err")
        code = int(item.get("exit", 0))
        return code, None if out is None else str(out), None if err is None else str(err)
    return int(item), None, None


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _stub(bin_dir: Path, name: str, calls: list[Any]) -> None:
    """An executable that answers its n-th call with the n-th exit code and text (the last
    repeats): a `/bin/sh` script, far cheaper to start than an interpreter, as most doc loops
    call their stubs several times."""
    target = bin_dir / name
    target.parent.mkdir(parents=True, exist_ok=True)
    counter = target.with_name(target.name + ".calls")
    branches = []
    for i, call in enumerate(_stub_call(name, c) for c in calls):
        code, out, err = call
        lines = []
        if out is None:
            lines.append(f'printf "%s\\n" {_sh_quote(name + ": call")}" $((n + 1))"')
        elif out:
            lines.append(f'printf "%s\\n" {_sh_quote(out)}')
        if code:
            message = err or f"{name}: failed on purpose (exit {code})"
            lines.append(f'printf "%s\\n" {_sh_quote(message)} >&2')
        lines.append(f"exit {code}")
        label = "*" if i == len(calls) - 1 else str(i)
        branches.append(f"  {label})\n    " + "\n    ".join(lines) + "\n    ;;")
    counter_q = _sh_quote(str(counter))
    script = (
        "#!/bin/sh\n"
        f"n=0\n[ -f {counter_q} ] && read -r n < {counter_q}\n"
        f"echo $((n + 1)) > {counter_q}\n"
        'case "$n" in\n' + "\n".join(branches) + "\nesac\n"
    )
    target.write_text(script)
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _judge_reply(item: Any) -> Any:
    answer = dict(item) if isinstance(item, dict) else {"verdict": str(item)}
    answer.setdefault("confidence", 0.9)
    answer.setdefault("reason", f"scripted verdict {answer['verdict']}")
    return message(answer)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_doc_loop_runs_as_its_text_says(
    scenario: Scenario,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    llm_server: LlmServer,
    project: Project,
) -> None:
    spec = scenario.spec
    work = tmp_path / "work"
    work.mkdir()
    loop_file = tmp_path / "loop.yaml"
    loop_file.write_text(scenario.block.text, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    install_fake_claude(bin_dir, monkeypatch)
    for name, codes in (spec.get("stubs") or {}).items():
        if str(name).startswith("./"):
            _stub(work, str(name)[2:], list(codes))
        else:
            _stub(bin_dir, str(name), list(codes))
    for rel, text in (spec.get("files") or {}).items():
        target = work / str(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(text))
    claude = spec.get("claude")
    if claude:
        state = bin_dir / "claude.count"
        monkeypatch.setenv("FAKE_CLAUDE_SCENARIO", ",".join(str(s) for s in claude))
        monkeypatch.setenv("FAKE_CLAUDE_STATE", str(state))
    judge = list(spec.get("judge") or [])
    if judge:
        replies = [_judge_reply(item) for item in judge]
        llm_server.script(*replies, then=replies[-1])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    argv = ["run", str(loop_file), "--no-cache"]
    for key, value in (spec.get("set") or {}).items():
        argv += ["--set", f"{key}={value}"]
    argv += [str(a) for a in spec.get("args") or []]
    # In process (no fresh interpreter, the judge's SDK imported once): what is under test is
    # the loop's path, exit code and output, not how a process ends.
    with time_limit(120, scenario.id):
        done = project.ll(*argv, cwd=work)
    shown = done.stdout + done.stderr
    where = f"{scenario.id}: ll printed:\n{shown[-3000:]}"
    logs = sorted((work / ".loops" / "runs").glob("*/events.jsonl"))
    path: list[str] = []
    for log in logs:
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event["event"] == "state_enter":
                del path[event["step"] - 1 :]  # a step cut off and run again counts once
                path.append(event["state"])
    if "path" in spec:
        assert path == [str(s) for s in spec["path"]], where
    assert done.returncode == spec["exit"], where
    wanted = spec.get("output")
    for text in wanted if isinstance(wanted, list) else [] if wanted is None else [wanted]:
        assert str(text) in shown, where
