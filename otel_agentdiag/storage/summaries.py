"""Summary tables kept current in the writer's transaction: per trace (a run), per session and per store.

Whole-store reads (``agentdiag sessions``, ``traces``, a trace server's runs and conversations lists) read these
figures through their indexes instead of grouping, scanning or decoding every span. Migration 7 made them:

- ``trace_summaries``: one row per trace with rows: its session (the largest session key among its spans, as
  ``list_traces`` always showed), earliest start, span and error counts, counts of iterations, LLM and tool
  calls, tokens in/out summed over LLM spans only (the leaves: a parent's roll-up would count twice, the rule
  of ``agentdiag status``), and its root: the first span without a parent (the earliest start; ties: the
  smallest span id), or the earliest span when none is stored yet. The root gives the name, kind, status, end,
  the service (``service.name`` of its resource), the agent (its ``gen_ai.agent.name``; an agent run without
  one: its name) and the stop reason (``agentdiag.stop_reason``). A trace whose root is an agent span
  (kind ``run``) is a *run*. Children usually end (and arrive) before their root: the root fields change when
  a better root arrives.
- Migration 12 added to ``trace_summaries`` the cost: ``cost_nanos``, the sum of the LLM leaves'
  ``agentdiag.cost.usd`` (leaves only, like the tokens; never the roll-ups) in whole nano-dollars, exact in any
  order of addition (see :mod:`otel_agentdiag._internal.money`), NULL when no leaf has a cost, and
  ``cost_usd`` = ``cost_nanos / 1e9``; and ``budget_exceeded``, 1 when a run span of the trace carries
  ``agentdiag.budget.exceeded = true``.
- ``session_traces``: which traces have rows in which session (``''``: outside any session).
- ``sessions`` gained ``first_start_ns`` and ``last_activity_ns`` (None exactly when the session has no rows),
  beside the writer's running ``span_count`` and ``bytes``; ``store_stats`` gained ``session_count`` (named
  sessions with rows).

Writes add their rows per batch, aggregated in Python: one upsert per touched trace and session, not per span
(:func:`record_batch`, one call from the writer). Deletes (retention, ``prune``, ``clear``, an imported row
displaced by an observed one) are caught by the ``spans_deleted_summaries`` trigger, which notes the
(trace, session) in ``summary_dirty`` (so does ``spans_updated_summaries`` for a row whose ids or session another
program changed); :func:`flush_deleted` then recomputes those traces and sessions from their remaining rows
through the key and the session index, and flags the rows whose parent went (``orphan``, read by receipts), in
the same transaction. :func:`rebuild_summaries`
recomputes everything from the rows in SQL (the migration's backfill, a check in the tests, benchmark stores
made with SQL).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.money import MAX_LEAF_USD, NANOS_CAP, add_nanos, leaf_nanos, usd
from otel_agentdiag.storage.operations import forget_empty, rebuild_operations, record_operations
from otel_agentdiag.storage.receipt_reads import PLAIN
from otel_agentdiag.storage.rows import SpanRow

_INPUT = sc.GEN_AI_USAGE_INPUT_TOKENS
_OUTPUT = sc.GEN_AI_USAGE_OUTPUT_TOKENS
_AGENT = sc.GEN_AI_AGENT_NAME
_STOP = sc.AGENTDIAG_STOP_REASON
_SERVICE = "service.name"
_COST = sc.AGENTDIAG_COST_USD
_BUDGET = sc.AGENTDIAG_BUDGET_EXCEEDED


def _json_field(column: str, key: str, json_type: str) -> str:
    """SQL: ``column``'s JSON member ``key`` when the column is valid JSON and the member has ``json_type``."""
    path = f"'$.\"{key}\"'"
    return (
        f"(CASE WHEN json_valid({column}) AND json_type({column}, {path}) = '{json_type}'"
        f" THEN json_extract({column}, {path}) END)"
    )


def _tokens(key: str) -> str:
    return (
        f"SUM(CASE WHEN kind = 'llm' THEN max(coalesce({_json_field('attributes', key, 'integer')}, 0), 0) ELSE 0 END)"
    )


