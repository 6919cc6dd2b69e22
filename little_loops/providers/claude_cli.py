"""The `claude://ALIAS` judge: one `claude -p ... --output-format json --json-schema` call.

For users with a Claude Code login and no API key. The CLI can exit 0 without answering the
schema, so the exit code, `is_error`, `subtype` and `structured_output` are all checked.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from . import (
    MAX_REPLY_BYTES,
    JudgeReply,
    JudgeRequest,
    ProviderError,
    loop_timeout,
    remaining,
    reply_too_large,
    token_count,
)


class ClaudeCliProvider:
    """Runs the Claude Code CLI once per judgement; nothing stays open between calls.

    The prompt goes on standard input (no argument limit: a 128 KiB prompt works), with every
    `@/path`, `@~/path` and `@./path` token neutralised first: the CLI attaches the file such a
    token names, tools or not, and a file's text must never reach a judge by way of output.

    The judge is sandboxed: no tools at all (`--tools ""`; `--json-schema` still works),
    no saved session, an empty scratch directory as its working directory, and its own
    process group, killed whole when it times out. The CLI has no flag that limits output
    tokens, so `max_tokens` does not apply to `claude://` judges (docs/judge.md).
    """

    name = "claude"

    def __init__(self, claude: Sequence[str], env: Mapping[str, str]) -> None:
        self._argv = tuple(claude)
        self._env = dict(env)

    def argv(self, request: JudgeRequest) -> list[str]:
        """The command line for one judgement; the prompt is not on it (`prompt`: stdin)."""
        return [
            *self._argv,
            "-p",
            "--output-format",
            "json",
            "--json-schema",
            json.dumps(dict(request.schema), separators=(",", ":")),
            "--model",
            request.model,
            "--tools",
            "",
            "--no-session-persistence",
        ]

    def complete(self, request: JudgeRequest) -> JudgeReply:
        budget = remaining(request.deadline, request.timeout)
        if budget <= 0:
            raise loop_timeout("starting")
        with tempfile.TemporaryDirectory(prefix="ll-judge-") as scratch:
            returncode, stdout, stderr = self._run(
                self.argv(request),
                budget,
                scratch,
                deadline=request.deadline,
                stdin=prompt(request),
            )
        return parse_result(returncode, stdout, stderr)

    def _run(
        self,
        argv: list[str],
        timeout: float,
        cwd: str,
        *,
        deadline: float | None = None,
        stdin: str = "",
    ) -> tuple[int, str, str]:
        """Exit code, stdout and stderr; `deadline` (the loop's) bounds every wait."""
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                cwd=cwd,
                start_new_session=True,  # its own process group: one kill ends every child
            )
        except FileNotFoundError as exc:
            raise ProviderError(
                f"cannot run the Claude Code CLI '{self._argv[0]}': not found; install it or "
                "set LL_CLAUDE / --claude",
                flags={"cli_error": True, "not_found": True},
            ) from exc
        except OSError as exc:
            raise ProviderError(
                f"cannot run the Claude Code CLI: {exc}", flags={"cli_error": True}
            ) from exc
        reader = _BoundedReader(proc, stdin)
        try:
            finished = reader.wait(timeout)
        except BaseException:
            _kill_group(proc.pid)
            proc.wait()
            raise
        _kill_group(proc.pid)  # anything it left running (or, past the cap, the CLI itself)
        if reader.too_large:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, remaining(deadline, 5.0)))
            raise reply_too_large("the Claude Code CLI")
        if not finished:
            # A child that left our group may hold the pipes; never past the loop's deadline.
            reader.wait(max(0.1, remaining(deadline, 5.0)))
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, remaining(deadline, 5.0)))  # killed: reap it
            stdout, stderr = reader.text()
            why, flags = retry_cause(f"{stderr}\n{stdout}")
            raise ProviderError(
                f"the Claude Code CLI did not answer within {timeout:g} s{why}",
                flags={"timeout": True, **flags},
            )
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, remaining(deadline, 5.0)))
        stdout, stderr = reader.text()
        return proc.returncode if proc.returncode is not None else -9, stdout, stderr

    def close(self) -> None:
        """Nothing to close: each judgement is its own process."""


# What the CLI prints while it retries by itself: the cause a timeout should name.
_CAUSES = (
    (
        re.compile(r"oauth token has expired|token (?:has )?expired|/login|invalid api key|"
                   r"authentication_error|\b401\b", re.IGNORECASE),
        "an expired or invalid login (run `claude` and /login, or set a valid key)",
        {"auth_error": True},
    ),
    (re.compile(r"\b529\b|overloaded", re.IGNORECASE), "the API being overloaded (529)",
     {"overloaded": True}),
    (re.compile(r"\b429\b|rate.?limit", re.IGNORECASE), "a rate limit (429)",
     {"rate_limited": True}),
)  # fmt: skip


