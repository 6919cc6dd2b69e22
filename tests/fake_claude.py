#!/usr/bin/env python3
"""A fake `claude` CLI for tests: speaks the print mode's stream-JSON, with no network.

Install it on PATH with `tests/fakes.py` (`fake_claude` fixture or `install_fake_claude`).
Only the standard library is used, so any python3 runs it.

Behaviour is chosen by environment variables:

FAKE_CLAUDE_SCENARIO   what to do (default `ok`). A comma list (`error_result,ok`) picks the
                       n-th item on the n-th call when FAKE_CLAUDE_STATE names a counter file;
                       the last item repeats. Scenarios:
    ok             init event, one assistant text message, success result; exit 0
    multi          init, text, a tool_use + tool_result round trip, a sub-agent message (to be
                   ignored), more text, result; written in small pieces so lines split across reads
    result_only    init and a result whose `result` holds the text; no assistant text event
    error_result   assistant text, then a result with is_error true (subtype
                   error_during_execution); exit 0, as the real CLI may
    max_turns      result with subtype error_max_turns, is_error true, no `result` text; exit 0
    exit_nonzero   init, a line on stderr, exit FAKE_CLAUDE_EXIT (default 2); no result event
    no_result      init and assistant text, then exit 0 without a result event
    garbage        ok, with non-JSON lines and a JSON array line mixed into stdout
    hang           init, then sleep forever (a child `sleep` in the same group, too)
    slow           ok, after sleeping FAKE_CLAUDE_DELAY seconds (default 1)
    root_refusal   unless IS_SANDBOX=1: the real CLI's root refusal on stderr, exit 1;
                   with IS_SANDBOX=1: ok
    big            ok, with FAKE_CLAUDE_TEXT_BYTES (default 2000000) bytes of assistant text
    script         write the file FAKE_CLAUDE_SCRIPT to stdout verbatim, exit FAKE_CLAUDE_EXIT
                   (default 0): replay any recorded stream
FAKE_CLAUDE_TEXT       the assistant's text (default: "fake claude: " + the prompt)
FAKE_CLAUDE_RESULT     the result event's `result` (default: the assistant's text)
FAKE_CLAUDE_STRUCTURED JSON put in the result event's `structured_output` (for --json-schema)
FAKE_CLAUDE_COST       total_cost_usd of the result event (default 0.0123)
FAKE_CLAUDE_COMMANDS   the project's and user's slash commands, comma-separated, listed in the init
                       event's `slash_commands` after the built-in ones (as the real CLI lists
                       them), with the names of `.claude/commands/*.md` in the working directory.
                       Unset: the command the prompt names is listed too (a project defining
                       it). A prompt naming a command not listed is sent to the model as text,
                       and the result is still `success`, as the real CLI does.
FAKE_CLAUDE_DENIALS    JSON list for the result event's `permission_denials` (default [])
FAKE_CLAUDE_ARGV_LOG   append one JSON line per call: {"argv", "pid", "cwd", "is_sandbox",
                       "scenario"}; `pid` is also the process group the caller started

`--output-format json` prints the result event alone as one JSON object; `text` prints the
result text; `stream-json` (the default here) prints one event a line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from typing import Any

ROOT_REFUSAL = (
    "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"
)
MODEL = "claude-fake-1"
# What the real CLI's init event lists before the project's and user's own commands.
BUILTIN_COMMANDS = [
    "add-dir", "agents", "clear", "compact", "config", "context", "cost", "doctor", "exit",
    "help", "init", "mcp", "memory", "model", "permissions", "pr-comments", "release-notes",
    "review", "security-review", "status", "todos",
]  # fmt: skip


def slash_commands(prompt: str) -> list[str]:
    """The init event's `slash_commands`: built-in, then the project's and user's."""
    listed = os.environ.get("FAKE_CLAUDE_COMMANDS")
    own = [c.strip() for c in (listed or "").split(",") if c.strip()]
    folder = os.path.join(os.getcwd(), ".claude", "commands")
    if os.path.isdir(folder):
        own += sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".md"))
    word = prompt.lstrip().split(maxsplit=1)[0] if prompt.strip() else ""
    if listed is None and word.startswith("/") and len(word) > 1:
        own.append(word[1:])
    return [*BUILTIN_COMMANDS, *(c for c in own if c not in BUILTIN_COMMANDS)]