def _leaf_nanos_sql() -> str:
    """SQL: an LLM leaf's cost in whole nano-dollars, or NULL (the twin of ``money.leaf_nanos``)."""
    path = f"'$.\"{_COST}\"'"
    value = f"json_extract(attributes, {path})"
    # Nested CASEs: only CASE fixes the order of evaluation (json_type of malformed JSON raises).
    return (
        f"(CASE WHEN kind = 'llm' AND json_valid(attributes) THEN"
        f" (CASE WHEN json_type(attributes, {path}) IN ('real', 'integer') THEN"
        f" (CASE WHEN {value} >= 0 AND {value} <= {MAX_LEAF_USD!r} THEN CAST({value} * 1e9 + 0.5 AS INTEGER) END)"
        " END) END)"
    )


# TOTAL, not SUM: a sum past the int64 range must saturate, never raise in the writer's transaction. Each term is
# at most 1e15, so every partial sum below 2**53 is exact in a double; above it saturates to the cap.
_COST_NANOS = (
    f"(CASE WHEN COUNT({_leaf_nanos_sql()}) > 0 THEN CAST(min(TOTAL({_leaf_nanos_sql()}), {NANOS_CAP}) AS INTEGER) END)"
)
_BUDGET_SQL = (
    f"coalesce(MAX(CASE WHEN kind = 'run' AND json_valid(attributes)"
    f" THEN json_type(attributes, '$.\"{_BUDGET}\"') = 'true' END), 0)"
)


_TRACES_FROM_ROWS = f"""INSERT INTO trace_summaries (trace_id, session, start_ns, root_span_id, root_parent,
        root_start_ns, name, kind, status, end_ns, span_count, error_count, iterations, llm_calls, tool_calls,
        input_tokens, output_tokens, service, agent, stop_reason, cost_nanos, cost_usd, budget_exceeded)
    SELECT g.trace_id, g.session, g.start_ns, r.span_id, r.parent_span_id IS NOT NULL, r.start_ns, r.name, r.kind,
        r.status, r.end_ns, g.n, g.errors, g.iterations, g.llm, g.tools, g.tokens_in, g.tokens_out,
        (SELECT {_json_field("res.attributes", _SERVICE, "text")} FROM resources res WHERE res.id = r.resource_id),
        coalesce({_json_field("r.attributes", _AGENT, "text")}, CASE WHEN r.kind = 'run' THEN r.name END),
        {_json_field("r.attributes", _STOP, "text")}, g.cost_nanos, g.cost_nanos / 1e9, g.budget
    FROM (SELECT trace_id, MAX(session) AS session, MIN(start_ns) AS start_ns, COUNT(*) AS n,
            SUM(status = 'error') AS errors, SUM(kind = 'iteration') AS iterations, SUM(kind = 'llm') AS llm,
            SUM(kind = 'tool') AS tools, {_tokens(_INPUT)} AS tokens_in, {_tokens(_OUTPUT)} AS tokens_out,
            {_COST_NANOS} AS cost_nanos, {_BUDGET_SQL} AS budget
          FROM spans {{where}} GROUP BY trace_id) AS g
    JOIN spans r ON r.rowid = (SELECT x.rowid FROM spans x WHERE x.trace_id = g.trace_id
        ORDER BY x.parent_span_id IS NOT NULL, x.start_ns, x.span_id LIMIT 1)"""
"""SQL: insert the summaries of the traces of the rows ``{where}`` selects."""

_ACTIVITY = "max(coalesce(end_ns, start_ns), start_ns)"


