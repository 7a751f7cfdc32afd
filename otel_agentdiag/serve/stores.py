"""Read access to the store for the server's request threads: one read-only connection per thread."""

from __future__ import annotations

import threading
from pathlib import Path

from otel_agentdiag.diagnostics.projection import load_store_hasher
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.storage.reading import ReadOnlyStore


class StoreAccess:
    """The store a server reads: a :class:`ReadOnlyStore` per request thread (opened on first use, kept; a
    read-only connection sees each new write transaction), for every read a request makes, a session's receipt
    included; and the store's hash key for strict projections."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._opened: list[ReadOnlyStore] = []
        self._guard = threading.Lock()
        self._hasher: IdHasher | None = None
        self._hasher_loaded = False

    def reader(self) -> ReadOnlyStore:
        """This thread's read-only store (raises the store's own errors when it cannot be opened)."""
        store: ReadOnlyStore | None = getattr(self._local, "store", None)
        if store is None:
            store = ReadOnlyStore(self.path)
            self._local.store = store
            with self._guard:
                self._opened.append(store)
        return store

    def hasher(self) -> IdHasher | None:
        """The store's hash key (``AGENTDIAG_HASH_KEY`` or ``hash.key`` beside it), loaded once; None without."""
        with self._guard:
            if not self._hasher_loaded:
                self._hasher = load_store_hasher(self.path)
                self._hasher_loaded = True
            return self._hasher

    def close(self) -> None:
        with self._guard:
            opened, self._opened = self._opened, []
        for store in opened:
            store.close()
