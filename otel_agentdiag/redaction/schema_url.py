"""Which schema URLs may leave: the OpenTelemetry ones, nothing else.

A resource and an instrumentation scope each carry a ``schema_url`` that OTLP exports as it is. It is meant to
name a published telemetry schema (``https://opentelemetry.io/schemas/1.37.0``), but any library may put any
string there, and a host or a path is somewhere to put data (``https://attacker.example/jane.doe/ssn``). So a
schema URL is kept only when it is exactly an OpenTelemetry schema URL: ``https``, the host
``opentelemetry.io`` (ASCII, lower case, no port, no user-info), the path ``/schemas/`` and a version
``MAJOR.MINOR.PATCH`` (a digit 1-9, then numbers of at most three digits without leading zeros), and nothing
after it (no query, fragment or trailing slash). Anything else is removed and counted as ``schema_url``.
"""

from __future__ import annotations

import re
from typing import Final

OTEL_SCHEMA_URL: Final = re.compile(
    r"https://opentelemetry\.io/schemas/[1-9]\.(?:0|[1-9][0-9]{0,2})\.(?:0|[1-9][0-9]{0,2})", re.ASCII
)
"""The only schema URLs kept (matched in full)."""

OTEL_SCHEMA_URL_SHAPE: Final = "https://opentelemetry.io/schemas/<major>.<minor>.<patch>"
""":data:`OTEL_SCHEMA_URL` for people (the README and ``docs/policy.md``)."""


def allowed_schema_url(url: object) -> bool:
    """Whether ``url`` is an OpenTelemetry schema URL (and so may be exported as it is)."""
    return type(url) is str and len(url) <= 64 and OTEL_SCHEMA_URL.fullmatch(url) is not None
