"""Trust before use: a store folder, database, ``-wal``/``-shm`` or key file is used only when it is ours.

Like OpenSSH's ``StrictModes``. Before otel-agentdiag writes to a folder or file, or reads a key or traces from
one, the object must be

- owned by the effective user (``os.geteuid()``),
- not writable by group or others (a folder, and each file in it), and
- not a symbolic link, dangling or not.

A folder is opened with ``O_DIRECTORY | O_NOFOLLOW`` and checked with ``fstat`` on the opened descriptor, so
what is checked is what is used: there is no check-then-use window. Files are then reached relative to that
descriptor (``dir_fd``): once a folder is ours and private, nobody but us (and root) can add, remove or swap an
entry in it. The key file is opened with ``O_NOFOLLOW`` and checked on its descriptor; SQLite's files are checked
with ``fstatat(dir_fd, name, AT_SYMLINK_NOFOLLOW)`` instead of being opened, for the reason
:func:`check_trusted_entry` gives.

What is refused raises :class:`UntrustedPathError`, whose message names the object, the path and the reason, as
``refusing store folder /x/.agentdiag: owned by uid 1001, not 1000 (you)``. Readers apply the same checks as
writers: a store planted by someone else could feed forged traces, and a planted key is one they know.

Read bits are a different matter: a file of ours that others can read (an old store made under a loose umask) is
tightened to 0600 by its owner's code (:func:`tighten`), with a warning, rather than refused.

The folder above a checked folder must not be writable by others either (:func:`check_parent`: they could move
the folder away and put theirs in its place), unless it is sticky (``/tmp``) or writable only by the user's own
private group. Folders higher up are not checked: whatever path leads to the folder, the folder reached must be
ours and private, so a redirection can only lead to another private folder of ours. SQLite opens files by path,
though, so see :func:`descriptor_path` for the one assumption that remains there.

On a platform without ``os.geteuid`` (Windows) nothing is checked: there is no POSIX owner or mode to check.
"""

from __future__ import annotations

import os
import stat
import sys

FILE_MODE = 0o600
_GROUP_OTHER_WRITE = 0o022
_GROUP_OTHER_ANY = 0o077
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
CHECKS_APPLY = hasattr(os, "geteuid") and bool(_NOFOLLOW)
"""Whether this platform has owners and modes to check (POSIX)."""


class UntrustedPathError(ValueError):
    """A folder or file that is not ours, is writable by others, or is a symbolic link: it is not used.

    ``what`` names the object (``store folder``, ``store database``, ``store WAL file``, ``hash key file``),
    ``path`` where it is, ``reason`` why it was refused; ``str()`` is one line with all three.
    """

    def __init__(self, what: str, path: str | os.PathLike[str], reason: str) -> None:
        self.what = what
        self.path = str(path)
        self.reason = reason
        super().__init__(f"refusing {what} {self.path}: {reason}")


def check_trusted(fd: int, path: str | os.PathLike[str], what: str, *, folder: bool = False) -> os.stat_result:
    """``fstat`` the open descriptor ``fd`` and raise :class:`UntrustedPathError` unless it is a folder (with
    ``folder``) or a regular file, owned by the effective user, and not writable by group or others."""
    st = os.fstat(fd)
    check_stat(st, path, what, folder=folder)
    return st


def check_stat(st: os.stat_result, path: str | os.PathLike[str], what: str, *, folder: bool = False) -> None:
    """The checks of :func:`check_trusted` on a ``stat`` result (from ``fstat``, or ``lstat`` of an entry in a
    checked folder); a symbolic link is refused as one."""
    if not CHECKS_APPLY:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UntrustedPathError(what, path, "is a symbolic link")
    if folder and not stat.S_ISDIR(st.st_mode):
        raise UntrustedPathError(what, path, "is not a folder")
    if not folder and not stat.S_ISREG(st.st_mode):
        raise UntrustedPathError(what, path, "is not a regular file")
    euid = os.geteuid()
    if st.st_uid != euid:
        raise UntrustedPathError(what, path, f"owned by uid {st.st_uid}, not {euid} (you)")
    if st.st_mode & _GROUP_OTHER_WRITE:
        mode = stat.S_IMODE(st.st_mode)
        raise UntrustedPathError(what, path, f"writable by group or others (mode {mode:04o})")


