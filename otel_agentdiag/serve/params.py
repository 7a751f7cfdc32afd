"""Query parameters of the Jaeger APIs: Go durations, lookbacks, µs and RFC 3339 times, trace ids and tags."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime

from otel_agentdiag._internal.inputs import describe_input

__all__ = [
    "BadParameter",
    "go_duration_ns",
    "lookback_ns",
    "parse_int",
    "parse_tags",
    "rfc3339_ns",
    "trace_id_hex",
]


MAX_NS = (1 << 63) - 1
"""Where SQLite's integers end (the year 2262 in ns): a time or duration beyond it is capped, no bound."""


class BadParameter(ValueError):
    """A query parameter that cannot be read: the message names the parameter and says what it must be (never
    repeating what was given beyond its length and kind)."""


_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
# ASCII digits only: ``\d`` (and ``str.isdigit``) take Unicode digits, which ``int()`` then refuses or reads.
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_LOOKBACK = re.compile(r"([0-9]{1,19})([mhdw])")
_INTEGER = re.compile(r"[+-]?[0-9]{1,19}")
MAX_TAGS_TEXT = 8192
"""The longest ``tags`` JSON read (a filter is a few pairs; a bigger text is refused unparsed)."""
_LOOKBACK_NS = {"m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def go_duration_ns(name: str, text: str) -> int:
    """A Go ``time.ParseDuration`` text (``1.5ms``, ``2s``, ``100us``, ``1m30s``, ``0``) in nanoseconds;
    negative durations are refused (no span lasts less than nothing)."""
    value = text.strip()
    if value == "0":
        return 0
    if value.startswith("+"):
        value = value[1:]
    position, total = 0, 0.0
    while position < len(value):
        match = _GO_PART.match(value, position)
        if match is None:
            break
        total += float(match.group(1)) * _UNITS_NS[match.group(2)]  # inf for a number past float's range
        position = match.end()
    if not value or position != len(value):
        raise BadParameter(
            f"{name}: not a duration ({describe_input(text)}); use a Go duration such as 1.5ms, 2s, 100us or 1m30s"
        )
    if not math.isfinite(total) or total >= MAX_NS:
        return MAX_NS  # beyond: longer than any span
    return round(total)


def lookback_ns(name: str, text: str) -> int | None:
    """Jaeger UI's ``lookback`` (``1h``, ``2d``, ``30m``, ``1w``) in nanoseconds; None for ``custom`` or empty
    (the ``start``/``end`` parameters then decide)."""
    value = text.strip()
    if value in ("", "custom"):
        return None
    match = _LOOKBACK.fullmatch(value)
    if match is None:
        try:
            return go_duration_ns(name, value)
        except BadParameter:
            raise BadParameter(
                f"{name}: not a lookback ({describe_input(text)}); use 30m, 1h, 2d, 1w or custom"
            ) from None
    return min(int(match.group(1)) * _LOOKBACK_NS[match.group(2)] * 1_000_000_000, MAX_NS)


def parse_int(name: str, text: str, *, minimum: int = 0, maximum: int = MAX_NS) -> int:
    """A decimal integer (ASCII digits) from ``minimum`` to ``maximum``: by default what SQLite's 64-bit integers
    hold, so no query parameter can overflow a statement."""
    value = text.strip()
    if not _INTEGER.fullmatch(value) or not minimum <= int(value) <= maximum:
        raise BadParameter(f"{name}: not an integer from {minimum} to {maximum} ({describe_input(text)})")
    return int(value)


def rfc3339_ns(name: str, text: str) -> int:
    """An RFC 3339 time (``2024-01-15T10:30:00Z``, fractional seconds to the nanosecond, any offset) in
    nanoseconds since the epoch."""
    value = text.strip()
    match = re.fullmatch(r"(\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?([Zz]|[+-]\d\d:\d\d)", value, re.ASCII)
    if match is None:
        raise BadParameter(f"{name}: not an RFC 3339 time ({describe_input(text)}); e.g. 2024-01-15T10:30:00Z")
    head, fraction, offset = match.groups()
    try:
        moment = datetime.fromisoformat(
            head.replace("t", "T").replace(" ", "T") + ("+00:00" if offset in "Zz" else offset)
        )
    except ValueError:
        raise BadParameter(f"{name}: not a valid date and time ({describe_input(text)})") from None
    nanos = int((fraction or "0").ljust(9, "0"))
    return max(min(int(moment.timestamp()) * 1_000_000_000 + nanos, MAX_NS), -MAX_NS)


def trace_id_hex(text: str) -> str:
    """A trace id as stored (32 lowercase hex digits): a shorter hex id is left-padded with zeros, as Jaeger
    does (a 64-bit id of an older tracer). Raises :class:`BadParameter` for anything else."""
    value = text.strip().lower()
    if not (1 <= len(value) <= 32) or any(c not in "0123456789abcdef" for c in value):
        raise BadParameter(f"traceID: not a trace id ({describe_input(text)}); a trace id is 1 to 32 hex digits")
    return value.rjust(32, "0")


def parse_tags(name: str, texts: list[str], pairs: list[str]) -> dict[str, str]:
    """Tag filters: each JSON object in ``texts`` (Jaeger's ``tags={"k":"v"}``; values compared as text) and
    each ``key:value`` (or ``key=value``) in ``pairs`` (the ``tag=`` form Jaeger UI sends)."""
    found: dict[str, str] = {}
    for text in texts:
        if not text.strip():
            continue
        if len(text) > MAX_TAGS_TEXT:
            raise BadParameter(f"{name}: longer than {MAX_TAGS_TEXT} characters ({describe_input(text)})")
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested past the stack (short texts can be)
            value = None
        if not isinstance(value, dict):
            raise BadParameter(f'{name}: not a JSON object of tags ({describe_input(text)}); e.g. {{"error":"true"}}')
        for key, item in value.items():
            if isinstance(item, (dict, list)):
                raise BadParameter(f"{name}: a tag's value must be text, a number or a boolean, not an object or array")
            found[str(key)] = _text(item)
    for pair in pairs:
        separator = ":" if ":" in pair else "="
        key, sep, item = pair.partition(separator)
        if not sep or not key:
            raise BadParameter(f"tag: not a key:value pair ({describe_input(pair)})")
        found[key] = item
    return found


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)
