"""Keyed pseudonyms for correlation IDs: HMAC-SHA256 digests tagged with the algorithm and a key id.

Each ID kind has a key of its own, derived from the secret.

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
- The key must be strong (:mod:`otel_agentdiag.redaction.key_strength`): 32 random bytes or more, given as
  bytes, 64+ hex digits or base64; a weak key is refused with :class:`WeakKeyError`, since the key id and every
  digest let anyone test guesses of it offline. The generated key file holds 32 random bytes.
- The key file (``hash.key``, beside the store) is used only when it and its folder are ours and private
  (:mod:`otel_agentdiag._internal.trust`); else :class:`~otel_agentdiag._internal.trust.UntrustedPathError`.

Plain SHA-256 (``hash_function="sha256"``) is an explicit opt-in: ``"sha256:" + hex(SHA-256(k + "\x00" +
NFC(v)))``. Without a key, anyone can hash candidate IDs (e-mail addresses, numeric user ids) and find
matches; use it only when datasets must join without sharing a key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import unicodedata
from pathlib import Path

from otel_agentdiag._internal import trust
from otel_agentdiag._internal.files import make_private_folders
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag.redaction.key_strength import (
    WeakKeyError,
    check_key_bytes,
    check_key_file_bytes,
    check_text_key,
)

ALGORITHM = "hmac-sha256"
PLAIN_ALGORITHM = "sha256"
KEY_FILE_NAME = "hash.key"
KEY_BYTES = 32
_MEMO_LIMIT = 4096
_KEY_FILE_LIMIT = 4096
"""A key file larger than this is not read (it is not a key)."""

__all__ = [
    "ALGORITHM",
    "KEY_BYTES",
    "KEY_FILE_NAME",
    "PLAIN_ALGORITHM",
    "IdHasher",
    "WeakKeyError",
    "ephemeral_key",
    "key_from_text",
    "key_id_for",
    "load_or_create_key_file",
    "normalise",
    "read_key_file",
]


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

    Raises :class:`WeakKeyError` (a ``ValueError``) for a keyed hasher whose key is weak (see
    :mod:`~otel_agentdiag.redaction.key_strength`): this is the one place every keyed digest is made, so no
    path builds one on a guessable key. :data:`otel_agentdiag.testing.TEST_HASH_KEY` is a strong, public key.
    """

    __slots__ = ("__weakref__", "_key", "_kind_keys", "_lock", "_memo", "_prefix", "algorithm", "key_id")

    def __init__(self, key: bytes, *, algorithm: str = ALGORITHM) -> None:
        if not isinstance(key, bytes) or not key:
            raise ValueError("the hash key must be non-empty bytes")
        if algorithm not in (ALGORITHM, PLAIN_ALGORITHM):
            raise ValueError(f"algorithm must be {ALGORITHM!r} or {PLAIN_ALGORITHM!r}, not {algorithm!r}")
        if algorithm == ALGORITHM:
            check_key_bytes(key, "IdHasher(key)")
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


def key_from_text(text: str, source: str = "text") -> bytes:
    """The key ``text`` stands for: its UTF-8 bytes, when it is strong (64+ hex digits or the base64 of 32+
    random bytes, that do not look chosen); else :class:`WeakKeyError` naming ``source`` (an argument or an
    environment variable's name, never the key)."""
    return check_text_key(text, source)


def _open_key_folder(path: Path, *, create: bool) -> int | None:
    """The checked descriptor of the folder of the key file ``path`` (the store folder); None when it is missing
    and not ``create``."""
    if create:
        try:
            make_private_folders(path.parent)  # each missing folder 0700, not only the last one
        except FileExistsError:
            pass  # a non-folder (or a symlink) in the way: the check below names it
    try:
        return trust.open_trusted_dir(path.parent, "store folder")
    except FileNotFoundError:
        if create:
            raise
        return None