def _refusal(
    exc: OSError,
    target: str | os.PathLike[str],
    shown: str | os.PathLike[str],
    what: str,
    *,
    folder: bool,
    dir_fd: int | None = None,
) -> UntrustedPathError | None:
    """Why an ``O_NOFOLLOW`` open of ``target`` failed, when the reason is one we refuse for (a symbolic link,
    the wrong kind of object); ``None`` for any other failure (the caller re-raises it)."""
    if isinstance(exc, (FileNotFoundError, PermissionError)):
        return None
    try:
        st = os.stat(target, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None  # gone meanwhile: the caller reports the original error
    if stat.S_ISLNK(st.st_mode):
        return UntrustedPathError(what, shown, "is a symbolic link")
    if folder and not stat.S_ISDIR(st.st_mode):
        return None  # a file where the folder should be: NotADirectoryError, an ordinary failure, not a refusal
    if not folder and not stat.S_ISREG(st.st_mode):
        return UntrustedPathError(what, shown, "is not a regular file")
    return None


def open_trusted_dir(path: str | os.PathLike[str], what: str = "store folder") -> int:
    """Open the folder ``path`` (``O_DIRECTORY | O_NOFOLLOW``) and check it (:func:`check_trusted`) and the folder
    above it (:func:`check_parent`).

    Returns the descriptor (the caller closes it). Raises :class:`UntrustedPathError` for a folder that is not
    ours, is writable by group or others, or is a symbolic link, or whose parent others may write;
    ``FileNotFoundError`` when it does not exist, ``NotADirectoryError`` when something else is in its place.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        refusal = _refusal(exc, path, path, what, folder=True)
        if refusal is not None:
            raise refusal from None
        raise
    try:
        check_trusted(fd, path, what, folder=True)
        check_parent(fd, path, what)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_parent(fd: int, path: str | os.PathLike[str], what: str) -> None:
    """Raise :class:`UntrustedPathError` when others may write to the folder that holds the checked folder ``fd``:
    they could move it away and put theirs in its place (the reason OpenSSH checks the folders above ``~/.ssh``).

    Allowed: a sticky folder (``/tmp``: others cannot move what is ours), and a folder writable by group when
    the group is the user's own private group (named as the user, the user's primary group, no other members,
    not gid 0): the default on distributions whose umask is 002. The owner of the folder above is not checked
    (a bind mount or a checkout owned by someone else is common, and only they and root could move the store).
    """
    if not CHECKS_APPLY:
        return
    here = descriptor_path(fd, path)
    parent = os.path.dirname(here)
    if not parent or parent == here:
        return  # the root folder has no parent
    try:
        st = os.stat(parent)
    except OSError:
        return  # cannot look: nothing to judge (the folder itself was checked)
    mode = stat.S_IMODE(st.st_mode)
    if not mode & _GROUP_OTHER_WRITE or mode & stat.S_ISVTX:
        return
    if not mode & 0o002 and _private_group(st.st_gid):
        return
    raise UntrustedPathError(
        what, path, f"the folder above it, {parent}, is writable by group or others (mode {mode:04o})"
    )


def _private_group(gid: int) -> bool:
    """Whether ``gid`` is the effective user's own group and nobody else's (never gid 0)."""
    if gid == 0:
        return False
    try:
        import grp
        import pwd

        me = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except (ImportError, KeyError):
        return False
    return gid == me.pw_gid and group.gr_name == me.pw_name and set(group.gr_mem) <= {me.pw_name}


def open_trusted_file(
    dir_fd: int,
    name: str,
    path: str | os.PathLike[str],
    what: str,
    *,
    flags: int = os.O_RDONLY,
    create: bool = False,
) -> tuple[int, bool]:
    """Open ``name`` in the checked folder ``dir_fd`` with ``O_NOFOLLOW`` and check it (:func:`check_trusted`).

    Returns ``(descriptor, created)``; the caller closes the descriptor. ``create``: make the file (mode 0600,
    ``O_EXCL``) when it does not exist, and return it open for writing; an existing file is opened with
    ``flags``. ``path`` is only for messages. Raises :class:`UntrustedPathError` (not ours, writable by others, a
    symbolic link, not a regular file) or ``FileNotFoundError`` (missing, without ``create``). A FIFO or device
    does not block the open (``O_NONBLOCK``); it is refused as not a regular file.
    """
    if create:
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, FILE_MODE, dir_fd=dir_fd)
        except FileExistsError:
            pass  # an existing entry (a file, or a symlink: O_EXCL never follows one) is opened and checked below
        else:
            _checked(fd, path, what)
            return fd, True
    try:
        fd = os.open(name, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        refusal = _refusal(exc, name, path, what, folder=False, dir_fd=dir_fd)
        if refusal is not None:
            raise refusal from None
        raise
    _checked(fd, path, what)
    if _NONBLOCK:
        os.set_blocking(fd, True)
    return fd, False


def _checked(fd: int, path: str | os.PathLike[str], what: str) -> None:
    try:
        check_trusted(fd, path, what)
    except BaseException:
        os.close(fd)
        raise


def create_trusted_file(dir_fd: int, name: str, path: str | os.PathLike[str], what: str) -> os.stat_result | None:
    """Create ``name`` empty in the checked folder ``dir_fd`` (mode 0600, ``O_EXCL | O_NOFOLLOW``) and return its
    checked ``fstat``; None when an entry of that name already exists (check it with :func:`check_trusted_entry`)."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, FILE_MODE, dir_fd=dir_fd)
    except FileExistsError:
        return None
    try:
        return check_trusted(fd, path, what)
    finally:
        os.close(fd)


