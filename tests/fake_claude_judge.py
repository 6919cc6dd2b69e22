#!/usr/bin/env python3
"""A fake `claude` CLI for the claude:// judge: `-p PROMPT --output-format json --json-schema ...`.

FAKE_JUDGE_MODE picks the behaviour: `answer` (structured_output = FAKE_JUDGE_ANSWER),
`is_error`, `no_structured` (exit 0, subtype success, text only), `retrying_529` and
`retrying_login` (print on stderr what the CLI prints while it retries by itself, then hang),
`max_retries` (exit 0,
error subtype), `exit1`, `garbage`, `sleep`, `grandchild` (starts a `sleep 60` child, writes
its pid to FAKE_JUDGE_PIDFILE, then hangs), `huge` (prints FAKE_JUDGE_HUGE bytes on stdout,
then hangs 30 s). FAKE_JUDGE_ARGV, when set, receives argv as JSON;
FAKE_JUDGE_CWD, when set, receives the working directory; FAKE_JUDGE_COST sets the reported
total_cost_usd (`nan` and negative values included).

As the real CLI: the prompt is the word after `-p` when there is one, else standard input;
and any `@/abs/path`, `@~/path` or `@./path` token in it attaches that file, which the model
then sees (here: its text is put into the answer's `reason`). FAKE_JUDGE_PROMPT, when set,
receives the prompt.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

_AT_PATH = re.compile(r"(?<![^\s(\[{\"'])@((?:~|\.{1,2})?/[^\s\"')\]}]+)")


def _prompt(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg in ("-p", "--print"):
            following = argv[i + 1] if i + 1 < len(argv) else None
            if following is not None and not following.startswith("-"):
                return following
    return sys.stdin.read()


def _attached(prompt: str) -> str:
    texts = []
    for match in _AT_PATH.finditer(prompt):
        path = os.path.expanduser(match.group(1))
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
    return "\n".join(texts)


def main() -> int:
    argv = sys.argv[1:]
    prompt = _prompt(argv)
    if os.environ.get("FAKE_JUDGE_PROMPT"):
        with open(os.environ["FAKE_JUDGE_PROMPT"], "w", encoding="utf-8") as f:
            f.write(prompt)
    if os.environ.get("FAKE_JUDGE_ARGV"):
        with open(os.environ["FAKE_JUDGE_ARGV"], "w", encoding="utf-8") as f:
            json.dump(argv, f)
    if os.environ.get("FAKE_JUDGE_CWD"):
        with open(os.environ["FAKE_JUDGE_CWD"], "w", encoding="utf-8") as f:
            f.write(os.getcwd())
    mode = os.environ.get("FAKE_JUDGE_MODE", "answer")
    answer = json.loads(os.environ.get("FAKE_JUDGE_ANSWER") or '{"verdict": "success"}')
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 1200,
        "num_turns": 2,
        "result": "",
        "session_id": "fake",
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 800, "output_tokens": 25},
        "modelUsage": {"claude-sonnet-4-5": {"inputTokens": 800, "outputTokens": 25}},
    }
    if os.environ.get("FAKE_JUDGE_COST"):
        result["total_cost_usd"] = float(os.environ["FAKE_JUDGE_COST"])  # "nan" gives NaN
    seen = _attached(prompt)
    if seen:
        answer = {**answer, "reason": f"the attached file says: {seen}"}
    if mode == "answer":
        result["structured_output"] = answer
    elif mode == "is_error":
        result.update(is_error=True, result="API Error: 401 invalid login")
    elif mode == "no_structured":
        result["result"] = os.environ.get("FAKE_JUDGE_TEXT", "I think it went fine.")
    elif mode == "max_retries":
        result.update(subtype="error_max_structured_output_retries", result="")
    elif mode == "exit1":
        print("claude: not logged in", file=sys.stderr)
        return 1
    elif mode == "garbage":
        print("Welcome to Claude Code!")
        return 0
    elif mode == "sleep":
        time.sleep(5)
    elif mode in ("retrying_529", "retrying_login"):
        said = (
            'API Error (529 {"type":"error","error":{"type":"overloaded_error","message":'
            '"Overloaded"}})'
            if mode == "retrying_529"
            else "OAuth token has expired. Please obtain a new token or refresh your existing "
            "token."
        )
        for attempt in range(1, 11):
            print(f"{said} · Retrying in 1 seconds… (attempt {attempt}/10)", file=sys.stderr)
            sys.stderr.flush()
            time.sleep(1)
    elif mode == "huge":
        chunk = "x" * 65536
        for _ in range(int(os.environ.get("FAKE_JUDGE_HUGE", "0")) // len(chunk) + 1):
            try:
                sys.stdout.write(chunk)
            except BrokenPipeError:
                return 1
        time.sleep(30)
    elif mode == "grandchild":
        child = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL)
        with open(os.environ["FAKE_JUDGE_PIDFILE"], "w", encoding="utf-8") as f:
            f.write(str(child.pid))
        time.sleep(30)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
