"""``agentdiag serve``: the local store as a trace backend, the Jaeger query API (v1, v3) and a web viewer.

Read-only on the store (another process may be writing to it), loopback by default. The HTTP stack is the
``serve`` extra (Starlette and Uvicorn), imported only here and by ``agentdiag serve``.
"""

from __future__ import annotations

from otel_agentdiag._internal.lazy import lazy_attributes
from otel_agentdiag.serve.settings import DEFAULT_PORT, ServeSettings

__all__ = ["DEFAULT_PORT", "ServeSettings", "create_app"]

# create_app imports Starlette: only when an app is wanted.
__getattr__, __dir__ = lazy_attributes(__name__, {"create_app": "otel_agentdiag.serve.app"}, globals(), __all__)