REBUILD: tuple[str, ...] = (
    "DELETE FROM summary_dirty",
    "DELETE FROM trace_summaries",
    _TRACES_FROM_ROWS.format(where="WHERE true"),
    "DELETE FROM session_traces",
    "INSERT INTO session_traces (session, trace_id) SELECT DISTINCT coalesce(session, ''), trace_id FROM spans",
    "UPDATE sessions SET span_count = 0, bytes = 0, first_start_ns = NULL, last_activity_ns = NULL",
    f"""INSERT INTO sessions (session, span_count, bytes, first_start_ns, last_activity_ns)
        SELECT coalesce(session, ''), COUNT(*), SUM(size), MIN(start_ns), MAX({_ACTIVITY}) FROM spans WHERE true
        GROUP BY coalesce(session, '')
        ON CONFLICT (session) DO UPDATE SET span_count = excluded.span_count, bytes = excluded.bytes,
        first_start_ns = excluded.first_start_ns, last_activity_ns = excluded.last_activity_ns""",
    "INSERT OR IGNORE INTO store_stats (id) VALUES (1)",
    """UPDATE store_stats SET span_count = (SELECT COUNT(*) FROM spans),
        total_bytes = (SELECT coalesce(SUM(size), 0) FROM spans),
        session_count = (SELECT COUNT(*) FROM sessions WHERE session <> '' AND first_start_ns IS NOT NULL)
        WHERE id = 1""",
)
"""Recompute every summary (and the writer's running rows/bytes per session and store) from the rows."""


_PARENT_MISSING = """parent_span_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM spans p
    WHERE p.trace_id = spans.trace_id AND p.span_id = spans.parent_span_id
    AND (substr(coalesce(spans.session, ''), 1, 9) = 'imported:' OR p.session IS NULL
        OR substr(p.session, 1, 9) <> 'imported:'))"""
"""SQL: the row names a parent stored nowhere in its trace (for an observed row: nowhere among observed rows)."""


