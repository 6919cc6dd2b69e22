"""Issue 23, medium and low: a judge's reply is bounded in size, whichever provider asks,
and a 529 storm under a loop `timeout:` ends as a timeout. Through the real `ll`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from llm_server import (
    LlmServer,
    api_error,
    chat,
    llm_server_fixture,  # noqa: F401  (the llm_server fixture)
    message,
)
from project import Project
from test_judge_e2e import ll_run, loop_file

from little_loops.providers import MAX_REPLY_BYTES

HUGE = MAX_REPLY_BYTES + 2 * 1024 * 1024
CAP = f"{MAX_REPLY_BYTES // (1024 * 1024)} MiB"


def test_a_claude_judge_printing_without_end_is_cut_at_the_cap(
    project: Project, tmp_path: Path
) -> None:
    """The CLI prints more than the cap and keeps running: the group is killed at once,
    the verdict is `error` naming the cap, and the run does not wait for the CLI."""
    loop = loop_file(tmp_path, "model: claude://sonnet\ntimeout: 60")
    started = time.monotonic()
    run = ll_run(
        project, loop, None, "--no-cache", FAKE_JUDGE_MODE="huge", FAKE_JUDGE_HUGE=str(HUGE)
    )
    assert time.monotonic() - started < 25
    (judged,) = run.judged()
    assert judged["verdict"] == "error"
    assert f"more than {CAP}" in judged["details"]["error"], judged["details"]
    assert judged["details"]["too_large"] is True


def test_an_anthropic_judge_reply_larger_than_the_cap_is_an_error(
    project: Project, tmp_path: Path, llm_server: LlmServer
) -> None:
    loop = loop_file(tmp_path, "timeout: 30")
    llm_server.script(then=message({"verdict": "success"}, text="x" * HUGE))
    run = ll_run(project, loop, llm_server, "--no-cache")
    (judged,) = run.judged()
    assert judged["verdict"] == "error"
    assert f"more than {CAP}" in judged["details"]["error"], judged["details"]
    assert len(llm_server.requests) == 1  # not retried: the same reply would come again


def test_an_openai_judge_reply_larger_than_the_cap_is_an_error(
    project: Project, tmp_path: Path, llm_server: LlmServer
) -> None:
    loop = loop_file(tmp_path, "model: openai://gpt-4o\ntimeout: 30")
    llm_server.script(then=chat("x" * HUGE))
    run = ll_run(project, loop, llm_server, "--no-cache")
    (judged,) = run.judged()
    assert judged["verdict"] == "error"
    assert f"more than {CAP}" in judged["details"]["error"], judged["details"]
    assert len(llm_server.requests) == 1


@pytest.mark.slow  # judge timing: each run waits out its loop's timeout
@pytest.mark.parametrize(
    ("retry_after", "on_error"), [("1", "check"), ("10", "check"), ("10", None)]
)
def test_a_529_storm_under_a_loop_timeout_ends_as_a_timeout(
    project: Project, tmp_path: Path, llm_server: LlmServer, retry_after: str, on_error: str | None
) -> None:
    """The API answers 529 every time; the loop's `timeout: 3` runs out while the judge
    retries (or while it would wait): outcome timeout, exit 124, never an error (3)."""
    llm_server.script(
        then=api_error(529, "overloaded_error", "Overloaded", headers={"retry-after": retry_after})
    )
    loop = loop_file(tmp_path, "timeout: 30")
    text = loop.read_text(encoding="utf-8").replace(
        "max_iterations: 6\n", "max_iterations: 50\ntimeout: 3\n"
    )
    text = text.replace("      error: broken\n", f"      error: {on_error}\n" if on_error else "")
    loop.write_text(text, encoding="utf-8")
    # `ll` runs in this process: the SDK imported here first is not paid out of the loop's 3 s
    # (its import alone took longer than that on a machine at load 10).
    import anthropic  # noqa: F401

    started = time.monotonic()
    run = ll_run(project, loop, llm_server, "--no-cache")
    assert run.code == 124, (run.code, run.stderr, [e["event"] for e in run.events])
    assert time.monotonic() - started < 35  # the loop's 3 s, and a busy machine's start-up
    assert len(llm_server.requests) >= 1
