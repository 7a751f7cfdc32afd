"""Opening a store: the trust checks, the SQLite connection and its set-up, and write transactions on it."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from otel_agentdiag import environment_variables as env
from otel_agentdiag.storage.migrations import (
    StoreError,
    check_not_newer,
    check_ownership,
    is_empty,
    is_up_to_date,
    migrate,
)
from otel_agentdiag.storage.trusted import StoreFiles, open_store_files

if TYPE_CHECKING:
    from otel_agentdiag.storage.retention import RetentionLimits

DEFAULT_BUSY_TIMEOUT_S = 5.0


class StoreNeedsUpgrade(StoreError):
    """A read-only open found a store of an older schema: only a writer can migrate it."""


def read_only_uri(files: StoreFiles) -> str | None:
    """The SQLite URI a reader opens in a folder it cannot write (or on read-only media): ``mode=ro``; None
    when it can write there.

    A WAL database opened ``mode=ro`` still needs its ``-wal`` and ``-shm``: SQLite creates them when it can,
    and a read-only connection can never remove them (only the last connection, checkpointing, does). So where
    the reader can write, it connects as writers do and sets ``PRAGMA query_only`` (nothing is written through
    it; SQLite keeps and removes ``-wal``/``-shm`` as for any connection). Where it cannot: ``mode=ro``, and with
    no ``-wal`` there ``immutable=1`` as well: every committed row is in the database file and no writer can be
    at work (none could make its ``-wal``), so the file is read without locks or companion files. A ``-wal`` that
    exists holds rows: it is read, never ignored.
    """
    if files.folder_writable():
        return None
    params = "mode=ro" if files.exists("-wal") else "mode=ro&immutable=1"
    return f"file:{quote(files.connect_path, safe='/')}?{params}"


def default_store_path() -> Path:
    """``AGENTDIAG_STORE`` or ``./.agentdiag/traces.db`` (relative to the current directory)."""
    return Path(os.environ.get(env.AGENTDIAG_STORE) or env.DEFAULT_STORE)


class StoreConnection:
    """One open store: its path, retention limits, lock and connection; the base every part of ``SpanStore``
    shares (see :class:`~otel_agentdiag.storage.store.SpanStore` for the arguments and the trust checks)."""

    path: Path
    read_only: bool
    """Opened with ``read_only=True`` (``PRAGMA query_only``; SQLite ``mode=ro`` where the folder cannot be
    written, see :func:`read_only_uri`): every write raises ``sqlite3.OperationalError``."""
    _lock: threading.RLock
    _conn: sqlite3.Connection
    _retention: RetentionLimits | None
    _identity: tuple[int, int]
    _resource_ids: dict[str, int]
    _resource_objects: dict[int, tuple[Mapping[str, Any], int]]
    _waiting: dict[tuple[str, str], tuple[str | None, ...]]
    """(trace id, parent span id) -> the sessions in which this connection wrote rows of that trace flagged
    ``orphan`` that wait for that parent, oldest first (the writer's)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S,
        retention: RetentionLimits | None = None,
        max_page_count: int | None = None,
        read_only: bool = False,
    ):
        self.path = Path(path)
        self._retention = retention
        self.read_only = read_only
        create = create and not read_only
        files = open_store_files(self.path, create=create)  # ours and private, or UntrustedPathError
        try:
            self._connect(files, create=create, busy_timeout=busy_timeout, max_page_count=max_page_count)
        finally:
            files.close()

    def _connect(self, files: StoreFiles, *, create: bool, busy_timeout: float, max_page_count: int | None) -> None:
        self._lock = threading.RLock()
        self._resource_ids: dict[str, int] = {}
        self._resource_objects: dict[int, tuple[Mapping[str, Any], int]] = {}
        self._waiting = {}
        read_only = self.read_only
        try:
            uri = read_only_uri(files) if read_only else None
            self._conn = sqlite3.connect(
                uri or files.connect_path,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                uri=uri is not None,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            if read_only:
                self._conn.execute("PRAGMA query_only = ON")  # whatever the URI: no statement writes
            # Read-only checks first: a file that is not ours is left exactly as it was.
            check_ownership(self._conn)
            if not create and is_empty(self._conn):
                # An empty file (or one of a byte: SQLite reads it as an empty database) is not a store yet; a
                # reader must not turn it into one (a writer creates it with create=True).
                raise StoreError("not an otel-agentdiag store yet (the file is empty)")
            check_not_newer(self._conn)
            files.tighten_database(read_only=read_only)
            if read_only:
                # A reader changes nothing: no journal mode, no migration (an older store needs a writer first).
                if not is_up_to_date(self._conn):
                    raise StoreNeedsUpgrade("the store needs an upgrade, which a read-only open cannot make")
                files.verify(read_only=True)
                st = os.stat(self.path)
                self._identity = (st.st_dev, st.st_ino)
                return
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode != "wal":
                import logging  # on first use: start-up (`agentdiag show`) pays nothing for it

                logging.getLogger(__name__).warning(
                    "otel-agentdiag: %s could not switch to WAL (journal_mode=%s)", self.path, mode
                )
            self._conn.execute("PRAGMA synchronous = NORMAL")
            # Whatever SQLite frees (a clear, retention's pruning) is overwritten with zeros, not left in free space.
            self._conn.execute("PRAGMA secure_delete = ON")
            migrate(self._conn)
            if max_page_count is not None:
                self._conn.execute(f"PRAGMA max_page_count = {int(max_page_count)}")
            files.verify()  # the files SQLite opened are the ones checked; its -wal/-shm ours and 0600
            st = os.stat(self.path)
            self._identity = (st.st_dev, st.st_ino)
        except OSError as exc:
            self._conn.close()
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(f"{self.path} is not a usable otel-agentdiag store: {exc}") from exc
        except UnicodeDecodeError:
            # A damaged schema: sqlite3 cannot even decode SQLite's message about it (which quotes the damage).
            self._conn.close()
            raise StoreError(f"{self.path} is not a usable otel-agentdiag store: its schema is damaged") from None
        except StoreError as exc:
            self._conn.close()
            kind = StoreNeedsUpgrade if isinstance(exc, StoreNeedsUpgrade) else StoreError
            raise kind(f"{self.path}: {exc}") from None
        except BaseException:
            self._conn.close()
            raise

    @property
    def retention(self) -> RetentionLimits:
        """The retention limits writes and :meth:`prune` apply (the defaults of :class:`RetentionLimits` when none
        were given; made on first use, so a reader does not import the retention module)."""
        if self._retention is None:
            from otel_agentdiag.storage.retention import RetentionLimits

            self._retention = RetentionLimits()
        return self._retention

    @retention.setter
    def retention(self, limits: RetentionLimits) -> None:
        self._retention = limits

    def _check_file(self) -> None:
        """Raise :class:`StoreError` unless ``path`` still names the opened database file."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise StoreError(f"the store {self.path} is gone ({exc.strerror})") from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise StoreError(f"the store {self.path} was replaced by another file")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``) under the store's lock, on a file that is still ours:
        committed when the block ends, rolled back (with the resource caches) when it raises."""
        with self._lock:
            self._check_file()
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The store's connection under its lock, for reads of other layers (the server's queries): a reader of
        ours is the only user of the connection while the block runs."""
        with self._lock:
            yield self._conn

    def _rollback(self) -> None:
        # ids inserted in the rolled-back transaction are gone
        self._resource_ids.clear()
        self._resource_objects.clear()
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