def rebuild_summaries(conn: sqlite3.Connection) -> None:
    """Recompute every summary table from the rows, in SQL (also the running rows and bytes per session and per
    store, every row's ``orphan`` flag and the ``plain`` flag of rows written by other means). Runs in the
    caller's transaction when one is open, else in its own."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in REBUILD:
            conn.execute(statement)
        rebuild_operations(conn)
        conn.execute(f"UPDATE spans SET plain = {PLAIN} WHERE plain IS NULL")  # rows written by other means
        conn.execute(f"UPDATE spans SET orphan = 1 WHERE orphan IS NOT 1 AND {_PARENT_MISSING}")
        conn.execute(f"UPDATE spans SET orphan = 0 WHERE orphan IS NOT 0 AND NOT ({_PARENT_MISSING})")
    except BaseException:
        if own:
            conn.execute("ROLLBACK")
        raise
    if own:
        conn.execute("COMMIT")


# -- the writer's part ----------------------------------------------------------------------------------------
_ROOT_FIELDS = (
    "root_span_id",
    "root_parent",
    "root_start_ns",
    "name",
    "kind",
    "status",
    "end_ns",
    "service",
    "agent",
    "stop_reason",
)
# Four statements rather than one upsert that assigns every column: SQLite rewrites the entries of every index on
# an assigned column, so the indexed columns (start, session, the root's kind/status/agent/service) are assigned
# only when they change: a new trace, an earlier span, a larger session key, a better root.
_ADDED_NANOS = f"min(coalesce(cost_nanos, 0) + excluded.cost_nanos, {NANOS_CAP})"
_UPSERT_TRACE = (
    "INSERT INTO trace_summaries (trace_id, session, start_ns, span_count, error_count, iterations, llm_calls,"
    f" tool_calls, input_tokens, output_tokens, cost_nanos, cost_usd, budget_exceeded, {', '.join(_ROOT_FIELDS)})"
    f" VALUES ({', '.join('?' * (13 + len(_ROOT_FIELDS)))})"
    " ON CONFLICT (trace_id) DO UPDATE SET"
    " span_count = span_count + excluded.span_count, error_count = error_count + excluded.error_count,"
    " iterations = iterations + excluded.iterations, llm_calls = llm_calls + excluded.llm_calls,"
    " tool_calls = tool_calls + excluded.tool_calls, input_tokens = input_tokens + excluded.input_tokens,"
    " output_tokens = output_tokens + excluded.output_tokens,"
    f" cost_nanos = CASE WHEN excluded.cost_nanos IS NULL THEN cost_nanos ELSE {_ADDED_NANOS} END,"
    f" cost_usd = CASE WHEN excluded.cost_nanos IS NULL THEN cost_usd ELSE {_ADDED_NANOS} / 1e9 END,"
    " budget_exceeded = max(budget_exceeded, excluded.budget_exceeded)"
)
_EARLIER_START = "UPDATE trace_summaries SET start_ns = ?2 WHERE trace_id = ?1 AND start_ns > ?2"
_LARGER_SESSION = "UPDATE trace_summaries SET session = ?2 WHERE trace_id = ?1 AND (session IS NULL OR session < ?2)"
_BETTER_ROOT = (
    f"UPDATE trace_summaries SET {', '.join(f'{c} = ?{i + 2}' for i, c in enumerate(_ROOT_FIELDS))}"
    " WHERE trace_id = ?1 AND (root_parent, root_start_ns, root_span_id) > (?3, ?4, ?2)"
)


def _positive_int(value: object) -> int:
    return value if type(value) is int and value > 0 else 0


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


class _Trace:
    __slots__ = ("budget", "counts", "nanos", "root", "root_key", "session", "start_ns")

    def __init__(self) -> None:
        self.session: str | None = None
        self.start_ns = 0
        self.counts = [0, 0, 0, 0, 0, 0, 0]  # spans, errors, iterations, llm, tools, tokens in, tokens out
        self.nanos: int | None = None  # the LLM leaves' cost; None: no leaf with a cost
        self.budget = 0
        self.root_key: tuple[bool, int, str] | None = None
        self.root: tuple[Any, ...] = ()


def record_batch(conn: sqlite3.Connection, written: Sequence[SpanRow]) -> None:
    """Add the rows a batch wrote (duplicates and rows of a cleared session left out) to the summaries, then
    recompute what deletes in this transaction touched. Call inside the writer's transaction, after retention."""
    traces: dict[str, _Trace] = {}
    sessions: dict[str, list[int]] = {}  # key -> [first start, last activity]
    pairs: set[tuple[str, str]] = set()
    for row in written:
        trace_id, start, end = row.trace_id, row.start_ns, row.end_ns
        session = row.session or None
        key = session or ""
        entry = traces.get(trace_id)
        if entry is None:
            entry = traces[trace_id] = _Trace()
            entry.start_ns = start
        elif start < entry.start_ns:
            entry.start_ns = start
        if session is not None and (entry.session is None or session > entry.session):
            entry.session = session
        kind = row.kind
        counts = entry.counts
        counts[0] += 1
        if row.status == "error":
            counts[1] += 1
        if kind == sc.KIND_ITERATION:
            counts[2] += 1
        elif kind == sc.KIND_LLM:
            counts[3] += 1
            attributes = row.attributes
            counts[5] += _positive_int(attributes.get(_INPUT))
            counts[6] += _positive_int(attributes.get(_OUTPUT))
            if _COST in attributes:
                entry.nanos = add_nanos(entry.nanos, leaf_nanos(attributes[_COST]))
        elif kind == sc.KIND_TOOL:
            counts[4] += 1
        elif kind == sc.KIND_RUN and row.attributes.get(_BUDGET) is True:
            entry.budget = 1
        root_key = (row.parent_span_id is not None, start, row.span_id)
        if entry.root_key is None or root_key < entry.root_key:
            entry.root_key = root_key
            attributes = row.attributes
            agent = _text(attributes.get(_AGENT))
            if agent is None and kind == sc.KIND_RUN:
                agent = row.name
            entry.root = (
                row.span_id,
                int(root_key[0]),
                start,
                row.name,
                kind,
                row.status,
                end,
                _text(row.resource.get(_SERVICE)),
                agent,
                _text(attributes.get(_STOP)),
            )
        activity = start if end is None or end < start else end
        found = sessions.get(key)
        if found is None:
            sessions[key] = [start, activity]
        else:
            if start < found[0]:
                found[0] = start
            if activity > found[1]:
                found[1] = activity
        pairs.add((key, trace_id))
    if traces:
        ids = list(traces)
        known: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            known.update(
                r[0]
                for r in conn.execute(
                    f"SELECT trace_id FROM trace_summaries WHERE trace_id IN ({','.join('?' * len(chunk))})", chunk
                )
            )
        conn.executemany(
            _UPSERT_TRACE,
            [
                (trace_id, t.session, t.start_ns, *t.counts, t.nanos, usd(t.nanos), t.budget, *t.root)
                for trace_id, t in traces.items()
            ],
        )
        if known:
            older = [(trace_id, traces[trace_id]) for trace_id in known]
            conn.executemany(_EARLIER_START, [(trace_id, t.start_ns) for trace_id, t in older])
            conn.executemany(_LARGER_SESSION, [(trace_id, t.session) for trace_id, t in older if t.session is not None])
            conn.executemany(_BETTER_ROOT, [(trace_id, *t.root) for trace_id, t in older])
        conn.executemany("INSERT OR IGNORE INTO session_traces (session, trace_id) VALUES (?, ?)", list(pairs))
        _add_sessions(conn, sessions)
        record_operations(conn, written)
    flush_deleted(conn)