def _option(argv: list[str], name: str, default: str | None = None) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def _prompt(argv: list[str]) -> str | None:
    """The prompt argument: the word after -p/--print, unless that is an option."""
    for i, arg in enumerate(argv):
        if arg in ("-p", "--print"):
            following = argv[i + 1] if i + 1 < len(argv) else None
            return None if following is None or following.startswith("-") else following
    return None


_AT_PATH = re.compile(r"(?<![^\s(\[{\"'])@((?:~|\.{1,2})?/[^\s\"')\]}]+)")


def _attached(prompt: str) -> str:
    """The text of every file an `@/abs`, `@~/` or `@./` token names, as the real CLI
    attaches them to the prompt."""
    texts = []
    for match in _AT_PATH.finditer(prompt):
        path = os.path.expanduser(match.group(1))
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
    return "\n".join(texts)


def _scenario() -> str:
    items = [s.strip() for s in os.environ.get("FAKE_CLAUDE_SCENARIO", "ok").split(",")]
    items = [s for s in items if s] or ["ok"]
    state = os.environ.get("FAKE_CLAUDE_STATE")
    if not state:
        return items[0]
    try:
        with open(state) as fh:
            calls = int(fh.read().strip() or 0)
    except FileNotFoundError:
        calls = 0
    with open(state, "w") as fh:
        fh.write(str(calls + 1))
    return items[min(calls, len(items) - 1)]


class Out:
    """Writes events in the chosen output format."""

    def __init__(
        self, fmt: str, session: str, pieces: bool = False, commands: list[str] | None = None
    ) -> None:
        self.fmt = fmt
        self.session = session
        self.pieces = pieces
        self.commands = commands or list(BUILTIN_COMMANDS)

    def raw(self, text: str) -> None:
        if self.fmt != "stream-json":
            return
        if self.pieces:
            # Split every line across several writes, as a pipe may deliver it.
            for i in range(0, len(text), 7):
                sys.stdout.write(text[i : i + 7])
                sys.stdout.flush()
                time.sleep(0.001)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()

    def event(self, event: dict[str, Any]) -> None:
        self.raw(json.dumps(event) + "\n")

    def init(self) -> None:
        self.event(
            {
                "type": "system",
                "subtype": "init",
                "cwd": os.getcwd(),
                "session_id": self.session,
                "tools": ["Bash", "Read", "Edit", "Write", "Glob", "Grep"],
                "mcp_servers": [],
                "model": MODEL,
                "permissionMode": "bypassPermissions",
                "slash_commands": self.commands,
                "apiKeySource": "none",
                "output_style": "default",
                "agents": ["general-purpose"],
                "uuid": str(uuid.uuid4()),
            }
        )

    def assistant(self, content: list[dict[str, Any]], parent: str | None = None) -> None:
        self.event(
            {
                "type": "assistant",
                "message": {
                    "id": "msg_" + uuid.uuid4().hex[:16],
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": content,
                    "stop_reason": None,
                    "usage": {"input_tokens": 12, "output_tokens": 34},
                },
                "parent_tool_use_id": parent,
                "session_id": self.session,
            }
        )

    def text(self, text: str) -> None:
        self.assistant([{"type": "text", "text": text}])

    def result(self, *, text: str | None, is_error: bool = False, subtype: str = "success") -> None:
        event: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "is_error": is_error,
            "duration_ms": 1234,
            "duration_api_ms": 1100,
            "num_turns": 2,
            "session_id": self.session,
            "total_cost_usd": float(os.environ.get("FAKE_CLAUDE_COST", "0.0123")),
            "usage": {
                "input_tokens": 120,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 2048,
                "output_tokens": 56,
            },
        }
        if text is not None:
            event["result"] = text
        event["permission_denials"] = json.loads(os.environ.get("FAKE_CLAUDE_DENIALS") or "[]")
        event["uuid"] = str(uuid.uuid4())
        structured = os.environ.get("FAKE_CLAUDE_STRUCTURED")
        if structured:
            event["structured_output"] = json.loads(structured)
        if self.fmt == "stream-json":
            self.event(event)
        elif self.fmt == "json":
            sys.stdout.write(json.dumps(event) + "\n")
        else:
            sys.stdout.write((text or "") + "\n")
        sys.stdout.flush()


