"""Trust before use: a store folder, database, ``-wal`` or ``-shm`` that is not ours, is writable by others, or is
a symbolic link is refused by writers and readers alike, and left exactly as it was.

Real files on disk. "Another user" is simulated by ``chown`` to an unused uid, which needs root: those cases
skip with a reason otherwise. The modes and symlinks need nothing special.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from otel_agentdiag._internal.trust import UntrustedPathError
from otel_agentdiag.storage import SpanStore, StoreError
from otel_agentdiag.storage.trusted import check_store_files

OTHER_UID = 12345
OTHER_GID = 23456
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="simulating another user's file needs chown, which needs root")
ME = os.geteuid() if hasattr(os, "geteuid") else 0

WHAT = {
    "folder": "store folder",
    "db": "store database",
    "-wal": "store WAL file",
    "-shm": "store shared-memory file",
}


def target(store: Path, part: str) -> Path:
    return {"folder": store.parent, "db": store}.get(part, Path(f"{store}{part}"))


def make_store(tmp_path: Path) -> Path:
    store = tmp_path / "home" / "store" / "traces.db"
    SpanStore(store).close()
    return store


def plant_companion(store: Path, part: str) -> None:
    """The -wal/-shm are gone after a clean close: plant one, as a crashed writer (or someone else) leaves it."""
    if part in ("-wal", "-shm"):
        path = target(store, part)
        path.touch()
        path.chmod(0o600)


def snapshot(folder: Path) -> dict[str, tuple[int, int, int, bytes | str]]:
    """Every entry under ``folder``: mode, owner, size and content (a link's target): to prove nothing changed."""
    found: dict[str, tuple[int, int, int, bytes | str]] = {}
    for entry in sorted([folder, *folder.rglob("*")]):
        st = entry.lstat()
        if stat.S_ISLNK(st.st_mode):
            content: bytes | str = os.readlink(entry)
        elif stat.S_ISREG(st.st_mode):
            content = entry.read_bytes()
        else:
            content = ""
        found[str(entry)] = (st.st_mode, st.st_uid, st.st_size, content)
    return found


# -- the hostile conditions ----------------------------------------------------------------------------------------
def foreign_owner(path: Path) -> str:
    os.chown(path, OTHER_UID, -1, follow_symlinks=False)
    return f"owned by uid {OTHER_UID}, not {ME} (you)"


def group_writable(path: Path) -> str:
    mode = 0o770 if path.is_dir() else 0o620
    path.chmod(mode)
    return f"writable by group or others (mode {mode:04o})"


def other_writable(path: Path) -> str:
    mode = 0o703 if path.is_dir() else 0o602
    path.chmod(mode)
    return f"writable by group or others (mode {mode:04o})"


def live_symlink(path: Path) -> str:
    """Replace ``path`` by a link to a private copy of ours elsewhere: still refused (the link is the problem)."""
    elsewhere = path.parent.parent / f"elsewhere-{path.name}"
    path.rename(elsewhere)
    path.symlink_to(elsewhere, target_is_directory=elsewhere.is_dir())
    return "is a symbolic link"


def dangling_symlink(path: Path) -> str:
    if path.is_dir():
        path.rename(path.parent / f"gone-{path.name}")
    else:
        path.unlink()
    path.symlink_to(path.parent / "nowhere-at-all")
    return "is a symbolic link"


CONDITIONS: dict[str, Callable[[Path], str]] = {
    "foreign owner": foreign_owner,
    "group-writable": group_writable,
    "other-writable": other_writable,
    "live symlink": live_symlink,
    "dangling symlink": dangling_symlink,
}
CASES = [
    pytest.param(part, condition, marks=[needs_root] if condition == "foreign owner" else [], id=f"{part}-{condition}")
    for part in WHAT
    for condition in CONDITIONS
]


@pytest.mark.parametrize(("part", "condition"), CASES)
@pytest.mark.parametrize("create", [True, False], ids=["writer", "reader"])
def test_an_untrusted_part_of_the_store_is_refused_and_left_alone(
    tmp_path: Path, part: str, condition: str, create: bool
) -> None:
    store = make_store(tmp_path)
    plant_companion(store, part)
    reason = CONDITIONS[condition](target(store, part))
    before = snapshot(tmp_path / "home")
    with pytest.raises(UntrustedPathError) as raised:
        SpanStore(store, create=create)
    error = raised.value
    assert error.what == WHAT[part]
    assert error.path == str(target(store, part))
    assert error.reason == reason
    assert str(error) == f"refusing {WHAT[part]} {target(store, part)}: {reason}"
    assert isinstance(error, ValueError)
    assert snapshot(tmp_path / "home") == before  # nothing created, tightened or written
    with pytest.raises(UntrustedPathError):
        check_store_files(store)  # what configure() and doctor look at, without opening anything


@pytest.mark.parametrize("mode", [0o775, 0o777, 0o757])
def test_a_store_folder_whose_parent_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    store = make_store(tmp_path)
    parent = store.parent.parent
    if IS_ROOT:
        os.chown(parent, -1, OTHER_GID)  # a real group (not the user's own private one)
    parent.chmod(mode)
    with pytest.raises(UntrustedPathError, match="is writable by group or others") as raised:
        SpanStore(store, create=False)
    assert raised.value.what == "store folder"
    assert raised.value.reason == f"the folder above it, {parent}, is writable by group or others (mode {mode:04o})"
    with pytest.raises(UntrustedPathError):
        SpanStore(store)


def test_a_sticky_parent_like_tmp_is_fine(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.parent.parent.chmod(0o1777)  # others cannot move what is ours out of a sticky folder
    with SpanStore(store) as opened:
        assert opened.span_count() == 0


@needs_root
def test_a_store_folder_created_by_another_user_in_advance_is_refused(tmp_path: Path) -> None:
    """The serious one: another user makes ./.agentdiag first (0777, or even 0700 but theirs)."""
    folder = tmp_path / "project" / ".agentdiag"
    folder.mkdir(parents=True)
    os.chown(folder, OTHER_UID, OTHER_GID)
    folder.chmod(0o700)
    with pytest.raises(UntrustedPathError, match=f"store folder {folder}: owned by uid {OTHER_UID}"):
        SpanStore(folder / "traces.db")
    assert list(folder.iterdir()) == []  # no database was made in their folder


@needs_root
def test_a_store_planted_with_forged_data_is_refused_by_a_reader(tmp_path: Path) -> None:
    """A reader trusts nothing it did not make: a planted (foreign-owned) store could feed forged traces."""
    store = make_store(tmp_path)
    os.chown(store, OTHER_UID, OTHER_GID)
    with pytest.raises(UntrustedPathError, match=r"store database .*: owned by uid 12345"):
        SpanStore(store, create=False)


def test_a_fresh_store_is_private_and_works(tmp_path: Path) -> None:
    store = tmp_path / "a" / "b" / "traces.db"
    with SpanStore(store) as opened:
        assert opened.span_count() == 0
        for suffix in ("", "-wal", "-shm"):
            path = Path(f"{store}{suffix}")
            if path.exists():
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, suffix
                assert path.stat().st_uid == ME
    for folder in (tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    with SpanStore(store, create=False) as again:
        assert again.span_count() == 0


def test_a_loose_store_of_ours_is_tightened_not_refused(tmp_path: Path) -> None:
    """Read bits are not a refusal: our own file that others can read is set to 0600, as before."""
    store = make_store(tmp_path)
    plant_companion(store, "-wal")
    for path in (store, Path(f"{store}-wal")):
        path.chmod(0o644)
    with SpanStore(store):
        for path in (store, Path(f"{store}-wal")):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_store_reached_through_a_symlinked_folder_above_is_opened_at_the_real_folder(tmp_path: Path) -> None:
    """A link higher up is not refused (the folder reached is ours and private), and SQLite is given the real path,
    so re-pointing that link later cannot redirect files SQLite opens."""
    real = tmp_path / "real"
    store = real / "store" / "traces.db"
    SpanStore(store).close()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    with SpanStore(link / "store" / "traces.db") as opened:
        (path,) = {row[2] for row in opened._conn.execute("PRAGMA database_list") if row[1] == "main"}
        assert path == str(store)


def test_a_missing_store_is_still_no_store_for_a_reader(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no trace store at"):
        SpanStore(tmp_path / "nothing" / "traces.db", create=False)
    assert not (tmp_path / "nothing").exists()
    check_store_files(tmp_path / "nothing" / "traces.db")  # nothing there: nothing to refuse


_PROBE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    conn.execute("BEGIN IMMEDIATE")
except sqlite3.OperationalError as exc:
    print(exc)
else:
    print("got the write lock")
"""


def _probe_write_lock(store: Path) -> str:
    """Ask another process (POSIX locks are per process) whether it can take the write lock now."""
    done = subprocess.run([sys.executable, "-c", _PROBE, str(store)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_store_in_use_by_another_connection_is_checked_without_disturbing_it(tmp_path: Path) -> None:
    """The checks never open (and close) the database or its -wal/-shm: closing a descriptor drops every POSIX
    lock this process holds on the file, SQLite's included. A connection keeps its write lock while stores are
    opened and closed beside it in the same process."""
    store = make_store(tmp_path)
    writer = sqlite3.connect(store, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert _probe_write_lock(store) == "database is locked"
        for _ in range(3):
            with SpanStore(store, create=False) as reader:
                assert reader.span_count() == 0
            SpanStore(store).close()
            check_store_files(store)
        assert _probe_write_lock(store) == "database is locked"  # still held: nothing dropped it
    finally:
        writer.execute("ROLLBACK")
        writer.close()
