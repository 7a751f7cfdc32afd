"""How ``--session`` text becomes a stored session key: a digest, a unique prefix of one, or a raw id."""

from __future__ import annotations

import re
from pathlib import Path

from otel_agentdiag import semconv as sc
from otel_agentdiag.cli._common import CliError, describe_input
from otel_agentdiag.redaction import hashing
from otel_agentdiag.storage import SpanStore, StoreError
from otel_agentdiag.storage.provenance import IMPORTED_PREFIX, imported_session, is_imported, observed_digest

_HEX = re.compile(r"[0-9a-f]{4,64}")


def _raw_id_digests(text: str, store_path: Path) -> list[str] | None:
    """Digests ``text`` would have as a conversation id under the store's key (``None``: no key to use). A
    refused key (weak, or a key file that is not ours) raises: the command line shows it as one line."""
    from otel_agentdiag.redaction.hash_keys import resolve_key

    key, source = resolve_key(None, store_path, create_key_file=False)
    if source.startswith("ephemeral"):
        return None
    return [
        hashing.IdHasher(key, algorithm=algorithm).digest(sc.ID_KIND_CONVERSATION, text)
        for algorithm in (hashing.ALGORITHM, hashing.PLAIN_ALGORITHM)
    ]


def _prefer_observed(matches: set[str]) -> set[str]:
    """A session this machine observed and its imported namesake (``imported:<digest>``) are one name: the
    observed one is meant (the imported copy is named by its full key)."""
    observed = {m for m in matches if not is_imported(m)}
    if observed and all(observed_digest(m) in observed for m in matches):
        return observed
    return matches


def resolve_session(store: SpanStore, text: str, store_path: Path) -> str:
    """The stored session key ``text`` names: a key (a digest, or ``imported:<digest>`` for an imported
    session), a unique prefix of one (with or without the ``hmac-sha256:<key id>:`` part), or a raw
    conversation/session id hashed with the store's key.

    Every reading is tried; two readings naming different sessions are an error, never a guess, except that a
    digest names the session observed here before its imported namesake. Errors describe ``text`` without
    repeating it (it may be a raw id).
    """
    needle = text.strip()
    if not needle:
        raise CliError("--session is empty; give a session digest, a unique prefix of one, or a raw session id")
    shown = describe_input(text)
    # Known sessions: those with rows or bookkeeping, in the ledger, or known only from a rejected ingest line;
    # looked up by key and by key range, never listed whole.
    known = store.is_session_key
    matches: set[str] = set()
    if known(needle):
        return needle
    try:
        matches.add(store.resolve_session(needle))
    except StoreError:
        pass  # not a stored digest or prefix: the text may still be a raw id, tried below
    if known(imported_session(needle)):
        matches.add(imported_session(needle))
    prefix_hits = _prefer_observed(store.session_keys(needle) if len(needle) >= 4 else set())
    if len(prefix_hits) > 1:
        raise CliError(f"the --session prefix ({shown}) is ambiguous ({len(prefix_hits)} sessions); give more of it")
    matches.update(prefix_hits)
    lowered = needle.lower()
    if _HEX.fullmatch(lowered):
        tail_hits = _prefer_observed(store.session_keys(lowered, tail=True))
        if len(tail_hits) > 1:
            raise CliError(f"the --session prefix ({shown}) is ambiguous ({len(tail_hits)} sessions); give more of it")
        matches.update(tail_hits)
    digests = _raw_id_digests(needle, store_path)
    if digests is not None:
        for digest in digests:
            matches.update(key for key in (digest, imported_session(digest)) if known(key))
    matches = _prefer_observed(matches)
    if len(matches) > 1:
        raise CliError(
            f"the --session value ({shown}) names more than one session (as a digest prefix and as a raw id);"
            " give the digest"
        )
    if matches:
        return matches.pop()
    if digests is None:
        raise CliError(
            f"no session in {store.path} matches the --session value ({shown}); it is not a stored digest or"
            " prefix, and a raw session id cannot be resolved without the store's hash key (AGENTDIAG_HASH_KEY,"
            " or hash.key beside the store)"
        )
    raise CliError(f"no session in {store.path} matches the --session value ({shown})")


def _short(session: str | None) -> str:
    if session is None:
        return "(no session)"
    if is_imported(session):
        digest = observed_digest(session)
        return IMPORTED_PREFIX + (_short(digest) if digest is not None else "(no session)")
    if session.count(":") == 2:
        return session[: session.rindex(":") + 13]
    return session[:24]
