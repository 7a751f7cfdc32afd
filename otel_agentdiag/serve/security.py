"""The server's safety checks on every request: loopback by default, the Host header, the token, the headers.

A pure ASGI middleware, outermost, in this order:

1. only ``GET`` and ``HEAD`` (no write endpoint exists): anything else is 405;
2. the ``Host`` header must name the bound address and port (for a loopback bind, also ``localhost``,
   ``127.0.0.1`` or ``[::1]`` at that port): a page on another site that resolves its own name to 127.0.0.1
   (DNS rebinding) is refused with 421;
3. the credential, on every server, loopback included (unless the settings say ``insecure_no_token``): the
   token as ``Authorization: Bearer <token>``, or the cookie it is exchanged for. A request whose query has
   ``token=<token>`` (the URL ``agentdiag serve`` prints) is answered with that cookie (``HttpOnly;
   SameSite=Strict; Path=/``) and a redirect to the same URL without the token, so that the token leaves the
   address bar and the session history. Every comparison is in constant time. Anything else is 401 and says
   nothing of the store: JSON on the API and the viewer's JSON, one line of text on pages and static files;
4. ``request.state.local`` is True only for a loopback client of a loopback server (captured content may be
   shown); a remote server never sets it.

The cookie holds an HMAC of the token, not the token, and is named after the port (cookies are not kept apart by
port): ``agentdiag_serve_<port>``. A browser sends a ``SameSite=Strict`` cookie on a redirect only when the
navigation began on this site; a navigation another page began (the file ``agentdiag serve --open`` opens) is
answered with a short page that sets the cookie and moves on by a meta refresh from this site instead.

Every response gets ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY``, ``Referrer-Policy:
no-referrer``, a Content-Security-Policy (``frame-ancestors 'none'``; for HTML also ``default-src 'self'``) and,
for the API and the viewer's JSON, ``Cache-Control: no-store``. No CORS header is ever sent.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
import sqlite3
from urllib.parse import parse_qsl

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from otel_agentdiag.serve.params import BadParameter
from otel_agentdiag.serve.settings import ServeSettings, is_loopback_host
from otel_agentdiag.storage.migrations import StoreError

__all__ = ["cookie_name", "cookie_value", "middleware"]

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
_COOKIE_CONTEXT = b"agentdiag serve: the viewer's cookie, v1"
_TOKEN_PARAM = "token"
_UNAUTHORIZED_API = "unauthorized: send the token of agentdiag serve as Authorization: Bearer <token>"
_UNAUTHORIZED_PAGE = (
    "unauthorized: open the URL that agentdiag serve printed when it started (it carries the token once;"
    " this browser then keeps a cookie). API clients send Authorization: Bearer <token>."
)


def cookie_name(port: int) -> str:
    """The cookie of the server on ``port``: cookies are shared by every port of a host, so each server names
    its own."""
    return f"agentdiag_serve_{port}"


def cookie_value(token: str) -> str:
    """What the cookie holds for ``token``: an HMAC-SHA256 of a fixed text keyed by the token (hex), so the
    token itself is never stored by the browser; it stays valid while the token does."""
    return hmac.new(token.encode("utf-8"), _COOKIE_CONTEXT, hashlib.sha256).hexdigest()


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
        self.token = None if settings.token is None else settings.token.encode("utf-8")
        self.cookie_name = cookie_name(settings.port)
        self.cookie = None if settings.token is None else cookie_value(settings.token).encode("ascii")

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
            if status == 401:
                message = _UNAUTHORIZED_API if no_store else _UNAUTHORIZED_PAGE
            await _plain_error(
                send,
                status,
                message,
                api=api,
                v3=path.startswith("/api/v3/"),
                extra=extra,
                viewer_json=path.startswith("/ui/api/") and status == 401,
            )
            return
        if self.token is not None and _TOKEN_PARAM in _query_names(scope):
            await self._exchange(scope, headers, send)  # the token was checked by _refusal
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
        if self.token is not None and not self._authorized(scope, headers):
            return 401, _UNAUTHORIZED_API, [(b"www-authenticate", b"Bearer")]
        return None

    def _authorized(self, scope: Scope, headers: Headers) -> bool:
        """The request carries the token: in the query (every ``token`` there must be it), or as a bearer
        header, or the cookie. Each comparison is in constant time."""
        assert self.token is not None and self.cookie is not None
        given = [value for name, value in _query(scope) if name == _TOKEN_PARAM]
        if given:
            return all(_same(value, self.token) for value in given)
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and _same(token.strip(), self.token):
            return True
        for header in headers.getlist("cookie"):
            for part in header.split(";"):
                name, _, value = part.strip().partition("=")
                if name == self.cookie_name and _same(value.strip(), self.cookie):
                    return True
        return False

    async def _exchange(self, scope: Scope, headers: Headers, send: Send) -> None:
        """The answer to ``?token=<token>``: the cookie, and the same URL without the token. A 303 redirect,
        unless another site began the navigation (``Sec-Fetch-Site: cross-site``): a browser would not send a
        ``SameSite=Strict`` cookie on that redirect, so a short page moves on from this site instead."""
        assert self.cookie is not None
        location = _without_token(scope)
        cookie = f"{self.cookie_name}={self.cookie.decode('ascii')}; HttpOnly; SameSite=Strict; Path=/".encode()
        common = [(b"set-cookie", cookie), (b"cache-control", b"no-store")]
        if headers.get("sec-fetch-site", "").lower() == "cross-site":
            target = html.escape(location, quote=True)
            body = (
                '<!doctype html><html><head><meta charset="utf-8">'
                f'<meta http-equiv="refresh" content="0; url={target}"><link rel="icon" href="data:,">'
                "<title>agentdiag serve</title></head>"
                f'<body><p><a href="{target}">Open the viewer</a></p></body></html>\n'
            ).encode()
            status = 200
            extra = [(b"content-type", b"text/html; charset=utf-8")]
        else:
            body = b""
            status = 303
            extra = [(b"location", location.encode("latin-1"))]
        answer = _secured([*extra, *common, (b"content-length", str(len(body)).encode())], api=True)
        await send({"type": "http.response.start", "status": status, "headers": answer})
        await send({"type": "http.response.body", "body": body})


def _same(given: str, expected: bytes) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected)


def _query(scope: Scope) -> list[tuple[str, str]]:
    return parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1"), keep_blank_values=True)


def _query_names(scope: Scope) -> set[str]:
    return {name for name, _value in _query(scope)}


def _without_token(scope: Scope) -> str:
    """The request's path and query, without any ``token`` parameter (the others as they came), as a path on
    this server (never ``//host``: no redirect leaves it)."""
    raw_path = scope.get("raw_path") or str(scope.get("path", "/")).encode("utf-8")
    path = "/" + bytes(raw_path).decode("latin-1").lstrip("/\\")
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    kept = [part for part in query.split("&") if part and _TOKEN_PARAM not in _names(part)]
    return path + ("?" + "&".join(kept) if kept else "")


def _names(part: str) -> set[str]:
    return {name for name, _value in parse_qsl(part, keep_blank_values=True)}


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
    send: Send,
    status: int,
    message: str,
    *,
    api: bool,
    v3: bool,
    extra: list[tuple[bytes, bytes]],
    viewer_json: bool = False,
) -> None:
    """A refusal: Jaeger's error JSON on the API (v1 or v3 shape), the viewer's ``{"error": ...}`` for
    ``viewer_json``, one line of text elsewhere."""
    if viewer_json:
        body = json.dumps({"error": message}).encode()
    elif v3:
        body = json.dumps({"error": {"httpCode": status, "message": message}}).encode()
    elif api:
        body = json.dumps(
            {"data": None, "total": 0, "limit": 0, "offset": 0, "errors": [{"code": status, "msg": message}]}
        ).encode()
    else:
        body = (message + "\n").encode()
    content_type = b"application/json" if api or viewer_json else b"text/plain; charset=utf-8"
    headers = _secured(
        [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *extra], api=True
    )
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def middleware(settings: ServeSettings) -> list[Middleware]:
    return [Middleware(_Guard, settings=settings)]
