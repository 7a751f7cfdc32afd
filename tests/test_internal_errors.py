"""``_internal.errors``: an internal failure is logged by step and type, never its message; with
``AGENTDIAG_DEBUG`` on, also where it was raised (file, line and function names), still never the message."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error

SENTINEL = "sk-sentinel-4f1c9e user@example.com /home/alice/secret.txt"
"""What an exception's message may carry: the data the logs must never repeat."""


class _Boom(Exception):
    pass


def _innermost_step(payload: str) -> None:
    raise _Boom(f"could not parse {payload}")


def _outer_step(payload: str) -> None:
    try:
        _innermost_step(payload)
    except _Boom as exc:
        raise ValueError(f"wrapped: {payload}") from exc


@pytest.fixture
def every_log_line() -> Iterator[io.StringIO]:
    """Everything any logger writes, formatted with tracebacks as a handler would print them, at every level."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    level = root.level
    ours = logging.getLogger("otel_agentdiag")
    our_level = ours.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    ours.setLevel(logging.DEBUG)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        ours.setLevel(our_level)


def _fail_inside_telemetry() -> None:
    with handle_internal_errors("recording a span"):
        _outer_step(SENTINEL)


@pytest.mark.parametrize("switch", [None, "0", "1", "true"])
def test_the_message_never_reaches_a_log(
    switch: str | None, every_log_line: io.StringIO, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    if switch is not None:
        monkeypatch.setenv("AGENTDIAG_DEBUG", switch)
    caplog.set_level(logging.DEBUG)
    _fail_inside_telemetry()
    text = every_log_line.getvalue()
    assert "recording a span failed (ValueError); the agent is unaffected" in text
    assert "sentinel" not in text and "sentinel" not in caplog.text
    assert "could not parse" not in text and "wrapped:" not in text
    assert all(record.exc_info is None and "sentinel" not in record.getMessage() for record in caplog.records)


def test_frames_only_with_the_switch(every_log_line: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    _fail_inside_telemetry()
    off = every_log_line.getvalue()
    assert "_innermost_step" not in off and "_outer_step" not in off and "line " not in off

    monkeypatch.setenv("AGENTDIAG_DEBUG", "1")
    every_log_line.truncate(0)
    every_log_line.seek(0)
    _fail_inside_telemetry()
    on = every_log_line.getvalue()
    debug = [line for line in on.splitlines() if not line.startswith("WARNING")]
    assert debug[0] == "DEBUG otel_agentdiag otel-agentdiag: recording a span failed (ValueError), raised at:"
    assert f'File "{__file__}", line' in on
    # innermost last, then the exception it was raised from, with its own frames
    assert on.index("in _fail_inside_telemetry") < on.index("in _outer_step") < on.index("caused by _Boom:")
    assert on.index("caused by _Boom:") < on.index("in _innermost_step")
    assert "sentinel" not in on and "could not parse" not in on
    assert "raise " not in on  # no source text either


def test_the_frames_are_debug_records_only(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """At INFO and above the switch changes nothing: the frames are a DEBUG record."""
    monkeypatch.setenv("AGENTDIAG_DEBUG", "1")
    caplog.set_level(logging.INFO)
    log_internal_error("exporting a batch", _raised())
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "otel-agentdiag: exporting a batch failed (_Boom); the agent is unaffected")
    ]


def test_a_malformed_switch_is_off_with_a_warning(every_log_line: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDIAG_DEBUG", "verbose")
    log_internal_error("exporting a batch", _raised())
    text = every_log_line.getvalue()
    assert "AGENTDIAG_DEBUG is not true or false" in text
    assert "_raised" not in text


def _raised() -> _Boom:
    try:
        _innermost_step(SENTINEL)
    except _Boom as exc:
        return exc
    raise AssertionError("unreachable")
