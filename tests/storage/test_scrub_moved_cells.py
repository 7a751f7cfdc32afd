"""Clearing leaves no byte of a cleared session even where ``secure_delete`` alone does not: sessions written in
interleaved batches (so b-tree balancing moves their cells between pages, leaving old copies in the unused part
of live pages), values spilling to overflow pages, sentinels in attributes, events, names and index keys.

With the rewrite left out of ``scrub`` (only ``secure_delete`` and the checkpoint), both seeds here leave bytes of
cleared spans in the database on SQLite 3.40.1 (see ``storage/scrub.py``)."""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import T0, files_holding

from otel_agentdiag.storage import RetentionLimits, SpanRow, SpanStore

OFF = RetentionLimits(
    max_session_spans=None, max_session_bytes=None, max_session_age_s=None, max_store_bytes=None, max_span_bytes=10**7
)


def word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(20))


def span(rng: random.Random, session: str, sentinel: str, i: int) -> SpanRow:
    attributes: dict[str, Any] = {"k": sentinel + "A", "gen_ai.prompt": (sentinel + "B") * rng.choice([1] * 9 + [300])}
    return SpanRow(
        trace_id=f"{rng.getrandbits(128):032x}",
        span_id=f"{rng.getrandbits(64):016x}",
        parent_span_id=None,
        name=f"n-{sentinel}N",
        kind="llm",
        span_kind="internal",
        start_ns=T0 + rng.randrange(10**9),
        end_ns=None,
        status="ok",
        session=session,
        attributes=attributes,
        events=[{"name": "e", "attributes": {"x": sentinel + "E"}}],
        links=[],
        resource={"service.name": "svc"},
        scope=None,
        observer="0123456789abcdef",
        sequence=i,
    )


@pytest.mark.parametrize("seed", [2, 3])
def test_clear_many_interleaved_sessions_then_scrub_leaves_no_byte(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "traces.db"
    words = {f"sess-{s}": word(rng) for s in range(60)}
    sessions = list(words)
    needles: dict[str, bytes] = {}
    with SpanStore(path, retention=OFF) as store:
        for b in range(240):
            batch = [span(rng, s, words[s], b * 10 + j) for j, s in enumerate(rng.choice(sessions) for _ in range(10))]
            store.write_batch(batch)
            for row in batch:
                needles[f"{row.session}:trace:{row.trace_id}"] = row.trace_id.encode()
                needles[f"{row.session}:span:{row.span_id}"] = row.span_id.encode()
        victims = set(rng.sample(sessions, 30))
        for victim in sorted(victims):
            store.clear_session(victim, scrub=False)
        kept = [s for s in sessions if s not in victims]
        for b in range(20):
            store.write_batch([span(rng, rng.choice(kept), "", 10_000 + b * 10 + j) for j in range(10)])
        assert store.scrub().complete
    sought = {k: v for k, v in needles.items() if k.split(":")[0] in victims}
    for victim in victims:
        for suffix in "ABEN":
            sought[f"{victim}:{suffix}"] = (words[victim] + suffix).encode()
    assert files_holding(path, sought) == {}
    # The search sees what is there: the kept sessions' sentinels are found.
    assert files_holding(path, {s: (words[s] + "A").encode() for s in kept}).keys() == set(kept)
