"""The Claude Code CLI side of slash actions: its command line, its stream-JSON, its errors.

Pure: nothing here starts a process (`actions.run_slash` does, through `process`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from little_loops.errors import LoopError

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

MAX_EVENT_LINE = 64 << 20  # a stream-JSON line longer than this is skipped, not buffered
SLASH_FLAGS = ("--dangerously-skip-permissions",)
_ROOT_REFUSAL = "cannot be used with root/sudo privileges"
_ROOT_HINT = (
    "the claude CLI refuses --dangerously-skip-permissions when running as root unless "
    "IS_SANDBOX=1 is set: inside a disposable container or VM run `export IS_SANDBOX=1` "
    "before `ll run`, or run ll as a non-root user"
)
RESULT_DETAIL_KEYS = (
    "is_error",
    "subtype",
    "total_cost_usd",
    "usage",
    "num_turns",
    "duration_ms",
    "duration_api_ms",
    "session_id",
    "permission_denials",  # tools the CLI refused to run (kept even when the step succeeded)
)


def claude_command(cli_value: str | None, env: Mapping[str, str]) -> list[str]:
    """The argv prefix for slash actions: `--claude PATH`, else `$LL_CLAUDE` split, else claude."""
    if cli_value:
        return [cli_value]
    raw = env.get("LL_CLAUDE", "").strip()
    if raw:
        import shlex  # (only here: a run of no slash action does without it)

        try:
            parts = shlex.split(raw)
        except ValueError as exc:
            raise LoopError(
                f"LL_CLAUDE={raw!r} is not a valid command line ({exc}); fix its quoting"
            ) from exc
        if parts:
            return parts
    return ["claude"]


def claude_flags(cli_value: str | None, env: Mapping[str, str]) -> list[str]:
    """The permission flags for slash actions: `--claude-flags`, else `$LL_CLAUDE_FLAGS`, else
    SLASH_FLAGS. An empty value means no flags (the CLI then asks for permissions itself)."""
    raw = cli_value if cli_value is not None else env.get("LL_CLAUDE_FLAGS")
    if raw is None:
        return list(SLASH_FLAGS)
    import shlex

    try:
        return shlex.split(raw)
    except ValueError as exc:
        raise LoopError(f"claude flags {raw!r} are not a valid command line ({exc})") from exc


def slash_error(exit_code: int | None, result: Mapping[str, Any] | None, stderr: str) -> str | None:
    """Why a finished slash action failed, or None. The CLI can exit 0 on failure."""
    said = _result_message(result) if result is not None and result.get("is_error") else ""
    if exit_code != 0:
        said = said or _last_line(stderr)
        reason = f"claude CLI exited with code {exit_code}" + (f": {said}" if said else "")
    elif result is None:
        reason = "claude CLI ended without a result event" + (
            f"; stderr: {_last_line(stderr)}" if stderr.strip() else ""
        )
    elif result.get("is_error"):
        subtype = result.get("subtype") or "error"
        reason = f"claude CLI reported an error ({subtype})" + (f": {said}" if said else "")
    else:
        return None
    if _ROOT_REFUSAL in stderr:
        reason += f"; {_ROOT_HINT}"
    return reason


def unknown_command(prompt: str, known: list[str] | None) -> str | None:
    """Why a slash prompt names a command the CLI does not know, or None.

    The CLI's `system/init` event lists the slash commands it knows (built-in, the project's,
    the user's, plugins'). A command missing from it is not run: the CLI hands the text to the
    model as a plain prompt and may still report success, so the step is an error instead.
    A CLI that lists none (an older one) is trusted.
    """
    if known is None:
        return None
    word = prompt.lstrip().split(maxsplit=1)[0] if prompt.strip() else ""
    if not word.startswith("/") or len(word) < 2:
        return None
    name = word[1:]
    if name in known:
        return None
    import difflib

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return (
        f"the claude CLI knows no slash command '/{name}' (its system/init lists "
        f"{len(known)}){hint}; add it under .claude/commands/ of the "
        "working directory (or ~/.claude/commands/), or fix the name"
    )


def _result_message(result: Mapping[str, Any]) -> str:
    text = result.get("result")
    if isinstance(text, str) and text.strip():
        return _clip(text.strip())
    errors = result.get("errors")
    if isinstance(errors, list) and errors:
        return _clip("; ".join(str(e) for e in errors))
    return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _clip(lines[-1]) if lines else ""


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class StreamJson:
    """Incremental parser of the CLI's stream-JSON: lines may arrive split across chunks."""

    def __init__(self, text_limit: int) -> None:
        self.pending = bytearray()
        self.skipping = False
        self.limit = max(text_limit, 0)
        self.texts: list[str] = []
        self.text_len = 0
        self.result: dict[str, Any] | None = None
        self.model: str | None = None
        self.slash_commands: list[str] | None = None  # what system/init says the CLI knows

    def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not self.skipping:
                    self.pending += chunk[start:]
                    if len(self.pending) > MAX_EVENT_LINE:
                        self.pending.clear()
                        self.skipping = True
                return
            if self.skipping:
                self.skipping = False
            elif self.pending:
                self.pending += chunk[start:nl]
                self._line(bytes(self.pending))
                self.pending.clear()
            else:
                self._line(chunk[start:nl])
            start = nl + 1

    def close(self) -> None:
        if self.pending and not self.skipping:
            self._line(bytes(self.pending))
        self.pending.clear()

    def output(self) -> str:
        if self.texts:
            text = "\n".join(self.texts)
            return text[-self.limit :] if len(text) > self.limit else text
        result = self.result.get("result") if self.result is not None else None
        return result if isinstance(result, str) else ""

    def _line(self, raw: bytes) -> None:
        raw = raw.strip()
        if not raw.startswith(b"{"):
            return
        try:
            event = json.loads(raw)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "assistant" and event.get("parent_tool_use_id") is None:
            message = event.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "text":
                    text = block.get("text")
                    if isinstance(text, str):
                        self._add_text(text)
        elif kind == "result":
            self.result = event
        elif kind == "system" and event.get("subtype") == "init":
            model = event.get("model")
            self.model = model if isinstance(model, str) else None
            known = event.get("slash_commands")
            if isinstance(known, list):
                self.slash_commands = [str(c).lstrip("/") for c in known]

    def _add_text(self, text: str) -> None:
        self.texts.append(text)
        self.text_len += len(text) + 1
        if self.text_len > 2 * self.limit:
            kept = "\n".join(self.texts)[-self.limit :]
            self.texts = [kept]
            self.text_len = len(kept)
