"""Reads from the summary tables through their indexes: sessions, traces, runs and conversations, session keys.

Each read here costs what its page costs (an index walk from the newest entry, a key lookup), not what the
store holds; the figures are kept current by the writer (see :mod:`otel_agentdiag.storage.summaries`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from otel_agentdiag._internal.money import NANOS_CAP
from otel_agentdiag.storage.codec import given_conditions
from otel_agentdiag.storage.connection import StoreConnection
from otel_agentdiag.storage.provenance import IMPORTED_PREFIX
from otel_agentdiag.storage.receipt_reads import ReceiptRecords, read_records
from otel_agentdiag.storage.rows import (
    ALL_SESSIONS,
    OVERFLOW_SESSION,
    ConversationSummary,
    RunSummary,
    SessionSummary,
    TraceSummary,
)

_SESSION_COLUMNS = (
    "session, span_count, bytes, first_start_ns, last_activity_ns, cleared_at_ns, generation, pruned_spans,"
    " cleared_spans"
)
_RUN_COLUMNS = (
    "trace_id, session, start_ns, end_ns, name, status, span_count, error_count, iterations, llm_calls, tool_calls,"
    " input_tokens, output_tokens, service, agent, stop_reason, cost_usd, budget_exceeded"
)
_ROOT_ROW = "SELECT name, status, end_ns FROM spans WHERE trace_id = ? AND span_id = ?"
"""A trace's root as its row holds it (read through the key)."""
_PER_SESSION_TRACE_IDS = 1000
"""Up to this many sessions, their trace ids are read per session; above, in one pass over ``session_traces``."""
_HEAD_STEPS = 64
"""How many distinct digest heads (``hmac-sha256:<key id>:``) a tail lookup walks before it reads every key."""


def _summary(row: Any, traces: Iterable[str]) -> SessionSummary:
    session, count, size, first, last, cleared, generation, pruned, cleared_spans = row
    has_rows = first is not None
    return SessionSummary(
        session=session or None,
        span_count=int(count or 0) if has_rows else 0,
        bytes=int(size or 0) if has_rows else 0,
        first_start_ns=first,
        last_activity_ns=last if has_rows else None,
        trace_ids=tuple(sorted(traces)) if has_rows else (),
        cleared_at_ns=cleared,
        generation=int(generation or 0),
        pruned_spans=int(pruned or 0),
        cleared_spans=int(cleared_spans or 0),
    )


