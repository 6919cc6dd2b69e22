"""The heartbeat thread: beats while a step runs, and sleeps through a run of short steps."""

from __future__ import annotations

import threading
import time

from little_loops.report.heartbeat import Heartbeat


def test_a_run_of_short_steps_does_not_wake_the_thread_at_every_step() -> None:
    """Each start used to notify the thread, which woke, found its beat 30 s away and slept
    again: a thread switch per step. A start now wakes it only when it must beat sooner."""
    beats: list[float] = []
    heart = Heartbeat(30.0, beats.append)
    try:
        for _ in range(200):
            heart.start(time.monotonic())
            time.sleep(0.001)  # time for a woken thread to run and wait again
            heart.stop()
        assert heart.wakes <= 5, heart.wakes
        assert beats == []
    finally:
        heart.close()


def test_a_step_after_a_pause_is_beaten_for() -> None:
    """Between steps the thread sleeps without a deadline; the next start must wake it."""
    beaten = threading.Event()
    heart = Heartbeat(0.05, lambda seconds: beaten.set())
    try:
        heart.start(time.monotonic())
        heart.stop()
        time.sleep(0.2)  # its first deadline passed with no step: it sleeps without one now
        assert not beaten.is_set()
        heart.start(time.monotonic())
        assert beaten.wait(10), "no beat for a step started after a pause"
    finally:
        heart.close()
