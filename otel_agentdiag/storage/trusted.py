"""The store's files are used only when they are ours (checked folder, database, ``-wal`` and ``-shm``).

The checks of :mod:`otel_agentdiag._internal.trust` for the SQLite database, its ``-wal`` and ``-shm``, and
their folder.

:func:`open_store_files` runs before SQLite sees the path: it opens the folder (``O_DIRECTORY | O_NOFOLLOW``)
and checks it on its descriptor, creates the database file if asked (mode 0600, ``O_EXCL | O_NOFOLLOW``, checked
on its descriptor), and checks an existing database and any ``-wal``/``-shm`` as entries of that folder
(``fstatat`` without following links; they are never opened, see
:func:`~otel_agentdiag._internal.trust.check_trusted_entry`). SQLite is then given the checked folder's current
path (:func:`~otel_agentdiag._internal.trust.descriptor_path`), never a path through symbolic links.
:meth:`StoreFiles.verify` runs once the connection is set up: the path still names the checked folder, the
database there is the checked file, and the ``-wal``/``-shm`` SQLite made are ours and private (tightened to 0600
when others may read them).

Readers are held to the same rules as writers: a store someone else planted could feed forged traces.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from otel_agentdiag._internal import trust
from otel_agentdiag._internal.files import make_private_folders
from otel_agentdiag.storage.migrations import StoreError

COMPANIONS = {"-wal": "store WAL file", "-shm": "store shared-memory file"}
"""The files SQLite keeps beside the database in WAL mode, and how a refusal names them."""


@dataclass
class StoreFiles:
    """The checked folder (an open descriptor) and database of one store being opened. Close it when done."""

    path: Path
    """The database path as given (for messages)."""
    folder_fd: int
    connect_path: str
    """What SQLite opens: the checked folder's current path and the database's name."""
    identity: tuple[int, int]
    """``(st_dev, st_ino)`` of the checked database file."""

    def tighten_database(self, *, read_only: bool = False) -> None:
        """Set the database to 0600 when others may read it (call once the file is known to be a store).

        ``read_only`` (a reader): on read-only media, where a mode cannot change, a warning says so instead."""
        _tighten(self.folder_fd, self.path.name, self.path, read_only=read_only)

    def exists(self, suffix: str) -> bool:
        """Whether the database's companion ``suffix`` (``-wal``, ``-shm``) is in the checked folder (not followed)."""
        try:
            os.stat(f"{self.path.name}{suffix}", dir_fd=self.folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def folder_writable(self) -> bool:
        """Whether the effective user may create files in the checked folder (False on read-only media)."""
        effective = os.access in os.supports_effective_ids
        try:
            return os.access(".", os.W_OK, dir_fd=self.folder_fd, effective_ids=effective)
        except (NotImplementedError, OSError):
            return os.access(os.path.dirname(self.connect_path), os.W_OK)

    def verify(self, *, read_only: bool = False) -> None:
        """After SQLite connected: raise :class:`~otel_agentdiag._internal.trust.UntrustedPathError` unless the
        path SQLite opened still names the checked folder and database, and each ``-wal``/``-shm`` is ours and
        private; tighten those others may read (``read_only``: as :meth:`tighten_database`)."""
        folder = os.fstat(self.folder_fd)
        try:
            now = os.stat(os.path.dirname(self.connect_path), follow_symlinks=False)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (folder.st_dev, folder.st_ino):
            raise trust.UntrustedPathError("store folder", self.path.parent, "was moved or replaced while opening")
        try:
            st = os.stat(self.path.name, dir_fd=self.folder_fd, follow_symlinks=False)
        except OSError:
            st = None
        if st is None or (st.st_dev, st.st_ino) != self.identity:
            raise trust.UntrustedPathError("store database", self.path, "was replaced while opening")
        for suffix, what in COMPANIONS.items():
            name = f"{self.path.name}{suffix}"
            trust.check_trusted_entry(self.folder_fd, name, f"{self.path}{suffix}", what)
            _tighten(self.folder_fd, name, f"{self.path}{suffix}", read_only=read_only)

    def close(self) -> None:
        os.close(self.folder_fd)


def open_store_files(path: Path, *, create: bool) -> StoreFiles:
    """Check (and with ``create``, make) the folder and database of the store at ``path``; see the module.

    Raises :class:`~otel_agentdiag._internal.trust.UntrustedPathError` for a folder or file that is not ours, is
    writable by group or others, or is a symbolic link; :class:`StoreError` when there is no store and
    ``create`` is false. New folders are 0700, a new database 0600.
    """
    folder = path.parent
    if create:
        try:
            make_private_folders(folder)  # each missing folder 0700, not only the last one
        except FileExistsError:
            pass  # something that is not a folder is in the way: the check below names it
    try:
        folder_fd = trust.open_trusted_dir(folder, "store folder")
    except (FileNotFoundError, NotADirectoryError):
        if create:
            raise  # an ordinary failure to create the store (a file where its folder should be, say)
        raise StoreError(f"no trace store at {path}") from None
    try:
        st = trust.create_trusted_file(folder_fd, path.name, path, "store database") if create else None
        if st is None:
            _check_kind(folder_fd, path)
            st = trust.check_trusted_entry(folder_fd, path.name, path, "store database")
        if st is None:
            raise StoreError(f"no trace store at {path}")
        for suffix, what in COMPANIONS.items():
            trust.check_trusted_entry(folder_fd, f"{path.name}{suffix}", f"{path}{suffix}", what)
        connect_path = os.path.join(trust.descriptor_path(folder_fd, folder), path.name)
        return StoreFiles(path, folder_fd, connect_path, (st.st_dev, st.st_ino))
    except BaseException:
        os.close(folder_fd)
        raise


def _tighten(folder_fd: int, name: str, path: str | os.PathLike[str], *, read_only: bool) -> None:
    """:func:`~otel_agentdiag._internal.trust.tighten`; for a reader, a mode that cannot change (read-only media)
    is a warning, not a failure: the checks passed, and a reader changes nothing."""
    try:
        trust.tighten(folder_fd, name, path)
    except OSError as exc:
        if not read_only or exc.errno not in (errno.EROFS, errno.EPERM, errno.EACCES):
            raise
        import logging  # on first use: start-up (`agentdiag show`) pays nothing for it

        logging.getLogger(__name__).warning(
            "otel-agentdiag: %s is readable by others and cannot be made private (%s)", path, exc.strerror
        )


def _check_kind(folder_fd: int, path: Path) -> None:
    """A folder (or FIFO, device...) where the database should be is an ordinary error, as before: StoreError."""
    try:
        st = os.stat(path.name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISLNK(st.st_mode) and not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{path} is not a regular file, so not a trace store")


def check_store_files(path: Path) -> None:
    """Check, without creating or changing anything, what exists of the store at ``path``: its folder, database,
    ``-wal`` and ``-shm`` (a missing one is fine: it would be made private). Raises
    :class:`~otel_agentdiag._internal.trust.UntrustedPathError` as :func:`open_store_files` would."""
    try:
        folder_fd = trust.open_trusted_dir(path.parent, "store folder")
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        try:
            _check_kind(folder_fd, path)
        except StoreError:
            return  # not a refusal: opening the store reports it
        trust.check_trusted_entry(folder_fd, path.name, path, "store database")
        for suffix, what in COMPANIONS.items():
            trust.check_trusted_entry(folder_fd, f"{path.name}{suffix}", f"{path}{suffix}", what)
    finally:
        os.close(folder_fd)
