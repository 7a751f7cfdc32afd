"""Files that may hold traces: created mode 0600 and replaced atomically."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

FILE_MODE = 0o600
DIR_MODE = 0o700


def make_private_folders(folder: str | os.PathLike[str]) -> None:
    """Create ``folder`` and every missing parent with mode 0700 (an existing folder is left as it is).

    Not ``mkdir(parents=True)``: that creates the parents with the umask's default mode (0777 under umask 000),
    so a folder above the store could be world-writable and the store folder itself replaced by anyone.
    """
    folder = Path(folder)
    missing: list[Path] = []
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if not path.is_dir():
                raise


def write_private_file(path: str | os.PathLike[str], write: Callable[[IO[str]], object]) -> int:
    """Write a file that may hold traces: mode 0600, atomically (a temporary file beside it, fsync, rename,
    then a best-effort fsync of the folder).

    ``write`` gets the open text stream (UTF-8, ``\\n`` line ends). A reader sees the old file or the complete
    new one, never a part; on any error the temporary file is removed and ``path`` is left as it was. Returns
    the file's size in bytes.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    import tempfile  # here: only writers of files need it, not every process that loads the store

    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes it 0600 already; say so rather than rely on it
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
            size = os.fstat(stream.fileno()).st_size
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass  # never created, or already renamed: nothing to clean up
        raise
    _fsync_folder(folder)
    return size


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable where the platform allows it (best effort: a folder may not open for reading)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory; the rename itself already happened
    finally:
        os.close(fd)
