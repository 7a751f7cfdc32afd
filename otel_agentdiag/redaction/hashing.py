"""Keyed pseudonyms for correlation IDs: HMAC-SHA256 with a derived key per ID kind, tagged with the
algorithm and a key id.

Contract (documented, stable from 0.2.0): with a secret ``key``, the digest of an ID of kind ``k``
(``conversation``, ``user``, ``agent``, ``tool_call``, ``response``, ...) with raw value ``v`` is::

    kind_key = HMAC-SHA256(key, "agentdiag/v1/id-kind\x00" + k)
    digest   = "hmac-sha256:" + key_id + ":" + hex(HMAC-SHA256(kind_key, NFC(v)))

- ``NFC(v)``: ``str(v)`` (integers in decimal) in Unicode NFC, encoded as UTF-8. IDs stay case-sensitive
  and are not trimmed: ``"Alice"`` and ``"alice "`` are different IDs.
- ``key_id``: the first 8 hex digits of SHA-256 over ``"agentdiag-key-id\x00" + key``. It is public and
  non-reversible; a key rotation shows in the data as a new key id (old and new digests do not join).
- Each kind has its own derived key, so the same raw value used as a user id and as a conversation id gives
  unrelated digests, and a digest of one kind cannot be tested against another kind's.

Plain SHA-256 (``hash_function="sha256"``) is an explicit opt-in: ``"sha256:" + hex(SHA-256(k + "\x00" +
NFC(v)))``. Without a key, anyone can hash candidate IDs (e-mail addresses, numeric user ids) and find
matches; use it only when datasets must join without sharing a key.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import threading
import unicodedata
from pathlib import Path

from otel_agentdiag._internal.files import make_private_folders
from otel_agentdiag._internal.fork import reinit_after_fork

_logger = logging.getLogger(__name__)

ALGORITHM = "hmac-sha256"
PLAIN_ALGORITHM = "sha256"
KEY_FILE_NAME = "hash.key"
KEY_BYTES = 32
MIN_KEY_BYTES = 16
_MEMO_LIMIT = 4096


def key_id_for(key: bytes) -> str:
    """The public, non-reversible identifier of a key: 8 hex digits."""
    return hashlib.sha256(b"agentdiag-key-id\x00" + key).hexdigest()[:8]


_KIND_LABEL = b"agentdiag/v1/id-kind\x00"


def normalise(value: object) -> bytes:
    """The bytes an ID is hashed as: ``str(value)`` in Unicode NFC, UTF-8 (lone surrogates kept as is)."""
    raw = value if isinstance(value, str) else str(value)
    return unicodedata.normalize("NFC", raw).encode("utf-8", "surrogatepass")


class IdHasher:
    """Turns raw correlation IDs into ``hmac-sha256:<key id>:<hex>`` digests (see the module docstring).

    Digests are memoised (correlation IDs repeat across the spans of a session); the memo is bounded and
    lives in process memory only. ``algorithm="sha256"`` ignores the key (unkeyed; opt-in only).
    """

    __slots__ = ("__weakref__", "_key", "_kind_keys", "_lock", "_memo", "_prefix", "algorithm", "key_id")

    def __init__(self, key: bytes, *, algorithm: str = ALGORITHM) -> None:
        if not isinstance(key, bytes) or not key:
            raise ValueError("the hash key must be non-empty bytes")
        if algorithm not in (ALGORITHM, PLAIN_ALGORITHM):
            raise ValueError(f"algorithm must be {ALGORITHM!r} or {PLAIN_ALGORITHM!r}, not {algorithm!r}")
        self.algorithm = algorithm
        self._key = key
        if algorithm == ALGORITHM:
            self.key_id: str | None = key_id_for(key)
            self._prefix = f"{ALGORITHM}:{self.key_id}:"
        else:
            self.key_id = None
            self._prefix = f"{PLAIN_ALGORITHM}:"
        self._kind_keys: dict[str, hmac.HMAC] = {}
        self._memo: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        """A forked child's batch worker hashes too: a lock held by the parent's worker at the fork is replaced."""
        self._lock = threading.Lock()

    def is_digest(self, value: str) -> bool:
        """Whether ``value`` already is a digest made by this hasher (so it is not hashed twice)."""
        prefix = self._prefix
        if not value.startswith(prefix) or len(value) != len(prefix) + 64:
            return False
        tail = value[len(prefix) :]
        return all(c in "0123456789abcdef" for c in tail)

    def _kind_mac(self, kind: str) -> hmac.HMAC:
        mac = self._kind_keys.get(kind)
        if mac is None:
            kind_key = hmac.new(self._key, _KIND_LABEL + kind.encode(), hashlib.sha256).digest()
            mac = hmac.new(kind_key, digestmod=hashlib.sha256)
            with self._lock:
                self._kind_keys[kind] = mac
        return mac

    def digest(self, kind: str, value: object) -> str:
        raw = value if isinstance(value, str) else str(value)
        memo_key = (kind, raw)
        found = self._memo.get(memo_key)
        if found is not None:
            return found
        if self.algorithm == ALGORITHM:
            mac = self._kind_mac(kind).copy()
            mac.update(normalise(raw))
            hexdigest = mac.hexdigest()
        else:
            hexdigest = hashlib.sha256(kind.encode() + b"\x00" + normalise(raw)).hexdigest()
        result = self._prefix + hexdigest
        with self._lock:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[memo_key] = result
        return result


def key_from_text(text: str) -> bytes:
    key = text.encode("utf-8")
    if len(key) < MIN_KEY_BYTES:
        _logger.warning(
            "otel-agentdiag: the hash key is shorter than %d bytes; digests are easier to attack", MIN_KEY_BYTES
        )
    return key


def load_or_create_key_file(path: Path) -> bytes:
    """Read the 32-byte key at ``path``, creating it (mode 0600, folder 0700) if it does not exist."""
    make_private_folders(path.parent)  # each missing folder 0700, not only the last one
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        key = path.read_bytes()
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"hash key file {path} holds {len(key)} bytes; expected {KEY_BYTES}") from None
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            _logger.warning("otel-agentdiag: hash key file %s is readable by others (mode %o)", path, mode)
        return key
    key = secrets.token_bytes(KEY_BYTES)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def ephemeral_key() -> bytes:
    """A random key for this process only: digests are consistent within the process, not across runs."""
    return secrets.token_bytes(KEY_BYTES)
