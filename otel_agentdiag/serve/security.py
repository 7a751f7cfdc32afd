"""The server's safety checks on every request: loopback by default, the Host header, the token, the headers.

A pure ASGI middleware, outermost, in this order:

1. only ``GET`` and ``HEAD`` (no write endpoint exists): anything else is 405;
2. the ``Host`` header must name the bound address and port (for a loopback bind, also ``localhost``,
   ``127.0.0.1`` or ``[::1]`` at that port): a page on another site that resolves its own name to 127.0.0.1
   (DNS rebinding) is refused with 421;
3. a remote server (bound to an address that is not loopback, allowed by ``--allow-remote``) requires
   ``Authorization: Bearer <token>``, compared in constant time: 401 otherwise;
4. ``request.state.local`` is True only for a loopback client of a loopback server (captured content may be
   shown); a remote server never sets it.

Every response gets ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY``, ``Referrer-Policy:
no-referrer``, a Content-Security-Policy (``frame-ancestors 'none'``; for HTML also ``default-src 'self'``) and,
for the API and the viewer's JSON, ``Cache-Control: no-store``. No CORS header is ever sent.
"""

from __future__ import annotations

import hmac
import json
import logging
import sqlite3

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from otel_agentdiag.serve.params import BadParameter
from otel_agentdiag.serve.settings import ServeSettings, is_loopback_host
from otel_agentdiag.storage.migrations import StoreError

__all__ = ["middleware"]

_logger = logging.getLogger(__name__)

_ALLOWED_METHODS = ("GET", "HEAD")
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_COMMON_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
_HTML_POLICY = (
    b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self';"
    b" base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_OTHER_POLICY = b"default-src 'none'; frame-ancestors 'none'"


def _host_names(settings: ServeSettings) -> frozenset[str]:
    """The ``Host`` header values a request may carry (lowercase): the bound address at its port (a bare
    address too on port 80), and the loopback names for a loopback bind."""
    host = settings.host.strip().lower()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    names = {host}
    if is_loopback_host(settings.host):
        names.update(_LOOPBACK_NAMES)
    allowed = {f"{name}:{settings.port}" for name in names}
    if settings.port == 80:
        allowed |= names
    return frozenset(allowed)


class _Guard:
    """The checks of the module docstring, around the whole application."""

    def __init__(self, app: ASGIApp, settings: ServeSettings) -> None:
        self.app = app
        self.settings = settings
        self.hosts = _host_names(settings)
        self.token = (settings.token or "").encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        api = path.startswith("/api/")
        no_store = api or path.startswith("/ui/api/")  # the viewer's JSON may hold content: never cached either
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, message, extra = refusal
            await _plain_error(send, status, message, api=api, v3=path.startswith("/api/v3/"), extra=extra)
            return
        client = scope.get("client")
        state = scope.setdefault("state", {})
        state["local"] = not self.settings.remote and client is not None and is_loopback_host(str(client[0]))

        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = _secured(list(message.get("headers", [])), api=no_store)
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception as exc:  # noqa: BLE001 - every error is a short message, never a traceback
            status, message = _failure(exc)
            if status == 500:
                _logger.error("agentdiag serve: a request failed (%s)", type(exc).__name__)
            if not started:
                await _plain_error(send, status, message, api=api, v3=path.startswith("/api/v3/"), extra=[])

    def _refusal(self, scope: Scope, headers: Headers) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        if scope.get("method") not in _ALLOWED_METHODS:
            return 405, "method not allowed: this server is read-only (GET and HEAD only)", [(b"allow", b"GET, HEAD")]
        host = headers.get("host", "").strip().lower()
        if host not in self.hosts:
            return 421, "misdirected request: the Host header does not name this server", []
        if self.settings.remote:
            given = headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            if (
                not self.token
                or scheme.lower() != "bearer"
                or not hmac.compare_digest(token.strip().encode("utf-8", "surrogateescape"), self.token)
            ):
                return 401, "unauthorized: a bearer token is required", [(b"www-authenticate", b"Bearer")]
        return None


def _failure(exc: Exception) -> tuple[int, str]:
    """The status and message of a request that raised: a bad parameter (400, its message names the parameter
    and never repeats its value), a store that cannot be read (503), anything else (500, no detail)."""
    if isinstance(exc, BadParameter):
        return 400, str(exc)
    if isinstance(exc, (StoreError, sqlite3.DatabaseError)):
        return 503, "the trace store cannot be read"
    return 500, "internal error"


def _secured(headers: list[tuple[bytes, bytes]], *, api: bool) -> list[tuple[bytes, bytes]]:
    """``headers`` without any CORS header, with the module's security headers."""
    kept = [(k, v) for k, v in headers if not k.lower().startswith(b"access-control-")]
    names = {k.lower() for k, _ in kept}
    html = any(k.lower() == b"content-type" and v.lower().startswith(b"text/html") for k, v in kept)
    kept += [(k, v) for k, v in _COMMON_HEADERS if k not in names]
    if b"content-security-policy" not in names:
        kept.append((b"content-security-policy", _HTML_POLICY if html else _OTHER_POLICY))
    if api and b"cache-control" not in names:
        kept.append((b"cache-control", b"no-store"))
    return kept


async def _plain_error(
    send: Send, status: int, message: str, *, api: bool, v3: bool, extra: list[tuple[bytes, bytes]]
) -> None:
    """A refusal: Jaeger's error JSON on the API (v1 or v3 shape), one line of text elsewhere."""
    if v3:
        body = json.dumps({"error": {"httpCode": status, "message": message}}).encode()
    elif api:
        body = json.dumps(
            {"data": None, "total": 0, "limit": 0, "offset": 0, "errors": [{"code": status, "msg": message}]}
        ).encode()
    else:
        body = (message + "\n").encode()
    content_type = b"application/json" if api else b"text/plain; charset=utf-8"
    headers = _secured(
        [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *extra], api=True
    )
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def middleware(settings: ServeSettings) -> list[Middleware]:
    return [Middleware(_Guard, settings=settings)]
