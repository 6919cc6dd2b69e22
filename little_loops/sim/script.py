"""Simulation scripts: read with positions, checked against a loop, one `Entry` a visit.

A script maps state paths (`build`; a child's state as `deploy/verify`, `*` for any one
segment) to a verdict, a list of entries consumed one per visit (the last repeats), or a
mapping of the keys in `ENTRY_KEYS`; `simulate` answers actions from it.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from little_loops.errors import (
    EXIT_USAGE,
    LoopError,
    SimulationError,
)
from little_loops.evaluators import possible_verdicts
from little_loops.model.loop import (
    Loop,
    State,
)
from little_loops.wording import did_you_mean

ENTRY_KEYS = (
    "verdict",
    "output",
    "stderr",
    "exit_code",
    "duration_ms",
    "cost_usd",
    "reason",
    "final_state",  # a child run's stub (a `loop:` state): read by the sub-loop step
    "outputs",
)
SCRIPT_KEYS = ("loop", "set", "default", "states", "expect", "replay")
# Where a simulated run records which script it follows, so a resume follows it too.


@dataclass(frozen=True)
class Entry:
    """What one visit of a state gives."""

    verdict: str | None = None
    output: str = ""
    stderr: str = ""
    exit_code: int | None = None
    duration_ms: int = 0
    cost_usd: float = 0.0
    reason: str | None = None
    final_state: str | None = None
    outputs: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0  # where it was written, for messages


@dataclass
class Script:
    """A simulation script, read and checked for its shape (`check` holds it against a loop)."""

    file: str
    states: dict[str, list[Entry]]
    lines: dict[str, int]  # the line of each key of `states:`
    default: Entry | None = None
    loop: str | None = None
    sets: dict[str, str] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    expect_lines: dict[str, int] = field(default_factory=dict)
    line_of_loop: int = 1
    replay: str | None = None  # `ll test`: the judge's cassette, relative to the script
    # Every mistake found so far: `check` (or `raise_mistakes`) tells them all at once.
    mistakes: list[ScriptError] = field(default_factory=list)

    def raise_mistakes(self) -> None:
        """One error naming every mistake found, each on its own line, in line order."""
        if len(self.mistakes) == 1:
            raise self.mistakes[0]
        if self.mistakes:
            raise ScriptErrors(sorted(self.mistakes, key=lambda e: e.line))

    def check_child(self, prefix: str, child: Loop) -> None:
        """The keys under `prefix` (`deploy/`, `rollout/eu/`) name states of `child`, the
        loop that run starts: a misspelt one would never be used, and the run would go on
        real or unanswered. Checked when the child starts (its file is known only then)."""
        for key in self.states:
            if not key.startswith(prefix):
                continue
            head = key[len(prefix) :].split("/", 1)[0]
            if "*" in head or head in child.states:
                continue
            hint = did_you_mean(head, sorted(child.states))
            raise ScriptError(
                self.file,
                self.lines.get(key, 1),
                f"'{key}': the loop {child.path.name} (run by '{prefix.rstrip('/')}') has no "
                f"state '{head}'{hint}",
            )

    def entries_for(self, path: str) -> list[Entry] | None:
        """The entries of a state path; an exact key wins over a pattern with `*`."""
        if path in self.states:
            return self.states[path]
        for key, entries in self.states.items():
            if "*" in key and _matches(key, path):
                return entries
        return None

    def replay_path(self) -> Path | None:
        """The cassette the script names (`ll test`), relative to the script."""
        return (Path(self.file).parent / self.replay).resolve() if self.replay else None

    def loop_path(self) -> Path:
        """The loop file the script names, relative to the script."""
        if not self.loop:
            raise ScriptError(self.file, self.line_of_loop, "names no 'loop:'; add 'loop: FILE'")
        return (Path(self.file).parent / self.loop).resolve()

    def check(self, loop: Loop, *, replay: bool) -> None:
        """Every key names a state, every verdict is one its state can give; the first
        state, which every run visits, has an answer."""
        for key, entries in self.states.items():
            try:
                self._check_key(loop, key, entries, replay=replay)
            except ScriptError as exc:
                self.mistakes.append(exc)
        first = loop.states[loop.initial]
        uncovered = self.default is None and self.entries_for(first.name) is None
        uncovered = uncovered and not self.mistakes  # a misspelt key may be the missing entry
        if uncovered and first.action is not None and not first.terminal and not first.is_fork:
            self.mistakes.append(
                ScriptError(
                    self.file,
                    1,
                    f"no entry for state '{first.name}', where the run starts; add "
                    f"'{first.name}: success' (or a list, one a visit) under 'states:'",
                )
            )
        self.raise_mistakes()

    def _check_key(self, loop: Loop, key: str, entries: list[Entry], *, replay: bool) -> None:
        """One key of `states:` against the loop: a state it has, verdicts it can give."""
        line = self.lines.get(key, 1)
        head = key.split("/", 1)[0]
        if "*" in head:
            return  # a pattern at the top names no one state
        state = loop.states.get(head)
        if state is None:
            hint = did_you_mean(head, sorted(loop.states))
            raise ScriptError(self.file, line, f"the loop has no state '{head}'{hint}")
        if "/" in key:
            return  # inside a child: checked when the child runs
        if state.is_fork:
            raise ScriptError(
                self.file,
                line,
                f"state '{head}' is a fork: its join gives the verdict; answer its "
                f"branches instead, as '{head}/KEY' (or '{head}/*')",
            )
        if state.is_loop:
            return  # the child's end, stubbed: checked against the child when it is called
        if state.is_ask:  # the person's answers, one a visit
            for entry in entries:
                _check_answer(self.file, entry, state)
            return
        if state.action is None and not state.terminal:
            raise ScriptError(
                self.file,
                line,
                f"state '{head}' runs no action, so its evaluator judges it as it is; "
                "drop its entry",
            )
        for entry in entries:
            _check_entry(self.file, entry, state, replay=replay)


class ScriptError(SimulationError):
    """A simulation script that cannot be used: one line with its file and line."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}", exit_code=EXIT_USAGE)
        self.line = line


