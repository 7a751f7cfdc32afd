"""Running the application: its listening socket, its Uvicorn server, and a server on a thread for tests.

:func:`uvicorn_server` is the server as ``agentdiag serve`` runs it; :func:`running` the same on a thread of the
calling process (tests, benchmarks, scripts).
The socket is bound before Uvicorn starts (:func:`listen`), so a port in use is one error and port 0 picks a free
one; it comes from ``getaddrinfo`` as a TCP socket, for which asyncio sets ``TCP_NODELAY`` on accepted
connections (a bare ``socket.socket()`` left it off: every answer of tens of KB then waited for a delayed ACK).
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from otel_agentdiag.serve.settings import ServeSettings

if TYPE_CHECKING:
    import uvicorn

START_TIMEOUT_S = 20.0
"""How long :func:`running` waits for the server to serve, and then to stop."""


_GRACE_EXCEEDED = "timeout graceful shutdown exceeded"
"""The end of what Uvicorn logs (at ERROR) when a stop cuts an answer short: what a Ctrl-C asked for."""


class _QuietStop(logging.Filter):
    """Drops Uvicorn's record that a stop cut answers short: Ctrl-C while a client is still reading is a stop the
    user asked for, not an error (Uvicorn's other records pass)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.endswith(_GRACE_EXCEEDED))


class BindError(Exception):
    """The address cannot be listened on; the message is one line for the user."""


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (an IPv6 address too; port 0: any free one)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        raise BindError("--host: not an address this machine can bind (give an IP address or localhost)") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BindError(f"port {port} on {host} is in use; give another with --port (0: any free port)") from None
        raise BindError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def uvicorn_server(settings: ServeSettings) -> uvicorn.Server:
    """The Uvicorn server of the application for ``settings``: quiet (warnings only, no access log, no
    ``Server`` header, nothing said when a stop cuts an answer short), with the application's lifespan, stopping
    within 2 s of Ctrl-C."""
    import uvicorn

    from otel_agentdiag.serve.app import create_app

    config = uvicorn.Config(
        create_app(settings),
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    errors = logging.getLogger("uvicorn.error")  # set up by the Config just made
    if not any(isinstance(f, _QuietStop) for f in errors.filters):
        errors.addFilter(_QuietStop())
    return uvicorn.Server(config)


@contextmanager
def running(settings: ServeSettings) -> Iterator[str]:
    """The server for ``settings`` (its port 0: any free one) on a thread of this process, serving until the
    block ends; yields its base URL (``http://host:port``). Raises :class:`RuntimeError` when it does not start
    or stop within :data:`START_TIMEOUT_S`."""
    sock = listen(settings.host, settings.port)
    port = int(sock.getsockname()[1])
    server = uvicorn_server(replace(settings, port=port))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="agentdiag-serve", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:  # set by Uvicorn once it serves the socket
            if not thread.is_alive():
                raise RuntimeError("the server stopped before it served")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start within {START_TIMEOUT_S:g} s")
            thread.join(0.01)  # a bounded wait on the server's thread
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(START_TIMEOUT_S)
        sock.close()
    if thread.is_alive():
        raise RuntimeError("the server did not stop")