def retry_cause(output: str) -> tuple[str, dict[str, Any]]:
    """(text for the timeout message, flags) naming why a CLI that timed out was still
    retrying, from what it printed; ("", {}) when it said nothing recognisable."""
    for pattern, cause, flags in _CAUSES:
        lines = [line.strip() for line in output.splitlines() if pattern.search(line)]
        if lines:
            last = " ".join(lines[-1].split())[:200]
            return f": it was retrying after {cause}; it said: {last!r}", flags
    return "", {}


# `@` before an absolute, home or relative path: the CLI would attach that file.
_AT_PATH = re.compile(r"@(?=~|/|\.{1,2}/)")


def neutralise_at_paths(text: str) -> str:
    """`@/etc/x`, `@~/.aws/credentials`, `@../x` written with a fullwidth at sign, which the
    CLI does not take for a file to attach; a model still reads the text."""
    return _AT_PATH.sub("\uff20", text)


def prompt(request: JudgeRequest) -> str:
    """What the CLI reads on stdin: the system prompt and the user message, `@` paths
    neutralised (the rubric, examples, output and captured values alike)."""
    return neutralise_at_paths(f"{request.system}\n\n{request.user}")


STDERR_KEPT = 64 * 1024  # the tail of the CLI's stderr kept for messages


class _BoundedReader:
    """Feeds the prompt and reads both pipes in threads, keeping at most MAX_REPLY_BYTES of
    stdout (past it: `too_large`, and the CLI's group is killed at once) and the last
    STDERR_KEPT bytes of stderr. `communicate` would keep all of either."""

    def __init__(self, proc: subprocess.Popen[bytes], stdin: str) -> None:
        self._proc = proc
        self._out = bytearray()
        self._err = bytearray()
        self.too_large = False
        self._threads = [
            threading.Thread(target=self._feed, args=(stdin.encode("utf-8"),), daemon=True),
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _feed(self, data: bytes) -> None:
        pipe = self._proc.stdin
        assert pipe is not None
        with contextlib.suppress(OSError, ValueError):  # it may exit without reading it all
            pipe.write(data)
        with contextlib.suppress(OSError, ValueError):
            pipe.close()

    def _read_out(self) -> None:
        pipe = self._proc.stdout
        assert pipe is not None
        with pipe, contextlib.suppress(OSError, ValueError):  # each thread closes its pipe
            while chunk := os.read(pipe.fileno(), 65536):
                self._out += chunk
                if len(self._out) > MAX_REPLY_BYTES:
                    self.too_large = True
                    _kill_group(self._proc.pid)
                    return

    def _read_err(self) -> None:
        pipe = self._proc.stderr
        assert pipe is not None
        with pipe, contextlib.suppress(OSError, ValueError):
            while chunk := os.read(pipe.fileno(), 65536):
                self._err += chunk
                if len(self._err) > 2 * STDERR_KEPT:
                    del self._err[:-STDERR_KEPT]

    def wait(self, timeout: float) -> bool:
        """True once both pipes are at their end (or stdout went past the cap) in time."""
        until = time.monotonic() + timeout
        for thread in self._threads[1:]:
            thread.join(max(0.0, until - time.monotonic()))
            if self.too_large:
                return True
        return not any(thread.is_alive() for thread in self._threads[1:])

    def text(self) -> tuple[str, str]:
        out = bytes(self._out).decode("utf-8", "replace")
        return out, bytes(self._err[-STDERR_KEPT:]).decode("utf-8", "replace")


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def parse_result(returncode: int, stdout: str, stderr: str) -> JudgeReply:
    """The CLI's `--output-format json` result -> JudgeReply, or ProviderError."""
    result: Any = None
    try:
        result = json.loads(stdout)
    except ValueError:
        result = None
    if not isinstance(result, Mapping):
        tail = (stderr.strip() or stdout.strip())[-200:]
        raise ProviderError(
            f"the Claude Code CLI exited {returncode} without a JSON result: {tail!r}",
            flags={"cli_error": True, "exit_code": returncode},
        )
    subtype = result.get("subtype")
    if returncode != 0 or result.get("is_error") or subtype not in (None, "success"):
        message = result.get("result") or stderr.strip()[-200:] or subtype
        raise ProviderError(
            f"the Claude Code CLI failed (exit {returncode}, subtype {subtype}): {message}",
            flags={"cli_error": True, "exit_code": returncode, "subtype": subtype},
        )
    usage_field = result.get("usage")
    usage: Mapping[str, Any] = usage_field if isinstance(usage_field, Mapping) else {}
    answer = result.get("structured_output")
    cost = result.get("total_cost_usd")
    text = result.get("result")
    return JudgeReply(
        answer=answer if isinstance(answer, Mapping) else None,
        text=text if isinstance(text, str) else "",
        model=_model_of(result),
        input_tokens=token_count(usage.get("input_tokens")),
        output_tokens=token_count(usage.get("output_tokens")),
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
        stop_reason=subtype if isinstance(subtype, str) else None,
    )


def _model_of(result: Mapping[str, Any]) -> str:
    usage = result.get("modelUsage")
    if isinstance(usage, Mapping) and usage:
        return str(next(iter(usage)))
    return ""
