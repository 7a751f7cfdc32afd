"""Durations on the command line: ``30d``, ``12h``, ``90m``, ``45s``, ``500ms``, or a plain number of seconds.

:class:`Duration` is the click parameter type of every option that takes a length of time; it converts to
seconds (a float). A plain number is seconds, as these options always took (``2592000``, ``2.592e+06``);
``none``, where an option accepts it, switches the limit off (``math.inf``, as before). Anything else is a usage
error (exit 2) in one line that names the option and shows a value it takes, never the value given.
:func:`format_duration` writes seconds back the short way for help texts (``[default: 30d]``).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import click

from otel_agentdiag._internal.inputs import describe_input

__all__ = ["UNITS", "Duration", "format_duration", "parse_duration"]

UNITS: dict[str, int] = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
"""Seconds per unit suffix (``ms``, milliseconds, is the other one)."""

if TYPE_CHECKING:  # click 8.2+ types ParamType by the value it converts to and the input it takes
    _ParamType = click.ParamType[float, Any]
else:  # and click 8.1's is not subscriptable
    _ParamType = click.ParamType

_WITH_UNIT = re.compile(r"((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[-+]?[0-9]+)?)(ms|[dhms])")
_EXACT = 2**53
"""Below this, a whole number of a unit times the unit is exactly the float it stands for."""


def parse_duration(text: str) -> float:
    """Seconds for ``text``: a number with a unit (``30d``, ``12h``, ``90m``, ``45s``, ``500ms``, ``1.5h``; case
    and surrounding spaces do not matter) or a plain number of seconds. Raises ``ValueError`` for anything else,
    and for a duration that is not positive and finite; the message never quotes ``text``."""
    raw = text.strip().lower()
    match = _WITH_UNIT.fullmatch(raw)
    if match is not None:
        number, unit = match.groups()
        seconds = float(number) / 1000 if unit == "ms" else float(number) * UNITS[unit]
    else:
        try:
            seconds = float(raw)  # a plain number of seconds, as before (float() syntax, exponents included)
        except ValueError:
            raise ValueError("not a duration") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError("not a positive, finite duration")
    return seconds


def format_duration(seconds: float | None) -> str:
    """``seconds`` the short way :func:`parse_duration` reads back exactly: the largest unit that divides it
    (``2592000`` → ``30d``, ``300`` → ``5m``), else whole milliseconds (``0.5`` → ``500ms``), else the number;
    ``none`` for None or infinity (no limit)."""
    if seconds is None or seconds == math.inf:
        return "none"
    if math.isfinite(seconds) and seconds > 0:
        if seconds == int(seconds) and seconds < _EXACT:
            whole = int(seconds)
            for unit, size in UNITS.items():
                if whole % size == 0:
                    return f"{whole // size}{unit}"
        millis = round(seconds * 1000)
        if 0 < millis < _EXACT and millis / 1000 == seconds:
            return f"{millis}ms"
    return repr(float(seconds))


class Duration(_ParamType):
    """A click type for a length of time, converted to seconds (see :func:`parse_duration`).

    :param allow_none: ``none`` (any case) is accepted and converts to ``math.inf`` (the limit switched off).
    :param example: a value shown in the error message (``--max-session-age 30d``).
    """

    name = "duration"

    def __init__(self, *, allow_none: bool = False, example: str = "12h") -> None:
        self.allow_none = allow_none
        self.example = example

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):  # a default given as a number
            if math.isfinite(value) and value > 0:
                return float(value)
        elif isinstance(value, str):
            if self.allow_none and value.strip().lower() == "none":
                return math.inf
            try:
                return parse_duration(value)
            except ValueError:
                pass
        option = param.opts[0] if param is not None and param.opts else "the duration"
        accepted = "30d, 12h, 90m, 45s, 500ms" + (", or none" if self.allow_none else "")
        raise click.UsageError(
            f"{option} must be a positive number of seconds or a duration ({accepted}), e.g. {option} "
            f"{self.example}; {describe_input(value)} is not one",
            ctx,
        )

    def __repr__(self) -> str:
        return "DURATION"