def _storable(text: str) -> bool:
    """Whether ``text`` can be a stored key (SQLite holds UTF-8: a lone surrogate, as in a command-line argument
    that was not UTF-8, is in no key and cannot be a query parameter)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _after(prefix: str) -> str:
    """The smallest string above every string that starts with ``prefix`` (non-empty), in SQLite's order."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class SummaryReader(StoreConnection):
    """Index-backed reads over the summary tables (part of ``SpanStore``'s read side)."""

    # -- sessions -----------------------------------------------------------------------------------------
    def list_sessions(self, *, limit: int | None = None, since_ns: int | None = None) -> list[SessionSummary]:
        """Sessions with rows or a ``sessions`` row (e.g. cleared), newest activity first (ties: the digest).

        Spans outside any session appear as ``session=None``, only when there are some. Sessions without rows
        (cleared or pruned empty) come last. ``limit``: at most that many; ``since_ns``: only sessions with
        activity (the latest end or start of a span) at or after it (so none without rows). Read through the
        activity index of the running figures the writer keeps: the cost follows the sessions listed.
        """
        where, args = given_conditions(("last_activity_ns >= ?", None if since_ns is None else int(since_ns)))
        where.append("NOT (session = '' AND first_start_ns IS NULL)")
        with self._lock:
            conn = self._conn
            rows = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions INDEXED BY sessions_activity WHERE {' AND '.join(where)}"
                " ORDER BY last_activity_ns DESC, session LIMIT ?",
                (*args, -1 if limit is None else max(int(limit), 0)),
            ).fetchall()
            if len(rows) <= _PER_SESSION_TRACE_IDS:
                traces = {row[0]: self._trace_ids(row[0]) for row in rows if row[3] is not None}
            else:
                traces = {}
                for session, trace_id in conn.execute("SELECT session, trace_id FROM session_traces"):
                    found = traces.get(session)
                    if found is None:
                        traces[session] = [trace_id]
                    else:
                        found.append(trace_id)
        return [_summary(row, traces.get(row[0], ())) for row in rows]

    def _trace_ids(self, key: str) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT trace_id FROM session_traces WHERE session = ?", (key,))]

    def session_summary(self, session: str | None) -> SessionSummary | None:
        """The entry :meth:`list_sessions` has for ``session`` (None: spans outside any session), or None when it
        has none; read by its key."""
        key = session or ""
        with self._lock:
            row = self._conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session = ?", (key,)).fetchone()
            if row is None or (not key and row[3] is None):
                return None
            return _summary(row, self._trace_ids(key) if row[3] is not None else ())

    def latest_session(self) -> str | None:
        """The first named session :meth:`list_sessions` lists (newest activity; ties: the smallest digest),
        observed sessions first: an imported session (``imported:...``) only when no observed session has rows;
        None when it lists none. What ``agentdiag status`` shows by default. Read through the activity index."""
        with self._lock:
            conn = self._conn
            cursor = conn.execute(
                "SELECT session FROM sessions INDEXED BY sessions_activity"
                " WHERE first_start_ns IS NOT NULL AND session <> '' ORDER BY last_activity_ns DESC, session"
            )
            imported: str | None = None
            try:
                for (session,) in cursor:
                    if not str(session).startswith(IMPORTED_PREFIX):
                        return str(session)
                    if imported is None:
                        imported = str(session)
            finally:
                cursor.close()
            if imported is not None:
                return imported
            # No named session has rows: those left are cleared or pruned empty, listed by digest.
            (session,) = conn.execute("SELECT MIN(session) FROM sessions WHERE session <> ''").fetchone()
        return None if session is None else str(session)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside the block see one state of the store (one read transaction; a writer that commits
        meanwhile is not seen). Holds the store's lock; inside a transaction of ours, the block is in it."""
        with self._lock:
            conn = self._conn
            if conn.in_transaction:
                yield
                return
            conn.execute("BEGIN")
            try:
                yield
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def pruned_spans_total(self) -> int:
        """Rows retention deleted from the whole store, cumulative (``store_stats``)."""
        with self._lock:
            found = self._conn.execute("SELECT pruned_spans FROM store_stats WHERE id = 1").fetchone()
        return int(found[0]) if found is not None else 0

    def receipt_records(self, sessions: Sequence[str | None] | None = None) -> ReceiptRecords:
        """What the receipts of ``sessions`` (None: every session) are judged from, in one snapshot: the
        figures of their rows (one GROUP BY over an index), their missing parents, ledger rows, bookkeeping and
        violations (see :mod:`otel_agentdiag.storage.receipt_reads`)."""
        with self.snapshot():
            return read_records(self._conn, ALL_SESSIONS if sessions is None else sessions)

    # -- session keys -------------------------------------------------------------------------------------
    _KEY_SOURCES = (
        ("sessions", "session"),
        ("session_stats", "session"),
        ("violations", "session"),
    )

    def is_session_key(self, key: str, *, sources: int = 3) -> bool:
        """Whether ``key`` names a session the store knows: a ``sessions`` row (rows, cleared or pruned), then
        (``sources`` > 1) a ledger row, then (> 2) a recorded violation. Key lookups. The ledger's overflow
        bucket (:data:`OVERFLOW_SESSION`) is not a session."""
        if not key or key == OVERFLOW_SESSION or not _storable(key):
            return False
        with self._lock:
            for table, column in self._KEY_SOURCES[:sources]:
                if self._conn.execute(f"SELECT 1 FROM {table} WHERE {column} = ? LIMIT 1", (key,)).fetchone():
                    return True
        return False

    def session_keys(self, prefix: str, *, tail: bool = False, limit: int = 100, sources: int = 3) -> set[str]:
        """Up to ``limit`` known session keys per source (``sessions``, then the ledger, then violations, as
        :meth:`is_session_key`) that start with ``prefix``; ``tail=True``: whose part after the last ``:`` does
        (for a key without ``:``, the whole key) instead. Range reads of the sources' indexes; a tail lookup walks
        the few distinct key heads (``hmac-sha256:<key id>:``, ``imported:...``)."""
        found: set[str] = set()
        if not prefix or not _storable(prefix):
            return found
        with self._lock:
            for table, column in self._KEY_SOURCES[:sources]:
                if tail:
                    found |= self._tail_matches(table, column, prefix, limit)
                else:
                    found |= self._range(table, column, prefix, limit)
        found.discard(OVERFLOW_SESSION)
        return found

    def _range(self, table: str, column: str, prefix: str, limit: int) -> set[str]:
        rows = self._conn.execute(
            f"SELECT DISTINCT {column} FROM {table} WHERE {column} >= ? AND {column} < ? ORDER BY {column} LIMIT ?",
            (prefix, _after(prefix), limit),
        )
        return {str(r[0]) for r in rows if isinstance(r[0], str) and r[0].startswith(prefix)}

    def _tail_matches(self, table: str, column: str, prefix: str, limit: int) -> set[str]:
        conn = self._conn
        found = {k for k in self._range(table, column, prefix, limit) if ":" not in k}
        cursor = ""
        for _step in range(_HEAD_STEPS):
            row = conn.execute(
                f"SELECT {column} FROM {table} WHERE {column} > ? ORDER BY {column} LIMIT 1", (cursor,)
            ).fetchone()
            if row is None:
                return found
            key = str(row[0])
            if ":" not in key:
                cursor = key  # a key without a head: its tail is itself, matched by the plain prefix read
                continue
            head = key.rsplit(":", 1)[0] + ":"
            found |= {k for k in self._range(table, column, head + prefix, limit) if ":" not in k[len(head) :]}
            cursor = _after(head)
        # Many heads (keys that are not digests): read them all.
        for (key,) in conn.execute(f"SELECT DISTINCT {column} FROM {table}"):
            if isinstance(key, str) and key.rsplit(":", 1)[-1].startswith(prefix):
                found.add(key)
        return found

    # -- traces and runs ----------------------------------------------------------------------------------
    def list_traces(self, *, limit: int | None = None) -> list[TraceSummary]:
        """Traces, newest first (by the start of their earliest span; ties by trace id), read from the trace
        summaries through their start index, each root read back from its row by its key: the cost follows the
        traces listed."""
        out: list[TraceSummary] = []
        with self._lock:
            conn = self._conn
            rows = conn.execute(
                "SELECT trace_id, root_span_id, name, start_ns, end_ns, status, span_count, error_count, session,"
                " cost_usd, budget_exceeded FROM trace_summaries INDEXED BY trace_summaries_start"
                " ORDER BY start_ns DESC, trace_id LIMIT ?",
                (-1 if limit is None else int(limit),),
            ).fetchall()
            for trace_id, root_id, name, start, end, status, count, errors, session, cost, budget in rows:
                root = conn.execute(_ROOT_ROW, (trace_id, root_id)).fetchone()
                if root is not None:
                    name, status, end = root
                out.append(
                    TraceSummary(
                        trace_id=str(trace_id),
                        name=str(name),
                        start_ns=int(start),
                        end_ns=end,
                        status=str(status),
                        span_count=int(count),
                        error_count=int(errors),
                        session=session,
                        cost_usd=_cost(cost),
                        budget_exceeded=bool(budget),
                    )
                )
        return out

    def list_runs(
        self,
        *,
        limit: int = 50,
        before: tuple[int, str] | None = None,
        agent: str | None = None,
        service: str | None = None,
        status: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        has_errors: bool = False,
        session: str | None = None,
    ) -> list[RunSummary]:
        """Runs (traces whose root is an agent span), newest first (by earliest start; ties by trace id).

        ``before``: the keyset cursor of the last run of the previous page (:attr:`RunSummary.cursor`), for the
        runs after it; ``agent``, ``service``, ``status`` (``"ok"``/``"error"``, the root's status), ``session``
        (a conversation's runs): equal to; ``has_errors``: runs with at least one failed span (the root or any
        other: a run whose tool failed and that went on); ``since_ns``/``until_ns``: runs that started at or
        after / before. Read through a start index of the run summaries (per filter): the cost follows the page,
        not the store (``has_errors`` checks each run's error count on the way: its cost follows how rare runs
        with errors are).
        """
        where, args = given_conditions(
            ("agent = ?", agent),
            ("service = ?", service),
            ("session = ?", session),
            ("start_ns >= ?", None if since_ns is None else int(since_ns)),
            ("start_ns < ?", None if until_ns is None else int(until_ns)),
        )
        where.append("kind = 'run'")
        if has_errors:
            where.append("error_count > 0")
        # The start index of the first filter given of agent, service and session; else that of every run.
        filters = ((agent, "agent"), (service, "service"), (session, "session"))
        index = f"trace_summaries_{next((name for value, name in filters if value is not None), 'runs')}"
        if before is not None:
            start, trace_id = before
            where.append("(start_ns < ? OR (start_ns = ? AND trace_id > ?))")
            args += [int(start), int(start), str(trace_id)]
        size = max(int(limit), 0)
        with self._lock:
            conn = self._conn
            if status is None and index in ("trace_summaries_runs", "trace_summaries_session"):
                statuses: list[str | None] = [None]
            elif status is not None:
                statuses = [status]
                index = "trace_summaries_status" if index == "trace_summaries_runs" else index
            else:
                statuses = list(self._run_statuses())
            pages = []
            for value in statuses:
                extra, extra_args = ([], []) if value is None else (["status = ?"], [value])
                pages.append(
                    conn.execute(
                        f"SELECT {_RUN_COLUMNS} FROM trace_summaries INDEXED BY {index}"
                        f" WHERE {' AND '.join(where + extra)} ORDER BY start_ns DESC, trace_id LIMIT ?",
                        (*args, *extra_args, size),
                    ).fetchall()
                )
        rows = pages[0] if len(pages) == 1 else list(heapq.merge(*pages, key=lambda r: (-r[2], r[0])))[:size]
        return [_run(row) for row in rows]

    def _run_statuses(self) -> list[str]:
        """The distinct statuses of runs, read by skipping through the status index (one step per status)."""
        found: list[str] = []
        row = self._conn.execute(
            "SELECT MIN(status) FROM trace_summaries INDEXED BY trace_summaries_status WHERE kind = 'run'"
        ).fetchone()
        while row is not None and row[0] is not None:
            found.append(str(row[0]))
            row = self._conn.execute(
                "SELECT MIN(status) FROM trace_summaries INDEXED BY trace_summaries_status"
                " WHERE kind = 'run' AND status > ?",
                (row[0],),
            ).fetchone()
        return found

    def list_conversations(
        self, *, limit: int = 50, before: tuple[int, str] | None = None, since_ns: int | None = None
    ) -> list[ConversationSummary]:
        """Conversations (named sessions with rows: a session is one conversation digest), newest activity
        first (ties by digest), with totals over their traces (a trace belongs to the largest session key among
        its spans, as :meth:`list_traces` shows it). ``before``: the keyset cursor
        (:attr:`ConversationSummary.cursor`) of the previous page's last entry; ``since_ns``: activity at or
        after. The cost follows the page (an index walk, then each conversation's own traces)."""
        where, args = given_conditions(("last_activity_ns >= ?", None if since_ns is None else int(since_ns)))
        where += ["first_start_ns IS NOT NULL", "session <> ''"]
        if before is not None:
            last, session = before
            where.append("(last_activity_ns < ? OR (last_activity_ns = ? AND session > ?))")
            args += [int(last), int(last), str(session)]
        with self._lock:
            conn = self._conn
            rows = conn.execute(
                "SELECT session, span_count, bytes, first_start_ns, last_activity_ns FROM sessions"
                f" INDEXED BY sessions_activity WHERE {' AND '.join(where)}"
                " ORDER BY last_activity_ns DESC, session LIMIT ?",
                (*args, max(int(limit), 0)),
            ).fetchall()
            out = []
            for session, count, size, first, last in rows:
                totals = conn.execute(
                    "SELECT COUNT(*), coalesce(SUM(kind = 'run'), 0), coalesce(SUM(error_count), 0),"
                    " coalesce(SUM(status = 'error' AND kind = 'run'), 0), coalesce(SUM(llm_calls), 0),"
                    " coalesce(SUM(tool_calls), 0), coalesce(SUM(input_tokens), 0), coalesce(SUM(output_tokens), 0),"
                    " coalesce(SUM(budget_exceeded), 0),"
                    # TOTAL: never an integer overflow; exact below the cap (whole nano-dollars in a double).
                    f" CASE WHEN COUNT(cost_nanos) > 0 THEN min(TOTAL(cost_nanos), {NANOS_CAP}) / 1e9 END"
                    " FROM trace_summaries WHERE session = ?",
                    (session,),
                ).fetchone()
                traces, runs, errors, failed, llm, tools, tokens_in, tokens_out, over = (int(v) for v in totals[:9])
                out.append(
                    ConversationSummary(
                        session=str(session),
                        first_start_ns=int(first),
                        last_activity_ns=int(last),
                        span_count=int(count),
                        bytes=int(size),
                        trace_count=traces,
                        run_count=runs,
                        error_count=errors,
                        failed_runs=failed,
                        llm_calls=llm,
                        tool_calls=tools,
                        input_tokens=tokens_in,
                        output_tokens=tokens_out,
                        cost_usd=_cost(totals[9]),
                        budget_exceeded_runs=over,
                    )
                )
        return out


def _run(row: Any) -> RunSummary:
    """A run from a row of the run query: the columns in :class:`RunSummary`'s field order."""
    (trace_id, session, start, end, name, status, count, errors, iterations, llm, tools, tokens_in, tokens_out,
     service, agent, stop, cost, budget) = row  # fmt: skip
    return RunSummary(
        str(trace_id), session, int(start), end, str(name), str(status), int(count), int(errors), int(iterations),
        int(llm), int(tools), int(tokens_in), int(tokens_out), service, agent, stop, _cost(cost), bool(budget),
    )  # fmt: skip


def _cost(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None