def main(argv: list[str]) -> int:
    prompt = _prompt(argv)
    if prompt is None:
        # as the real CLI: without a prompt argument, print mode reads it from stdin
        prompt = sys.stdin.read()
        if not prompt.strip():
            sys.stderr.write(
                "Error: Input must be provided either through stdin or as a prompt argument "
                "when using --print\n"
            )
            return 1
    fmt = _option(argv, "--output-format", "text") or "text"
    scenario = _scenario()
    log = os.environ.get("FAKE_CLAUDE_ARGV_LOG")
    if log:
        with open(log, "a") as fh:
            record = {
                "argv": argv,
                "pid": os.getpid(),
                "cwd": os.getcwd(),
                "is_sandbox": os.environ.get("IS_SANDBOX"),
                "scenario": scenario,
            }
            fh.write(json.dumps(record) + "\n")

    text = os.environ.get("FAKE_CLAUDE_TEXT", f"fake claude: {prompt}")
    seen = _attached(prompt)
    if seen:  # as the real CLI: an `@/path` token attaches the file, and the model sees it
        text += f"\nattached: {seen}"
    result_text = os.environ.get("FAKE_CLAUDE_RESULT", text)
    exit_code = int(os.environ.get("FAKE_CLAUDE_EXIT", "2" if scenario == "exit_nonzero" else "0"))
    out = Out(fmt, str(uuid.uuid4()), pieces=scenario == "multi", commands=slash_commands(prompt))

    refused = "--dangerously-skip-permissions" in argv and os.environ.get("IS_SANDBOX") != "1"
    if scenario == "root_refusal" and refused:
        sys.stderr.write(ROOT_REFUSAL + "\n")
        return 1
    if scenario == "script":
        with open(os.environ["FAKE_CLAUDE_SCRIPT"], "rb") as fh:
            sys.stdout.buffer.write(fh.read())
        return exit_code

    out.init()
    if scenario in ("ok", "root_refusal", "slow", "garbage", "big"):
        if scenario == "slow":
            time.sleep(float(os.environ.get("FAKE_CLAUDE_DELAY", "1")))
        if scenario == "garbage":
            out.raw("this is not JSON\n[1, 2, 3]\n{broken json\n")
        if scenario == "big":
            size = int(os.environ.get("FAKE_CLAUDE_TEXT_BYTES", "2000000"))
            text = "y" * size
            result_text = os.environ.get("FAKE_CLAUDE_RESULT", "big done")
        out.text(text)
        if scenario == "garbage":
            out.raw("\n   \nWarning: something chatty\n")
        out.result(text=result_text)
    elif scenario == "multi":
        out.text("first part")
        tool_id = "toolu_" + uuid.uuid4().hex[:12]
        out.assistant(
            [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}]
        )
        out.event(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": tool_id, "content": "a\nb\n"}
                    ],
                },
                "parent_tool_use_id": None,
                "session_id": out.session,
            }
        )
        out.assistant([{"type": "text", "text": "sub-agent chatter"}], parent=tool_id)
        out.assistant([{"type": "text", "text": "second part"}, {"type": "text", "text": "third"}])
        out.result(text="second part\nthird")
    elif scenario == "result_only":
        out.result(text=result_text)
    elif scenario == "error_result":
        out.text(text)
        out.result(
            text=os.environ.get("FAKE_CLAUDE_RESULT", "API Error: 529 overloaded"),
            is_error=True,
            subtype="error_during_execution",
        )
    elif scenario == "max_turns":
        out.result(text=None, is_error=True, subtype="error_max_turns")
    elif scenario == "exit_nonzero":
        sys.stderr.write("Error: fake claude failed on purpose\n")
        sys.stderr.flush()
    elif scenario == "no_result":
        out.text(text)
    elif scenario == "hang":
        sys.stderr.write("hanging\n")
        sys.stderr.flush()
        with subprocess.Popen(["sleep", "3600"]) as child:
            child.wait()
    else:
        sys.stderr.write(f"fake claude: unknown FAKE_CLAUDE_SCENARIO {scenario!r}\n")
        return 64
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
