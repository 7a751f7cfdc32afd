"""Where an e2e run's telemetry can be read, and a search of all of it for values that must not be there.

One search for the framework and peer tests (``test_peer_conventions``, ``test_smolagents``, ``test_litellm``,
``test_pydantic_ai_pipeline``): every file of the store's folder (the database, its ``-wal`` and ``-shm``, the key;
compared case-insensitively, as bytes), the store's SQL dump, the strict OTLP request bodies as sent, and the
attributes the receiver decoded.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from otlp_receiver import ReceivedSpan


@dataclass(frozen=True)
class Surfaces:
    files: dict[str, bytes]
    """Each file of the store's folder, lowercased."""
    dump: str
    """The store's SQL dump (``iterdump``)."""
    wire: bytes
    """The OTLP request bodies, as the receiver got them."""
    received: str
    """The received spans' attributes, as JSON."""

    @classmethod
    def of(cls, store: Path, raw_bodies: Iterable[bytes], received: Iterable[ReceivedSpan]) -> Surfaces:
        files = {path.name: path.read_bytes().lower() for path in store.parent.iterdir()}
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            dump = "\n".join(conn.iterdump())
        finally:
            conn.close()
        text = json.dumps([r.attributes for r in received], default=str)
        return cls(files, dump, b"\n".join(raw_bodies), text)

    def leaks(self, needles: Iterable[str]) -> list[tuple[str, str]]:
        """(where, needle) for each needle found anywhere: empty when nothing leaked."""
        found: list[tuple[str, str]] = []
        for needle in needles:
            found += [(name, needle) for name, blob in self.files.items() if needle.lower().encode() in blob]
            if needle in self.dump:
                found.append(("dump", needle))
            if needle.encode() in self.wire:
                found.append(("wire", needle))
            if needle in self.received:
                found.append(("received", needle))
        return found
