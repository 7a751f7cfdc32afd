"""``agentdiag serve``: the local store as a trace backend (the Jaeger query API and a web viewer) over HTTP.

Read-only on the store; binds 127.0.0.1 unless told otherwise; every request needs the token (loopback too), unless
``--insecure-no-token``. The socket is bound here, before Uvicorn starts, so a port in use is one error line and
``--port 0`` picks a free port; the URL is printed once the socket listens, with the token in it: the only place the
token is ever shown.

Ctrl-C at any moment is a quiet stop with exit 0 (:class:`_CtrlC`): the command's own SIGINT handler is in place
from its first line to its last, so Python never raises ``KeyboardInterrupt`` into asyncio's or Uvicorn's start-up
(which left ``Server.serve`` never awaited, or a half-made event loop, when the signal came just after the URL line).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import click

from otel_agentdiag import environment_variables as env
from otel_agentdiag.cli._common import CliError, resolve_store_path, store_option

if TYPE_CHECKING:
    import uvicorn

MIN_TOKEN_LENGTH = 16
_WILDCARDS = frozenset({"", "0.0.0.0", "::", "0:0:0:0:0:0:0:0"})
"""Bind-everything addresses: refused (the Host check needs the address clients name)."""
_EXTRA = "pip install -e '.[serve]'"


class _Stopped(Exception):
    """Ctrl-C came before the server existed: the command ends here, quietly, with exit 0."""


class _CtrlC:
    """The command's SIGINT handler, from its first line to its last (main thread only). Before the server exists
    a Ctrl-C raises :class:`_Stopped` (caught by the command: exit 0); once it exists (:meth:`serving`) it only
    asks the server to stop (``should_exit``), so no exception ever lands inside asyncio's or Uvicorn's start-up.
    Uvicorn puts its own handler in place while it serves, puts this one back and re-sends the signal it caught:
    that lands here as one more stop request, never as ``KeyboardInterrupt`` (a second Ctrl-C while Uvicorn stops
    makes it stop at once, as Uvicorn does)."""

    def __init__(self) -> None:
        self._server: uvicorn.Server | None = None
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:  # None: a handler not set from Python; Python's own is the one to leave behind
            signal.signal(signal.SIGINT, signal.default_int_handler if self._previous is None else self._previous)

    def serving(self, server: uvicorn.Server) -> bool:
        """From now on a Ctrl-C stops ``server``; False when one already came (nothing to start)."""
        self._server = server
        return not server.should_exit

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        server = self._server
        if server is None:
            raise _Stopped
        server.should_exit = True


def _check_stack() -> None:
    """Starlette and Uvicorn (the ``serve`` extra) are importable, or one line says how to get them."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise CliError(f"agentdiag serve needs the 'serve' extra (Starlette and Uvicorn): {_EXTRA}") from None