class ScriptErrors(ScriptError):
    """Several mistakes of one script, a line each."""

    def __init__(self, errors: list[ScriptError]) -> None:
        SimulationError.__init__(self, "\n".join(e.message for e in errors), exit_code=EXIT_USAGE)
        self.line = errors[0].line


def read_script(path: Path, *, collect: bool = False) -> Script:
    """Read a script with the loader's positions; a bad one is a one-line `ScriptError`
    (several, a line each, for several mistakes). `collect`: keep the mistakes of its entries
    in `script.mistakes`, told with the loop's (`Script.check`) in one error."""
    from little_loops.load.source import read_document

    file = str(path)
    if not path.is_file():
        raise LoopError(f"{file}: no such simulation script", exit_code=EXIT_USAGE)
    doc, smap, diagnostics = read_document(path, file)
    if diagnostics or smap is None:
        first = diagnostics[0] if diagnostics else None
        raise LoopError(first.format() if first else f"{file}: unreadable", exit_code=EXIT_USAGE)

    def line(*where: str | int) -> int:
        return smap.key(tuple(where)).line

    if not isinstance(doc, dict):
        raise ScriptError(file, 1, "a simulation script is a mapping with 'states:'")
    mistakes = [
        ScriptError(
            file, line(key), f"unknown key '{key}'{did_you_mean(str(key), list(SCRIPT_KEYS))}"
        )
        for key in doc
        if key not in SCRIPT_KEYS
    ]
    states = doc.get("states", {})
    if states is None:
        states = {}
    if not isinstance(states, dict):
        raise ScriptError(file, line("states"), "'states:' maps state paths to entries")
    script = Script(file, {}, {}, line_of_loop=line("loop") if "loop" in doc else 1)
    script.mistakes = mistakes
    for key, value in states.items():
        try:
            entries = _entries(file, value, ("states", key), smap)
        except ScriptError as exc:
            mistakes.append(exc)
            continue
        script.lines[str(key)] = line("states", key)
        script.states[str(key)] = entries
    if doc.get("default") is not None:
        (script.default,) = _entries(file, doc["default"], ("default",), smap)[:1]
    loop = doc.get("loop")
    if loop is not None and not isinstance(loop, str):
        raise ScriptError(file, line("loop"), "'loop:' is the path of a loop file")
    script.loop = loop
    replay = doc.get("replay")
    if replay is not None and not isinstance(replay, str):
        raise ScriptError(file, line("replay"), "'replay:' is the path of a judge cassette")
    script.replay = replay
    sets = doc.get("set") or {}
    if not isinstance(sets, dict) or any(isinstance(v, dict | list) for v in sets.values()):
        raise ScriptError(file, line("set"), "'set:' maps context keys to plain values")
    script.sets = {str(k): _text(v) for k, v in sets.items()}
    expect = doc.get("expect") or {}
    if not isinstance(expect, dict):
        raise ScriptError(file, line("expect"), "'expect:' is a mapping (path, outcome, ...)")
    script.expect = expect
    script.expect_lines = {str(k): line("expect", k) for k in expect}
    if not collect:
        script.raise_mistakes()
    return script


