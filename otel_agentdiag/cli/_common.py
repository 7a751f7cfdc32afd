"""Shared CLI plumbing: the ``--store`` and ``--format`` options, one-line errors, time formatting."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import click

from otel_agentdiag.storage import SpanStore, StoreError
from otel_agentdiag.storage.store import default_store_path

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USAGE = 2


class CliError(click.ClickException):
    """A domain error: printed as one line on stderr, exit code 2."""

    exit_code = EXIT_USAGE


def store_option(fn: F) -> F:
    return click.option(
        "--store",
        "store_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="SQLite trace store [default: $AGENTDIAG_STORE or ./.agentdiag/traces.db].",
    )(fn)


def format_option(fn: F) -> F:
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Output format.",
    )(fn)


def resolve_store_path(store_path: Path | None) -> Path:
    return store_path if store_path is not None else default_store_path()


def open_store(store_path: Path | None) -> SpanStore:
    """Open an existing store for reading; a missing or foreign file is a one-line error. A store that is not
    ours (another user's, writable by others, a symbolic link) raises
    :class:`~otel_agentdiag._internal.trust.UntrustedPathError`: the command line shows it as one line, exit 2."""
    path = resolve_store_path(store_path)
    if not path.exists():
        raise CliError(f"no trace store at {path} (run 'agentdiag demo', or configure() in your agent, first)")
    try:
        return SpanStore(path, create=False)
    except StoreError as exc:
        raise CliError(str(exc)) from None


def iso_utc(ns: int | None) -> str | None:
    """ISO-8601 UTC with microseconds and a ``Z`` suffix."""
    if ns is None:
        return None
    seconds, rest = divmod(ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc) + timedelta(microseconds=rest // 1000)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def duration_ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1_000_000, 3)


def human_duration(ns: int | None) -> str:
    if ns is None:
        return "unfinished"
    if ns < 1_000_000:
        return f"{ns / 1000:.0f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.1f} ms"
    return f"{ns / 1_000_000_000:.2f} s"


def can_encode(text: str) -> bool:
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True
