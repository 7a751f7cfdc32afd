"""Opt-in content capture (``configure(capture_content=True)``): prompts, messages, outputs and tool data.

Content never becomes a span attribute. Instrumentation hands it to the recorder, which takes a
:func:`snapshot` on the agent's thread (plain data; credentials, headers, the environment and media cut) and
carries it beside the span to the local store, which keeps it in two forms: the lossless :func:`encode`
(authoritative; :func:`decode` reads it back) and the JSON :func:`project_json` (for people and SQL).
"""

from otel_agentdiag.content.codec import (
    ENCODING,
    ContentDecodeError,
    decode,
    encode,
    project,
    project_json,
)
from otel_agentdiag.content.snapshot import ContentLimits, snapshot
from otel_agentdiag.content.values import CapturedException, CapturedObject, Elided

__all__ = [
    "ENCODING",
    "CapturedException",
    "CapturedObject",
    "ContentDecodeError",
    "ContentLimits",
    "Elided",
    "decode",
    "encode",
    "project",
    "project_json",
    "snapshot",
]
