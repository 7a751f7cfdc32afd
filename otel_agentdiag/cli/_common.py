"""Shared CLI plumbing: the ``--store`` and ``--format`` options, one-line errors, time formatting."""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import click

from otel_agentdiag._internal.inputs import describe_input
from otel_agentdiag._internal.jsonsafe import iso_utc

if TYPE_CHECKING:
    from otel_agentdiag.storage import SpanStore
    from otel_agentdiag.storage.reading import ReadOnlyStore

# The store, the recognisers and the redaction package are imported where they are used (start-up: `agentdiag
# --version` and `--help` load this module and need none of them).

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "EXIT_USAGE",
    "CliError",
    "can_encode",
    "describe_input",
    "duration_ms",
    "format_option",
    "human_duration",
    "iso_utc",
    "open_reader",
    "open_store",
    "resolve_store_path",
    "safe_url",
    "store_option",
]

EXIT_USAGE = 2
EXIT_INCOMPLETE = 1


class CliError(click.ClickException):
    """A domain error: printed as one line on stderr, exit code 2.

    A message about an id, a session, a time or a URL the user gave describes it with :func:`describe_input`
    (its length and kind of characters), never repeats it: the text may be a raw id or hold a credential.
    """

    exit_code = EXIT_USAGE


class CliIncomplete(CliError):
    """The command did part of its work and cannot promise the rest: one line on stderr saying what is not
    done and what to do, exit code 1."""

    exit_code = EXIT_INCOMPLETE


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
    from otel_agentdiag.storage.connection import default_store_path

    return store_path if store_path is not None else default_store_path()


def open_store(store_path: Path | None, *, write: bool = False) -> SpanStore:
    """Open an existing store: read-only (SQLite ``mode=ro``, so a store in a folder or on media the user cannot
    write can be read), or with ``write`` for the commands that change it (``clear``, ``push``'s marks). A
    missing or foreign file is a one-line error. A store that is not ours (another user's, writable by others,
    a symbolic link) raises :class:`~otel_agentdiag._internal.trust.UntrustedPathError`: the command line shows
    it as one line, exit 2. A store of an older schema is opened for writing, to be migrated, as before."""
    from otel_agentdiag.storage import SpanStore, StoreError
    from otel_agentdiag.storage.connection import StoreNeedsUpgrade

    path = resolve_store_path(store_path)
    if not path.exists():
        raise CliError(f"no trace store at {path} (run 'agentdiag demo', or configure() in your agent, first)")
    try:
        if not write:
            try:
                return SpanStore(path, read_only=True)
            except StoreNeedsUpgrade:
                pass
        return SpanStore(path, create=False)
    except StoreError as exc:
        raise CliError(str(exc)) from None


def open_reader(store_path: Path | None) -> ReadOnlyStore | SpanStore:
    """:func:`open_store` for a command that only reads through the store's read part (``show``, ``traces``):
    the same checks, errors and fallback, but a :class:`~otel_agentdiag.storage.reading.ReadOnlyStore`, so the
    command does not import the writer, maintenance, retention or scrubbing. A store of an older schema is
    opened for writing, to be migrated, as :func:`open_store` does."""
    from otel_agentdiag.storage.connection import StoreNeedsUpgrade
    from otel_agentdiag.storage.migrations import StoreError
    from otel_agentdiag.storage.reading import ReadOnlyStore

    path = resolve_store_path(store_path)
    if path.exists():
        try:
            return ReadOnlyStore(path)
        except StoreNeedsUpgrade:
            pass
        except StoreError as exc:
            raise CliError(str(exc)) from None
    return open_store(path, write=True)  # a missing store's error, or the migration of an older one


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


# -- endpoints ---------------------------------------------------------------------------------------------------
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9._\-]{0,15}")
"""A path segment shown as it is: a short word (``v1``, ``traces``, ``otlp``, ``tenant-a``), at most 16 long."""


def _segment(segment: str) -> str:
    if not segment:
        return segment
    # A word can still be a credential (a short password used as a path): the recogniser decides.
    from otel_agentdiag.redaction.recognizers import is_sensitive

    return segment if _WORD.fullmatch(segment) and not is_sensitive(segment) else "…"


def safe_url(url: str) -> str:
    """Where ``url`` points, safe to print: ``scheme://host:port/path``, where only path segments that are
    short words stay (any other segment, a token say, shows as ``…``); never user info, query or fragment.
    ``<unparseable endpoint>`` when it is not a URL."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparseable endpoint>"
    if ":" in host:
        host = f"[{host}]"
    scheme = parts.scheme if _WORD.fullmatch(parts.scheme or "") else "…"
    path = "/".join(_segment(s) for s in parts.path.split("/"))
    return f"{scheme}://{host}{port}{path}"


def printable(value: object) -> str:
    """``str(value)`` safe to print on a terminal: each character that is not printable (C0 and C1 controls and
    DEL, the bidi embeddings, overrides, isolates and marks, zero-width and other format characters, tag
    characters, line and paragraph separators, lone surrogates, spaces other than the plain one) is shown as its
    escape, as ``repr`` writes it (``\\x1b``, ``\\x85``, ``\\u202e``, ``\\U000e0041``). Every stored or
    user-given string passes through it before it is printed as text: it cannot move the cursor, recolour the
    terminal, reorder the line or hide part of itself. Style (colour) is applied after, to the escaped text."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


@functools.cache
def _json_unsafe() -> re.Pattern[str]:
    """What ``json.dumps(..., ensure_ascii=False)`` leaves raw and a terminal would act on: DEL, C1 controls, format,
    bidi and tag characters, line separators, lone surrogates (C0 controls it escapes itself)."""
    from otel_agentdiag.redaction.recognizers import HIDDEN_CHARACTERS

    return re.compile(HIDDEN_CHARACTERS.replace("\\x00-\\x1f", "", 1)[:-1] + "\ud800-\udfff]")


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # a UTF-16 surrogate pair, as JSON writes characters beyond the BMP
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_text(value: Any, *, indent: int | None = 2) -> str:
    """``value`` as JSON for the terminal: non-ASCII text stays readable, but every character a terminal would act
    on or hide is written as its ``\\uXXXX`` escape (still the same JSON value)."""
    return _json_unsafe().sub(_json_escape, json.dumps(value, indent=indent, ensure_ascii=False))
