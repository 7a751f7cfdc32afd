"""Keyed pseudonyms for correlation IDs: HMAC-SHA256, tagged with the algorithm and a key id.

Contract (documented, stable): the digest of an ID of kind ``k`` (``conversation``, ``user``, ``agent``,
``tool_call``, ``response``) with raw value ``v`` is::

    "hmac-sha256:" + key_id + ":" + hex(HMAC-SHA256(key, k + "\\x00" + NFC(v)))

where ``NFC(v)`` is the Unicode NFC normalisation of ``str(v)`` encoded as UTF-8 (IDs stay case-sensitive),
and ``key_id`` is the first 8 hex digits of SHA-256 over ``"agentdiag-key-id\\x00" + key``, so a key rotation
is visible in the data without revealing the key. Kinds are domain-separated: the same raw value used as a
user id and as a conversation id gives unrelated digests.
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

_logger = logging.getLogger(__name__)

ALGORITHM = "hmac-sha256"
KEY_FILE_NAME = "hash.key"
KEY_BYTES = 32
MIN_KEY_BYTES = 16
_MEMO_LIMIT = 4096


def key_id_for(key: bytes) -> str:
    """The public, non-reversible identifier of a key: 8 hex digits."""
    return hashlib.sha256(b"agentdiag-key-id\x00" + key).hexdigest()[:8]


class IdHasher:
    """Turns raw correlation IDs into ``hmac-sha256:<key id>:<hex>`` digests.

    Digests are memoised (correlation IDs repeat across the spans of a session); the memo is bounded and
    lives in process memory only.
    """

    __slots__ = ("_key", "_lock", "_memo", "_prefix", "key_id")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or not key:
            raise ValueError("the hash key must be non-empty bytes")
        self._key = hmac.new(key, digestmod=hashlib.sha256)
        self.key_id = key_id_for(key)
        self._prefix = f"{ALGORITHM}:{self.key_id}:"
        self._memo: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def is_digest(self, value: str) -> bool:
        """Whether ``value`` already is a digest made with this key (so it is not hashed twice)."""
        return value.startswith(self._prefix) and len(value) == len(self._prefix) + 64

    def digest(self, kind: str, value: object) -> str:
        raw = value if isinstance(value, str) else str(value)
        memo_key = (kind, raw)
        found = self._memo.get(memo_key)
        if found is not None:
            return found
        mac = self._key.copy()
        mac.update(kind.encode() + b"\x00" + unicodedata.normalize("NFC", raw).encode("utf-8", "surrogatepass"))
        result = self._prefix + mac.hexdigest()
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
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
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