def _add_sessions(conn: sqlite3.Connection, sessions: dict[str, list[int]]) -> None:
    keys = [key for key in sessions if key]
    new = 0
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        (found,) = conn.execute(
            f"SELECT COUNT(*) FROM sessions WHERE first_start_ns IS NULL AND session IN ({','.join('?' * len(chunk))})",
            chunk,
        ).fetchone()
        new += int(found)
    conn.executemany(
        "UPDATE sessions SET first_start_ns = min(coalesce(first_start_ns, ?1), ?1),"
        " last_activity_ns = max(coalesce(last_activity_ns, ?2), ?2) WHERE session = ?3",
        [(first, last, key) for key, (first, last) in sessions.items()],
    )
    if new:
        conn.execute("UPDATE store_stats SET session_count = session_count + ? WHERE id = 1", (new,))


def flush_deleted(conn: sqlite3.Connection) -> None:
    """Recompute the traces and sessions that rows deleted in this transaction belonged to (noted by the
    ``spans_deleted_summaries`` trigger), from their remaining rows. Call inside the deleting transaction."""
    dirty = conn.execute("SELECT trace_id, session FROM summary_dirty").fetchall()
    if not dirty:
        return
    traces = sorted({(trace_id,) for trace_id, _session in dirty})
    conn.executemany("DELETE FROM trace_summaries WHERE trace_id = ?", traces)
    conn.executemany(_TRACES_FROM_ROWS.format(where="WHERE trace_id = ?"), traces)
    conn.executemany(
        "DELETE FROM session_traces WHERE session = ?1 AND trace_id = ?2 AND NOT EXISTS"
        " (SELECT 1 FROM spans WHERE trace_id = ?2 AND coalesce(session, '') = ?1)",
        [(session, trace_id) for trace_id, session in dirty],
    )
    change = 0
    for key in sorted({session for _trace_id, session in dirty}):
        where = "session = ?" if key else "session IS NULL AND ? = ''"
        first, last = conn.execute(
            f"SELECT MIN(start_ns), MAX({_ACTIVITY}) FROM spans WHERE {where}", (key,)
        ).fetchone()
        before = conn.execute("SELECT first_start_ns FROM sessions WHERE session = ?", (key,)).fetchone()
        if before is None:
            continue
        conn.execute(
            "UPDATE sessions SET first_start_ns = ?, last_activity_ns = ? WHERE session = ?", (first, last, key)
        )
        if key and (before[0] is None) != (first is None):
            change += 1 if first is not None else -1
    if change:
        conn.execute("UPDATE store_stats SET session_count = session_count + ? WHERE id = 1", (change,))
    # Children whose parent was deleted (or whose ids changed under another program) may be orphans now.
    conn.executemany(f"UPDATE spans SET orphan = 1 WHERE trace_id = ? AND orphan IS 0 AND {_PARENT_MISSING}", traces)
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'operations'").fetchone():
        forget_empty(conn)
    conn.execute("UPDATE store_stats SET deleted_since_scrub = 1 WHERE id = 1")
    conn.execute("DELETE FROM summary_dirty")
