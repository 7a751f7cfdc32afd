"""The Jaeger query API, v1 (`/api/...`): services, operations, trace search, a trace, dependencies."""

from __future__ import annotations

from starlette.routing import BaseRoute


def routes() -> list[BaseRoute]:
    return []
