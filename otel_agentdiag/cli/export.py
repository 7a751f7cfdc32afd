"""``agentdiag export``: write what may leave the machine (the strict-policy projection) to a file.

``bundle`` (the default) is the support bundle of one or two sessions
(:mod:`otel_agentdiag.diagnostics.bundle`); ``otlp-json`` and ``jaeger-json`` write the spans of the given
sessions, or of the whole store, for a collector or a trace viewer. Every file is written 0600 and atomically.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from otel_agentdiag.cli._common import CliError, open_store, resolve_store_path, store_option
from otel_agentdiag.cli._sessions import resolve_session
from otel_agentdiag.diagnostics.bundle import BundleLimits, build_bundle, write_bundle
from otel_agentdiag.diagnostics.projection import load_store_hasher, strict_projection
from otel_agentdiag.redaction import hashing
from otel_agentdiag.storage import SpanStore, StoredSpan

FORMATS = ("bundle", "otlp-json", "jaeger-json")


def _check_out(out: Path, store: Path) -> None:
    """Refuse, before any work, an ``--out`` that cannot be a file (writing itself may still fail).

    The file is replaced by a rename, so an ``--out`` naming a device, pipe or socket (``/dev/null``,
    ``/dev/stdout``) would replace that node itself, and one naming the store, its WAL or its key file would
    destroy them: both are refused.
    """
    try:
        if out.is_dir():
            raise CliError(f"cannot write {out}: it is a directory; give a file name")
        if not out.parent.is_dir():
            raise CliError(f"cannot write {out}: the folder {out.parent} does not exist")
        if out.exists() and not out.is_file():
            raise CliError(f"cannot write {out}: it is not a regular file (a device, pipe or socket); give a file name")
        target = out.resolve()
        protected = [Path(f"{store}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")]
        protected.append(store.absolute().parent / hashing.KEY_FILE_NAME)
        if any(target == p.resolve() or (out.exists() and p.exists() and out.samefile(p)) for p in protected):
            raise CliError(f"cannot write {out}: it is the trace store or its key file; give another file name")
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from None


def _spans(store: SpanStore, sessions: list[str] | None) -> list[StoredSpan]:
    """The rows of ``sessions``, or of every session (and of spans outside any) when None."""
    names: list[str | None] = (
        list(sessions) if sessions is not None else [s.session for s in store.list_sessions() if s.span_count]
    )
    out: list[StoredSpan] = []
    for session in names:
        out.extend(store.session_spans(session))
    return out


@click.command()
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="The file to write (replaced atomically; mode 0600).",
)
@click.option(
    "--session",
    "session_texts",
    multiple=True,
    help="A session digest, unique prefix, or raw id; repeat for more [default: bundle: the newest session; "
    "otlp-json, jaeger-json: the whole store].",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    default="bundle",
    show_default=True,
    help="bundle: a support bundle (at most 2 sessions); otlp-json: OTLP ExportTraceServiceRequest JSON; "
    "jaeger-json: Jaeger UI / Grafana upload JSON.",
)
@store_option
def export(out: Path, session_texts: tuple[str, ...], output_format: str, store_path: Path | None) -> None:
    """Export sessions under the strict policy: a support bundle, OTLP-JSON or Jaeger-JSON.

    Every stored span is re-validated at export time; a row that fails is omitted and counted, never written.
    """
    path = resolve_store_path(store_path)
    _check_out(out, path)
    with open_store(store_path) as store:
        sessions = list(dict.fromkeys(resolve_session(store, text, path) for text in session_texts)) or None
        hasher = load_store_hasher(path)
        if hasher is None:
            click.echo(
                "agentdiag: warning: the store's hash key was not found (AGENTDIAG_HASH_KEY, or hash.key beside "
                "the store); the digests in the export are re-keyed and do not match the store's",
                err=True,
            )
        if output_format == "bundle":
            try:
                bundle = build_bundle(store, sessions, hasher=hasher, limits=BundleLimits())
            except ValueError as exc:  # more sessions than a bundle holds
                raise CliError(str(exc)) from None
        else:
            projection = strict_projection(_spans(store, sessions), hasher=hasher)
    try:
        if output_format == "bundle":
            written = write_bundle(out, bundle)
            spans = sum(len(s["spans"]) for s in bundle["sessions"])
            dropped = sum(sum(s["dropped"].values()) for s in bundle["sessions"])
            summary = (
                f"{spans} span(s) of {len(bundle['sessions'])} session(s); omitted {bundle['omitted']},"
                f" dropped by limits {dropped}"
            )
        else:
            write: Callable[[Any, Path], int]
            if output_format == "otlp-json":
                from otel_agentdiag.interchange.otlp_json import write_otlp_json

                write = write_otlp_json
            else:
                from otel_agentdiag.interchange.jaeger_json import write_jaeger_json

                write = write_jaeger_json
            written = write(projection.spans, out)
            summary = f"{len(projection.spans)} span(s); omitted {projection.omitted}"
    except RuntimeError as exc:  # interchange.otlp_json.MissingDependency: the 'otlp' extra is missing
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from None
    click.echo(f"wrote {output_format} {out} ({written} bytes): {summary}")