def _read_token_file(path: Path) -> str:
    """The token in ``path``: a regular file of ours, mode 0600 (no group or other access), not a link."""
    from otel_agentdiag._internal.trust import UntrustedPathError, open_trusted_dir, open_trusted_file

    folder = path.absolute().parent
    try:
        dir_fd = open_trusted_dir(folder, "token file folder")
        try:
            fd, _created = open_trusted_file(dir_fd, path.name, path, "serve token file")
        finally:
            os.close(dir_fd)
        try:
            if os.fstat(fd).st_mode & 0o077:
                raise CliError(f"refusing serve token file {path}: readable by group or others; chmod 600 it")
            with os.fdopen(fd, "rb", closefd=False) as stream:
                data = stream.read(4096)
        finally:
            os.close(fd)
    except UntrustedPathError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot read the serve token file {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CliError(f"the serve token file {path} is not UTF-8 text") from None


def _token(token_file: Path | None, *, remote: bool) -> str:
    """The token: from ``token_file``, else ``AGENTDIAG_SERVE_TOKEN``, else (loopback only) a random one."""
    from otel_agentdiag.serve.settings import new_token

    if token_file is not None:
        token = _read_token_file(token_file)
        source = f"the token file {token_file}"
    else:
        token = os.environ.get(env.AGENTDIAG_SERVE_TOKEN, "").strip()
        source = env.AGENTDIAG_SERVE_TOKEN
        if not token:
            if not remote:
                return new_token()
            raise CliError(
                f"--allow-remote needs a bearer token: set {env.AGENTDIAG_SERVE_TOKEN} or give --token-file"
                " (a file of yours, mode 0600)"
            )
    if len(token) < MIN_TOKEN_LENGTH or not token.isprintable() or any(c.isspace() for c in token):
        raise CliError(
            f"the token from {source} must be at least {MIN_TOKEN_LENGTH} printable characters without spaces"
        )
    return token


def _ready_store(path: Path) -> None:
    """The store at ``path`` can be served: it exists, it is ours and a store, and it is of the current schema
    (an older one is upgraded here, once, as every command does). Otherwise one line says what to do: a missing
    store names ``agentdiag demo``; an older store that cannot be upgraded here (a folder or medium this user
    cannot write) is refused rather than served half-readable."""
    from otel_agentdiag.storage import SpanStore
    from otel_agentdiag.storage.connection import StoreNeedsUpgrade
    from otel_agentdiag.storage.migrations import StoreError
    from otel_agentdiag.storage.reading import ReadOnlyStore

    if not path.exists():
        raise CliError(
            f"no trace store at {path}: nothing to serve yet; run 'agentdiag demo' to make one"
            " (or configure() in your agent), or give --store"
        )
    try:
        ReadOnlyStore(path).close()
        return
    except StoreNeedsUpgrade:
        pass
    except StoreError as exc:
        raise CliError(str(exc)) from None
    try:
        SpanStore(path, create=False).close()  # the one-time upgrade
    except StoreError as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        raise CliError(
            f"cannot serve {path}: it is of an older schema and must be upgraded once, which failed here ({cause});"
            f" run 'agentdiag status --store {path}' as a user who can write its folder, or serve a copy in a"
            " folder of yours"
        ) from None


def _url(host: str, port: int, token: str | None) -> str:
    """The viewer's URL, with the token as ``?token=`` (exchanged for a cookie on the first visit)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    query = "" if token is None else f"?token={quote(token, safe='')}"
    return f"http://{shown}:{port}/{query}"


@contextmanager
def _opener(url: str) -> Iterator[str]:
    """A ``file://`` URL of a page (mode 0600, in a private temporary folder) that sends the browser on to
    ``url``, removed when the block ends: the browser is started with this path, never with the token, since
    every user can read the command line of a process it starts."""
    import html
    import tempfile

    folder = tempfile.mkdtemp(prefix="agentdiag-serve-")
    page = Path(folder) / "open.html"
    target = html.escape(url, quote=True)
    try:
        fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(
                '<!doctype html><html><head><meta charset="utf-8">'
                f'<meta http-equiv="refresh" content="0; url={target}"><link rel="icon" href="data:,">'
                "<title>agentdiag serve</title></head>"
                f'<body><p><a href="{target}">Open the viewer</a></p></body></html>\n'
            )
        yield page.as_uri()
    finally:
        page.unlink(missing_ok=True)
        os.rmdir(folder)


@click.command()
@store_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=16687,
    show_default=True,
    help="Port to bind (0: any free port; the URL printed says which).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in the default web browser.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a --host other machines can reach: every request then needs the bearer token, and only the"
    " strict projection is served (never captured content).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File holding the token every request needs (yours, mode 0600)"
    f" [default: ${env.AGENTDIAG_SERVE_TOKEN}, else a random token each start].",
)
@click.option(
    "--insecure-no-token",
    is_flag=True,
    help="Serve without a token (loopback only): every user of this machine can then read the store.",
)
def serve(
    store_path: Path | None,
    host: str,
    port: int,
    open_browser: bool,
    allow_remote: bool,
    token_file: Path | None,
    insecure_no_token: bool,
) -> None:
    """Serve the store over HTTP: a web viewer and the Jaeger query API (v1 and v3), read-only.

    Binds 127.0.0.1 by default. Every request needs the token, loopback included: the printed URL carries it
    (a browser swaps it for a cookie); API clients send "Authorization: Bearer <token>". The token is random
    each start, or from --token-file or AGENTDIAG_SERVE_TOKEN. A host other machines can reach needs
    --allow-remote and a token from one of those two; such a server serves the strict projection only.
    Ctrl-C stops it.
    """
    with _CtrlC() as ctrl_c:
        try:
            _serve(ctrl_c, store_path, host, port, open_browser, allow_remote, token_file, insecure_no_token)
        except _Stopped:  # Ctrl-C before the server existed: nothing was served, nothing to say
            pass


def _check_host(host: str, *, remote: bool, allow_remote: bool) -> None:
    """A host ``serve`` accepts with these flags, or one line that says everything it needs."""
    if host.strip().strip("[]") in _WILDCARDS:
        raise CliError(
            "--host: a wildcard address is never accepted (it cannot be checked against the Host header: DNS"
            " rebinding); give the one address your clients use (e.g. 172.17.0.1 for Docker's bridge) with"
            f" --allow-remote and a bearer token from {env.AGENTDIAG_SERVE_TOKEN} or --token-file"
        )
    if remote and not allow_remote:
        raise CliError(
            "--host is not a loopback address: other machines could read your traces; add --allow-remote (which"
            f" requires a bearer token from {env.AGENTDIAG_SERVE_TOKEN} or --token-file)"
        )


def _serve(
    ctrl_c: _CtrlC,
    store_path: Path | None,
    host: str,
    port: int,
    open_browser: bool,
    allow_remote: bool,
    token_file: Path | None,
    insecure_no_token: bool,
) -> None:
    """The command's work, under its Ctrl-C handler: check, bind, print the URL, serve until Ctrl-C."""
    _check_stack()
    from otel_agentdiag.serve.settings import ServeSettings, is_loopback_host

    path = resolve_store_path(store_path)
    remote = not is_loopback_host(host)
    _check_host(host, remote=remote, allow_remote=allow_remote)
    if insecure_no_token and (remote or token_file is not None):
        raise CliError(
            "--insecure-no-token cannot go with "
            + ("--token-file" if not remote else "a --host that is not loopback: a remote server needs its token")
        )
    token = None if insecure_no_token else _token(token_file, remote=remote)
    _ready_store(path)
    from otel_agentdiag.serve.server import BindError, listen, uvicorn_server

    try:
        sock = listen(host, port)
    except BindError as exc:
        raise CliError(str(exc)) from None
    try:
        bound_port = int(sock.getsockname()[1])
        settings = ServeSettings(
            store_path=path,
            host=host,
            port=bound_port,
            allow_remote=allow_remote,
            token=token,
            insecure_no_token=insecure_no_token,
        )
        server = uvicorn_server(settings)
        url = _url(host, bound_port, token)
        if not ctrl_c.serving(server):  # from here a Ctrl-C asks the server to stop (it may come before it runs)
            return
        click.echo(f"agentdiag serve: {url} (store {path}; Ctrl-C stops)")
        sys.stdout.flush()
        if insecure_no_token:
            click.echo(
                "agentdiag serve: --insecure-no-token: no token is checked; every user of this machine can read"
                " these traces",
                err=True,
            )
        with _opener(url) if open_browser else nullcontext() as page:
            if page is not None:
                import webbrowser

                webbrowser.open(page)
            server.run(sockets=[sock])  # starts and stops at once when a Ctrl-C came already
    finally:
        sock.close()
