"""instructor in a hand-written loop traced by hand (``agent_run`` / ``iteration`` / ``tool_call``), with
openinference-instrumentation-instructor and -openai, in an environment of its own
(``tests/envs/contract-instructor.txt``; the app: ``apps/instructor_app.py``)."""

from __future__ import annotations

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "instructor, a hand-written loop (OpenInference)",
        ("instructor", "openinference-instrumentation-instructor", "openinference-instrumentation-openai"),
        env="contract-instructor",
        app="instructor_app.py",
        truth=Truth(),
        short={},
    ),
)
