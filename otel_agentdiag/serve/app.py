"""The server's ASGI application: its routes (Jaeger v1 and v3, the viewer) behind the security middleware."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from otel_agentdiag.serve import jaeger_v1, jaeger_v3, security, viewer
from otel_agentdiag.serve.settings import ServeSettings, is_loopback_host
from otel_agentdiag.serve.stores import StoreAccess

GZIP_MINIMUM_BYTES = 1024
"""Answers at least this long are gzip-compressed for a client across a network that accepts it."""
GZIP_LEVEL = 6
"""gzip's own default: a 10,000-span trace (9.5 MB of Jaeger JSON) leaves as about 0.25 MB; level 9 costs three
times the CPU for about 1% less."""


def create_app(settings: ServeSettings) -> Starlette:
    """The application for ``settings``: ``app.state.settings``, ``app.state.access`` (a
    :class:`~otel_agentdiag.serve.stores.StoreAccess`); every request passes the security middleware, which sets
    ``request.state.local`` (True only for a loopback client of a loopback server: captured content allowed).
    Answers of :data:`GZIP_MINIMUM_BYTES` or more are gzip-compressed for a client that sends
    ``Accept-Encoding: gzip`` from another address than loopback (on loopback the bytes cost nothing to move, and
    compressing them only spends the CPU both ends share: it cost a fifth of trace-by-id's requests per second)."""
    access = StoreAccess(settings.store_path)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        access.close()

    app = Starlette(
        routes=[*jaeger_v1.routes(), *jaeger_v3.routes(), *viewer.routes()],
        # The guard is outermost: its checks come first and its headers go on compressed answers too.
        middleware=[
            *security.middleware(settings),
            Middleware(_NetworkGZip),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )
    app.state.settings = settings
    app.state.access = access
    return app


class _NetworkGZip:
    """Starlette's gzip middleware for clients not on loopback; loopback clients get the answer as it is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=GZIP_MINIMUM_BYTES, compresslevel=GZIP_LEVEL)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] == "http" and not (client is not None and is_loopback_host(str(client[0]))):
            await self.gzip(scope, receive, send)
        else:
            await self.app(scope, receive, send)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (an unknown path): Jaeger's error JSON under ``/api/``, one line of text elsewhere."""
    assert isinstance(exc, HTTPException)
    message = "not found" if exc.status_code == 404 else str(exc.detail)
    if request.url.path.startswith("/api/v3/"):
        return jaeger_v3.error_response(exc.status_code, message)
    if request.url.path.startswith("/api/"):
        return jaeger_v1.error_response(exc.status_code, message)
    return PlainTextResponse(message + "\n", status_code=exc.status_code, headers=exc.headers)
