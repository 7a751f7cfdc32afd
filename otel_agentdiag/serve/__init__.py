"""``agentdiag serve``: the local store as a trace backend, the Jaeger query API (v1, v3) and a web viewer.

Read-only on the store (another process may be writing to it), loopback by default. The HTTP stack is the
``serve`` extra (Starlette and Uvicorn), imported only here and by ``agentdiag serve``.
"""

from __future__ import annotations

from otel_agentdiag.serve.settings import DEFAULT_PORT, ServeSettings

__all__ = ["DEFAULT_PORT", "ServeSettings", "create_app"]


def __getattr__(name: str) -> object:
    if name == "create_app":  # imports Starlette: only when an app is wanted
        from otel_agentdiag.serve.app import create_app

        return create_app
    raise AttributeError(name)