def _entries(file: str, value: Any, where: tuple[str | int, ...], smap: Any) -> list[Entry]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ScriptError(file, smap.key(where).line, "an empty list gives no visit an answer")
    return [
        _entry(file, item, (*where, i) if value is items else where, smap)
        for i, item in enumerate(items)
    ]


def _entry(file: str, item: Any, where: tuple[str | int, ...], smap: Any) -> Entry:
    line = smap.value(where).line
    if isinstance(item, str):
        return Entry(verdict=item, line=line)
    if not isinstance(item, dict):
        raise ScriptError(
            file, line, "an entry is a verdict word, a list of entries or a mapping (output, ...)"
        )
    for key in item:
        if key not in ENTRY_KEYS:
            hint = did_you_mean(str(key), list(ENTRY_KEYS))
            raise ScriptError(file, smap.key((*where, key)).line, f"unknown key '{key}'{hint}")

    def typed(key: str, kinds: tuple[type, ...], what: str) -> Any:
        value = item.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise ScriptError(file, smap.value((*where, key)).line, f"'{key}' must be {what}")
        return value

    duration = typed("duration_ms", (int,), "a whole number of milliseconds")
    cost = typed("cost_usd", (int, float), "a number of dollars")
    if (duration is not None and duration < 0) or (cost is not None and cost < 0):
        raise ScriptError(file, line, "'duration_ms' and 'cost_usd' cannot be negative")
    outputs = item.get("outputs") or {}
    if not isinstance(outputs, dict):
        raise ScriptError(file, smap.value((*where, "outputs")).line, "'outputs' is a mapping")
    return Entry(
        verdict=typed("verdict", (str,), "a verdict word"),
        output=_text(item.get("output", "")),
        stderr=_text(item.get("stderr", "")),
        exit_code=typed("exit_code", (int,), "a whole number"),
        duration_ms=duration or 0,
        cost_usd=float(cost or 0.0),
        reason=typed("reason", (str,), "a line of text"),
        final_state=typed("final_state", (str,), "a state name"),
        outputs={str(k): v for k, v in outputs.items()},
        line=line,
    )


def _check_entry(file: str, entry: Entry, state: State, *, replay: bool) -> None:
    if entry.verdict is not None:
        possible = sorted(possible_verdicts(state.evaluate, action_type=state.action_type))
        if state.terminal and entry.verdict != "success":
            possible = sorted({*possible, "failure"})
        if entry.verdict not in possible:
            hint = did_you_mean(entry.verdict, possible) or f" (it gives {', '.join(possible)})"
            raise ScriptError(
                file, entry.line, f"state '{state.name}' cannot give '{entry.verdict}'{hint}"
            )
        return
    judged = state.evaluate is not None and _uses_judge(state.evaluate)
    if judged and not replay:
        raise ScriptError(
            file,
            entry.line,
            f"state '{state.name}' is judged by a model: give its 'verdict', or run with "
            "--replay CASSETTE so the judge answers from the cassette",
        )


def _check_answer(file: str, entry: Entry, state: State) -> None:
    """An `ask` state's entry: its `verdict` is the answer (one of its choices, or timeout
    when it can expire), `output` the note or the free text."""
    possible = sorted(state.ask_verdicts())
    if entry.verdict is None and state.choices:
        raise ScriptError(
            file, entry.line, f"state '{state.name}' asks; give its answer as 'verdict' "
            f"(one of {', '.join(possible)})",
        )  # fmt: skip
    if entry.verdict is not None and entry.verdict not in possible:
        hint = did_you_mean(entry.verdict, possible) or f" (it gives {', '.join(possible)})"
        raise ScriptError(
            file, entry.line, f"state '{state.name}' cannot be answered '{entry.verdict}'{hint}"
        )


def _uses_judge(spec: Any) -> bool:
    if spec.type == "llm_structured":
        return True
    return any(_uses_judge(sub) for sub in getattr(spec, "of", ()) or ())


def _matches(pattern: str, path: str) -> bool:
    parts, names = pattern.split("/"), path.split("/")
    return len(parts) == len(names) and all(
        p == n or (p == "*" or fnmatch.fnmatchcase(n, p)) for p, n in zip(parts, names, strict=True)
    )


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)
