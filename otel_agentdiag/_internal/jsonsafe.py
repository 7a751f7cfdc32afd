"""JSON for values JSON cannot hold as they are: non-finite floats, times in nanoseconds since the epoch."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) replaced by its ``str()``, through dicts, lists and
    tuples: what strict JSON (``allow_nan=False``) can encode."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def iso_utc(ns: int | None) -> str | None:
    """ISO-8601 UTC with microseconds and a ``Z`` suffix (as every command and file prints times)."""
    if ns is None:
        return None
    seconds, rest = divmod(ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc) + timedelta(microseconds=rest // 1000)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")
