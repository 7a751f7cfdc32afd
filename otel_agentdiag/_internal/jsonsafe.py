"""JSON for values JSON cannot hold as they are."""

from __future__ import annotations

import math
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
