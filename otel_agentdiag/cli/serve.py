"""``agentdiag serve``: the local store as a trace backend (the Jaeger query API and a web viewer) over HTTP.

Read-only on the store; binds 127.0.0.1 unless told otherwise. The socket is bound here, before Uvicorn starts, so
a port in use is one error line and ``--port 0`` picks a free port; the URL is printed once the socket listens.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from otel_agentdiag import environment_variables as env
from otel_agentdiag.cli._common import CliError, resolve_store_path, store_option

MIN_TOKEN_LENGTH = 16
_WILDCARDS = frozenset({"", "0.0.0.0", "::", "0:0:0:0:0:0:0:0"})
"""Bind-everything addresses: refused (the Host check needs the address clients name)."""
_EXTRA = "pip install -e '.[serve]'"


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


def _token(token_file: Path | None) -> str:
    if token_file is not None:
        token = _read_token_file(token_file)
        source = f"the token file {token_file}"
    else:
        token = os.environ.get(env.AGENTDIAG_SERVE_TOKEN, "").strip()
        source = env.AGENTDIAG_SERVE_TOKEN
        if not token:
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


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/"


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
    help="File holding the bearer token for --allow-remote (yours, mode 0600)"
    f" [default: ${env.AGENTDIAG_SERVE_TOKEN}].",
)
def serve(
    store_path: Path | None,
    host: str,
    port: int,
    open_browser: bool,
    allow_remote: bool,
    token_file: Path | None,
) -> None:
    """Serve the store over HTTP: a web viewer and the Jaeger query API (v1 and v3), read-only.

    Binds 127.0.0.1 by default. A host other machines can reach needs --allow-remote and a bearer token
    (AGENTDIAG_SERVE_TOKEN or --token-file); such a server serves the strict projection only. Ctrl-C stops it.
    """
    _check_stack()
    from otel_agentdiag.serve.settings import ServeSettings, is_loopback_host

    path = resolve_store_path(store_path)
    remote = not is_loopback_host(host)
    if remote and not allow_remote:
        raise CliError(
            "--host is not a loopback address: other machines could read your traces; add --allow-remote (which"
            f" requires a bearer token from {env.AGENTDIAG_SERVE_TOKEN} or --token-file)"
        )
    if host.strip().strip("[]") in _WILDCARDS:
        raise CliError(
            "--host: a wildcard address cannot be checked against the Host header (DNS rebinding); give the one"
            " address your clients use (e.g. 172.17.0.1 for Docker's bridge)"
        )
    token = _token(token_file) if remote else None
    _ready_store(path)
    from otel_agentdiag.serve.server import BindError, listen, uvicorn_server

    try:
        sock = listen(host, port)
    except BindError as exc:
        raise CliError(str(exc)) from None
    bound_port = int(sock.getsockname()[1])
    settings = ServeSettings(store_path=path, host=host, port=bound_port, allow_remote=allow_remote, token=token)

    server = uvicorn_server(settings)
    url = _url(host, bound_port)
    try:  # a Ctrl-C at any moment from here on is a clean stop (exit 0), before Uvicorn takes over SIGINT too
        click.echo(f"agentdiag serve: {url} (store {path}; Ctrl-C stops)")
        sys.stdout.flush()
        if open_browser:
            import webbrowser

            webbrowser.open(url)
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # also re-raised by Uvicorn for the Ctrl-C it handled, after a clean shutdown
        pass
    finally:
        sock.close()
