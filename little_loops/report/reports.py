"""Reports for CI, written when a run ends: the import point of `junit` and `github`.

Both are event listeners (callables taking one typed event record) that `ll run` / `ll resume`
attach next to the renderer. They fold the run's events into a `History` as they arrive and do their
work on `loop_complete`. A resumed run's listeners only see the events after the resume, so at
the end they re-read the whole event log of the run, when it is found under `base_dir`.
"""

from __future__ import annotations

from little_loops.record.history import FAILING_VERDICTS
from little_loops.report.github import (
    MAX_ANNOTATIONS,
    Annotation,
    GitHubReport,
    escape_data,
    escape_property,
    github_report_from_env,
    write_outputs,
)
from little_loops.report.junit import (
    JUnitReport,
    junit_xml,
)

__all__ = [
    "FAILING_VERDICTS",
    "MAX_ANNOTATIONS",
    "Annotation",
    "GitHubReport",
    "JUnitReport",
    "escape_data",
    "escape_property",
    "github_report_from_env",
    "junit_xml",
    "write_outputs",
]
