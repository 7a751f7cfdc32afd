"""Where a destination's hash key comes from, and what is refused on the way.

Precedence: an argument > its environment variable > the key file ``hash.key`` beside the store (created, 32
random bytes, unless the caller only reads). Every source is judged (:mod:`~otel_agentdiag.redaction.
key_strength`); the key file is used only when it and its folder are ours and private
(:mod:`otel_agentdiag._internal.trust`).

A refused key is never replaced by another: the caller turns off what would have used it (see
:func:`otel_agentdiag.destinations.resolve_destinations`). Only a key file that cannot be made or read for an
ordinary reason (a read-only folder, say) is replaced by a key for this process only, with a warning.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from otel_agentdiag import environment_variables as env
from otel_agentdiag._internal.trust import UntrustedPathError
from otel_agentdiag.redaction import hashing
from otel_agentdiag.redaction.key_strength import WeakKeyError, check_key_bytes

_logger = logging.getLogger(__name__)

REFUSED = (UntrustedPathError, WeakKeyError)
"""What a key source (or a store) is refused with."""


@dataclass(frozen=True)
class Refusal:
    """A store or key that was refused: the one-line reason (never a key) and the destinations it turned off."""

    reason: str
    destinations: tuple[str, ...]

    def describe(self) -> str:
        """The reason and what is off, as one line (``configure()`` logs it, ``agentdiag doctor`` shows it)."""
        names = {"local": "the local store", "otlp": "the OTLP export"}
        off = " and ".join(names.get(d, d) for d in self.destinations)
        return f"{self.reason}; {off} {'is' if len(self.destinations) == 1 else 'are'} off"


def argument_key(value: str | bytes | None, name: str) -> bytes | None:
    """The key an argument gives (None: not given). A weak or mistyped one raises ``ValueError``
    (:class:`WeakKeyError` for a weak one): an explicit argument is a programming error to fix, not to log."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return check_key_bytes(value, f"argument {name}")
    if isinstance(value, str):
        return hashing.key_from_text(value, f"argument {name}")
    raise ValueError(f"{name} must be str or bytes")


def environment_key(variable: str) -> bytes | None:
    """The key the environment variable ``variable`` gives (None: unset or empty); :class:`WeakKeyError` for a
    weak one (the message names the variable, never its value)."""
    text = os.environ.get(variable)
    if not text:
        return None
    return hashing.key_from_text(text, variable)


def key_file_path(store_path: Path | None) -> Path:
    """Where the key file of the store at ``store_path`` (default: ``AGENTDIAG_STORE``, else
    ``./.agentdiag/traces.db``, as :func:`otel_agentdiag.storage.connection.default_store_path`) is."""
    store = store_path or Path(os.environ.get(env.AGENTDIAG_STORE) or env.DEFAULT_STORE)
    return store.absolute().parent / hashing.KEY_FILE_NAME


def store_key(store_path: Path | None, *, create_key_file: bool = True) -> tuple[bytes, str]:
    """The key file's key and its source (``key file <path>``).

    Without ``create_key_file`` a missing file is replaced by a key for this process only (its source says
    where the file would be). Raises :class:`~otel_agentdiag._internal.trust.UntrustedPathError` or
    :class:`WeakKeyError` when the file (or its folder) is refused. A file that cannot be made or read for
    another reason also gives a key for this process only, with a warning.
    """
    key_path = key_file_path(store_path)
    try:
        if create_key_file:
            return hashing.load_or_create_key_file(key_path), f"key file {key_path}"
        key = hashing.read_key_file(key_path)
    except OSError as exc:
        _logger.warning(
            "otel-agentdiag: cannot use the hash key file %s (%s); using a key for this process only, so "
            "digests will differ between runs",
            key_path,
            exc.strerror or exc,
        )
        return hashing.ephemeral_key(), "ephemeral"
    if key is None:
        return hashing.ephemeral_key(), f"ephemeral (a key file would be created at {key_path})"
    return key, f"key file {key_path}"


def resolve_key(
    hash_key: str | bytes | None, store_path: Path | None, *, create_key_file: bool = True
) -> tuple[bytes, str]:
    """The local key and its source: ``hash_key`` > ``AGENTDIAG_HASH_KEY`` > the key file. Raises
    ``ValueError`` for a bad argument, :class:`WeakKeyError` / ``UntrustedPathError`` for a refused source."""
    given = argument_key(hash_key, "hash_key")
    if given is not None:
        return given, "argument"
    from_env = environment_key(env.AGENTDIAG_HASH_KEY)
    if from_env is not None:
        return from_env, env.AGENTDIAG_HASH_KEY
    return store_key(store_path, create_key_file=create_key_file)