def _read_key(fd: int, path: Path) -> bytes:
    data = b""
    while len(data) <= _KEY_FILE_LIMIT:
        chunk = os.read(fd, _KEY_FILE_LIMIT + 1 - len(data))
        if not chunk:
            break
        data += chunk
    if len(data) > _KEY_FILE_LIMIT:
        raise WeakKeyError(f"key file {path}", f"it is larger than {_KEY_FILE_LIMIT} bytes, so it is not a key")
    return check_key_file_bytes(data, f"key file {path}")


def read_key_file(path: Path) -> bytes | None:
    """The key in the key file ``path``, or None when there is none (it, or its folder, does not exist).

    Never creates anything. Raises :class:`~otel_agentdiag._internal.trust.UntrustedPathError` when the file
    or its folder is not ours, is writable by others or is a symbolic link, :class:`WeakKeyError` when it does
    not hold a strong key, ``OSError`` when it cannot be read. A key file that others can read is set to 0600
    (with a warning that recommends a new key: see ``docs/policy.md``, key rotation).
    """
    folder = _open_key_folder(path, create=False)
    if folder is None:
        return None
    try:
        try:
            return _read_trusted_key(folder, path)
        except FileNotFoundError:
            return None
    finally:
        os.close(folder)


def load_or_create_key_file(path: Path) -> bytes:
    """Read the key at ``path``, creating it (32 random bytes, mode 0600, folder 0700) if it does not exist.

    The new file appears complete or not at all (written beside it, then linked into place), so a process that
    starts at the same moment reads the same key, never a half-written one. Raises as :func:`read_key_file`.
    """
    folder = _open_key_folder(path, create=True)
    assert folder is not None
    try:
        created = _create_key_file(folder, path)
        if created is not None:
            return created
        return _read_trusted_key(folder, path)
    finally:
        os.close(folder)


def _read_trusted_key(folder: int, path: Path) -> bytes:
    """The key in the file ``path.name`` of the checked ``folder``, opened and checked as ours (``O_NOFOLLOW``,
    ``fstat``), then set to 0600 if others could read it. ``FileNotFoundError`` when there is none."""
    fd, _created = trust.open_trusted_file(folder, path.name, path, "hash key file")
    try:
        key = _read_key(fd, path)
    finally:
        os.close(fd)
    _tighten_key(folder, path)
    return key


def _create_key_file(folder: int, path: Path) -> bytes | None:
    """Put a new key in place at ``path`` unless a key file is already there (then None)."""
    try:
        os.stat(path.name, dir_fd=folder, follow_symlinks=False)
        return None  # there is one (or something in its place, which the checks then refuse)
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(KEY_BYTES)
    temporary = f".{path.name}.{secrets.token_hex(8)}.tmp"
    fd, _created = trust.open_trusted_file(folder, temporary, path.parent / temporary, "hash key file", create=True)
    try:
        _write_key(fd, key)
        try:
            os.link(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except FileExistsError:
            return None  # another process made it first: use theirs
        except OSError:
            return _create_key_in_place(folder, path, key)  # no hard links here (some network or FUSE file systems)
        return key
    finally:
        try:
            os.unlink(temporary, dir_fd=folder)
        except FileNotFoundError:
            pass


def _create_key_in_place(folder: int, path: Path, key: bytes) -> bytes | None:
    fd, created = trust.open_trusted_file(folder, path.name, path, "hash key file", create=True)
    if not created:
        os.close(fd)
        return None
    _write_key(fd, key)
    return key


def _write_key(fd: int, key: bytes) -> None:
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)


def _tighten_key(folder: int, path: Path) -> None:
    trust.tighten(
        folder,
        path.name,
        path,
        advice="if anyone may have read the key, make a new one (see key rotation in docs/policy.md)",
    )


def ephemeral_key() -> bytes:
    """A random key for this process only: digests are consistent within the process, not across runs."""
    return secrets.token_bytes(KEY_BYTES)