def check_trusted_entry(dir_fd: int, name: str, path: str | os.PathLike[str], what: str) -> os.stat_result | None:
    """Check the entry ``name`` of the checked folder ``dir_fd`` without opening it (``fstatat`` with
    ``AT_SYMLINK_NOFOLLOW``), as :func:`check_stat`; None when there is no such entry.

    This is how SQLite's files (the database, ``-wal``, ``-shm``) are checked. They are not opened: closing any
    descriptor of a file releases every POSIX lock this process holds on it, SQLite's included (SQLite's own
    documentation warns of it), so opening and closing one while a connection of this process has it open could
    let another process reset the ``-shm`` under that connection. Nothing is lost by not opening them: in a
    folder that is ours and not writable by others, nobody but us and root can add, remove or swap an entry, so
    the entry checked is the file SQLite then opens.
    """
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    check_stat(st, path, what)
    return st


def tighten(dir_fd: int, name: str, path: str | os.PathLike[str], *, advice: str = "") -> None:
    """Set mode 0600 on our regular file ``name`` in the checked folder ``dir_fd`` when group or others may read
    it (a warning says so, with ``advice`` if given). A missing file, a symlink or another user's file is left
    alone (the checks refuse those). Done by name, never by opening it (see :func:`check_trusted_entry`)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    own = not CHECKS_APPLY or st.st_uid == os.geteuid()
    if stat.S_ISREG(st.st_mode) and st.st_mode & _GROUP_OTHER_ANY and own:
        import logging  # on first use: start-up (`agentdiag show`) pays nothing for it

        logging.getLogger(__name__).warning(
            "otel-agentdiag: %s was readable by others; setting mode 0600%s", path, f"; {advice}" if advice else ""
        )
        # By name: the entry was just seen to be a regular file in a folder only we (and root) can change.
        os.chmod(name, FILE_MODE, dir_fd=dir_fd)


def descriptor_path(fd: int, fallback: str | os.PathLike[str]) -> str:
    """The current absolute path of the open folder ``fd``: what SQLite is given, so that it opens the folder that
    was checked even when ``fallback`` (the path the user gave) runs through symbolic links.

    Linux: ``/proc/self/fd/N``; macOS: ``F_GETPATH``; elsewhere ``realpath(fallback)``.

    The assumption that remains: SQLite opens files by path, so in the moment between this call and SQLite's
    ``open(2)`` a user who can write to a folder *above* the store could swap the store folder for theirs. The
    store checks after connecting that the path still names the checked folder and that the database, ``-wal``
    and ``-shm`` in it are the files it checked, which leaves only a swap and a swap back inside that moment:
    keep stores under folders no other user can write (your home, a project folder), as SSH asks of ``~/.ssh``.
    """
    if sys.platform.startswith("linux"):
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    if sys.platform == "darwin":
        import fcntl

        get_path = getattr(fcntl, "F_GETPATH", None)
        if get_path is not None:
            try:
                raw = fcntl.fcntl(fd, get_path, bytes(1024))
                return os.fsdecode(raw.split(b"\0", 1)[0])
            except OSError:
                pass
    return os.path.realpath(fallback)
