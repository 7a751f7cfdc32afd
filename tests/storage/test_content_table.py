"""The ``span_content`` table: written with its span in one transaction, counted in the span's size, and
deleted with its span by whatever deletes the span (clear, retention)."""

from __future__ import annotations

from pathlib import Path

from storage_helpers import query, row

from otel_agentdiag.storage import ContentRow, RetentionLimits, SpanStore


def item(role: str, payload: bytes, projection: str = '"x"') -> ContentRow:
    return ContentRow(role=role, encoding="agentdiag-content/1", lossless=payload, projection=projection)


def content_rows(path: Path) -> list[tuple[str, str, bytes]]:
    return [
        (span_id, role, bytes(data))
        for span_id, role, data in query(path, "SELECT span_id, role, lossless FROM span_content ORDER BY id")
    ]


def test_content_is_written_with_its_span_and_read_back_by_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SpanStore(path) as store:
        store.write_batch(
            [row(1), row(2), row(3)],
            content=[[item("gen_ai.input.messages", b"in"), item("gen_ai.output.messages", b"out")], None, []],
        )
        found = store.trace_content("a" * 32)
        assert [(c.span_id, c.role, c.lossless) for c in found] == [
            (row(1).span_id, "gen_ai.input.messages", b"in"),
            (row(1).span_id, "gen_ai.output.messages", b"out"),
        ]
        assert store.trace_content("b" * 32) == []
        assert store.content_summary() == (2, sum(c.size for c in found))


def test_content_bytes_count_in_the_span_size_and_the_session_totals(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    payload = item("gen_ai.input.messages", b"x" * 1000, '"' + "y" * 500 + '"')
    with SpanStore(path) as store:
        store.write_batch([row(1), row(2)], content=[[payload], None])
    (with_content,), (without,) = (
        query(path, "SELECT size FROM spans WHERE span_id = ?", (row(i).span_id,))[0:1] for i in (1, 2)
    )
    assert with_content[0] - without[0] == payload.size == 1000 + 502
    ((session_bytes,),) = query(path, "SELECT bytes FROM sessions WHERE session = 'sess-a'")
    assert session_bytes == with_content[0] + without[0]


def test_a_duplicate_span_keeps_the_content_it_has(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SpanStore(path) as store:
        store.write_batch([row(1)], content=[[item("gen_ai.input.messages", b"first")]])
        result = store.write_batch([row(1)], content=[[item("gen_ai.input.messages", b"second")]])
    assert result.duplicates == 1
    assert content_rows(path) == [(row(1).span_id, "gen_ai.input.messages", b"first")]


def test_a_span_of_a_cleared_session_brings_no_content(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SpanStore(path) as store:
        store.write_batch([row(1)], content=[[item("gen_ai.input.messages", b"kept until clear")]])
        assert store.clear_session("sess-a") == 1
        assert content_rows(path) == []
        # A span of the session that started before the clear and arrives late is refused, content and all.
        store.write_batch([row(2)], content=[[item("gen_ai.input.messages", b"late")]])
    assert content_rows(path) == []


def test_retention_deletes_content_with_its_span(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    limits = RetentionLimits(max_session_spans=2)
    with SpanStore(path, retention=limits) as store:
        for i in range(1, 5):
            store.write_batch([row(i)], content=[[item("gen_ai.tool.call.result", f"r{i}".encode())]])
    kept = {span_id for (span_id,) in query(path, "SELECT span_id FROM spans")}
    assert kept == {row(3).span_id, row(4).span_id}
    assert {span_id for span_id, _role, _data in content_rows(path)} == kept


def test_content_must_be_parallel_to_rows(tmp_path: Path) -> None:
    import pytest

    with SpanStore(tmp_path / "t.db") as store, pytest.raises(ValueError, match="parallel"):
        store.write_batch([row(1), row(2)], content=[None])
