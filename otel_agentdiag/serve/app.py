"""The server's ASGI application: its routes (Jaeger v1 and v3, the viewer) behind the security middleware."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette

from otel_agentdiag.serve import jaeger_v1, jaeger_v3, security, viewer
from otel_agentdiag.serve.settings import ServeSettings
from otel_agentdiag.serve.stores import StoreAccess


def create_app(settings: ServeSettings) -> Starlette:
    """The application for ``settings``: ``app.state.settings``, ``app.state.access`` (a
    :class:`~otel_agentdiag.serve.stores.StoreAccess`); every request passes the security middleware, which sets
    ``request.state.local`` (True only for a loopback client of a loopback server: captured content allowed)."""
    access = StoreAccess(settings.store_path)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        access.close()

    app = Starlette(
        routes=[*jaeger_v1.routes(), *jaeger_v3.routes(), *viewer.routes()],
        middleware=security.middleware(settings),
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.access = access
    return app
