"""Provenance in the store: imported spans are filed apart from observed ones by construction (session keys,
observers), and observed data always wins a clash of span ids. Real SQLite files; the ledger checked from the
raw tables after every write."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import check_ledger, query, row

from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import Accounting, RetentionLimits, SpanStore, StoreError

OBSERVED = "0123456789abcdef"
IMPORTED = "fedcba9876543210"
SESSION = "hmac-sha256:00000000:" + "ab" * 32


def test_an_imported_write_is_filed_under_imported_session_keys_and_observers(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(i, session=SESSION, observer=OBSERVED) for i in range(3)])
        rejected = {SESSION: {"redactor_error": 1}, None: {"redactor_error": 2}}
        imported = [row(10 + i, session=SESSION, observer=IMPORTED, sequence=i) for i in range(2)]
        imported.append(row(20, session=None, observer=IMPORTED, sequence=0))
        result = store.write_batch(imported, Accounting(observer=IMPORTED, rejected=rejected), imported=True)
        assert result.inserted == 3
        assert [s.span_id for s in store.session_spans(SESSION)] == [f"{i:016x}" for i in range(3)]
        copies = store.session_spans(f"imported:{SESSION}")
        assert [s.span_id for s in copies] == [f"{10 + i:016x}" for i in range(2)] and all(s.imported for s in copies)
        assert [s.span_id for s in store.session_spans("imported:")] == [f"{20:016x}"]
        assert store.session_spans(None) == []  # imported spans outside a session are not the observed bucket
        ledger = {(r.observer, r.session): r for r in store.session_stats()}
        assert set(ledger) == {(OBSERVED, SESSION), (IMPORTED, f"imported:{SESSION}"), (IMPORTED, "imported:")}
        assert ledger[(IMPORTED, f"imported:{SESSION}")].rejected == {"redactor_error": 1}
        assert ledger[(IMPORTED, "imported:")].rejected == {"redactor_error": 2}
        assert {o.observer: o.imported for o in store.observers()} == {OBSERVED: False, IMPORTED: True}
        assert session_receipt(store, SESSION).status == "valid"
    check_ledger(path)


def test_an_imported_write_naming_an_observed_observer_is_refused_whole(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(0, session=SESSION, observer=OBSERVED)])
        before = query(path, "SELECT * FROM spans"), query(path, "SELECT * FROM session_stats")
        for batch, accounting in [
            ([row(5, session=SESSION, observer=OBSERVED)], None),
            ([row(5, session=SESSION, observer=IMPORTED)], Accounting(observer=OBSERVED)),
        ]:
            with pytest.raises(StoreError, match="recorded as observed"):
                store.write_batch(batch, accounting, imported=True)
        assert (query(path, "SELECT * FROM spans"), query(path, "SELECT * FROM session_stats")) == before
        with pytest.raises(ValueError):
            store.write_batch([row(6)], content=[None], imported=True)  # an import carries no captured content


def test_an_imported_span_never_replaces_an_observed_one(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(0, session=SESSION, observer=OBSERVED, name="the real one")])
        forged = row(0, session=SESSION, observer=IMPORTED, name="forged")  # the same trace and span id
        result = store.write_batch([forged], Accounting(observer=IMPORTED), imported=True)
        assert (result.inserted, result.duplicates) == (0, 1)
        (kept,) = store.get_trace("a" * 32)
        assert (kept.name, kept.session, kept.imported) == ("the real one", SESSION, False)
        assert session_receipt(store, SESSION).status == "valid"
    check_ledger(path)


def test_an_observed_span_displaces_an_imported_one_that_took_its_ids_first(tmp_path: Path) -> None:
    """A forged span pre-empting the ids of a span still open (its ids leak through its children's parent ids):
    when the real span ends, it is stored, and the forged one goes (counted as pruned in its imported session)."""
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(i, session=SESSION, observer=OBSERVED) for i in range(1, 3)])
        forged = row(0, session=SESSION, observer=IMPORTED, name="forged", sequence=0)
        assert store.write_batch([forged], Accounting(observer=IMPORTED), imported=True).inserted == 1
        real = row(0, session=SESSION, observer=OBSERVED, name="the run")
        result = store.write_batch([real, row(1, session=SESSION, observer=OBSERVED)])  # and a real duplicate
        assert (result.inserted, result.duplicates) == (1, 1)
        spans = {s.span_id: s for s in store.session_spans(SESSION)}
        assert spans[f"{0:016x}"].name == "the run" and len(spans) == 3
        assert store.session_spans(f"imported:{SESSION}") == []
        summary = store.session_summary(f"imported:{SESSION}")
        assert summary is not None and summary.pruned_spans == 1
        observed = session_receipt(store, SESSION)
        assert (observed.status, observed.counts["duplicate_sequences"]) == ("degraded", 1)  # row 1, sent twice
        assert session_receipt(store, f"imported:{SESSION}").counts["pruned_spans"] == 1
    check_ledger(path)


def test_retention_of_an_imported_session_never_prunes_the_observed_one(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    limits = RetentionLimits(max_session_spans=5)
    with SpanStore(path, retention=limits) as store:
        store.write_batch([row(i, session=SESSION, observer=OBSERVED) for i in range(4)])
        # Newer than every observed span: a per-session limit over both would prune the observed ones first.
        flood = [row(100 + i, session=SESSION, observer=IMPORTED, sequence=i, start=1000 + i) for i in range(50)]
        result = store.write_batch(flood, Accounting(observer=IMPORTED), imported=True)
        assert result.pruned == 45  # only its own session's rows
        assert len(store.session_spans(SESSION)) == 4
        assert len(store.session_spans(f"imported:{SESSION}")) == 5
        assert session_receipt(store, SESSION).status == "valid"
    check_ledger(path)


def test_status_shows_the_newest_observed_session_before_any_imported_one(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(0, session="hmac-sha256:00000000:" + "cd" * 32, observer=OBSERVED)])
        newer = [row(1, session=SESSION, observer=IMPORTED, start=10**12)]  # from the future
        store.write_batch(newer, Accounting(observer=IMPORTED), imported=True)
        assert store.latest_session() == "hmac-sha256:00000000:" + "cd" * 32
        assert store.list_sessions()[0].session == f"imported:{SESSION}"  # the list itself is by activity
    with SpanStore(tmp_path / "only-imported.db") as store:
        store.write_batch(newer, Accounting(observer=IMPORTED), imported=True)
        assert store.latest_session() == f"imported:{SESSION}"
