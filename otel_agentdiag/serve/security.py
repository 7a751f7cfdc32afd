"""The server's safety checks on every request: loopback by default, the Host header, the token, the headers."""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from otel_agentdiag.serve.settings import ServeSettings, is_loopback_host


class _Guard:
    """Sets ``request.state.local`` (skeleton: the full checks come with the Jaeger API)."""

    def __init__(self, app: ASGIApp, settings: ServeSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            client = scope.get("client")
            state = scope.setdefault("state", {})
            state["local"] = not self.settings.remote and client is not None and is_loopback_host(str(client[0]))
        await self.app(scope, receive, send)


def middleware(settings: ServeSettings) -> list[Middleware]:
    return [Middleware(_Guard, settings=settings)]
