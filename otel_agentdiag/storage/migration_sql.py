"""The SQL of migrations 7, 11 and 12 as they shipped, frozen: never edited (a new migration changes the schema).

They were built from live schema constants (``storage/summaries.py``, ``storage/operations.py``); a migration that
reads today's code changes meaning the day that code does, so each is kept here as the text it ran.
"""
# ruff: noqa: E501  (the statements as they ran, unwrapped)

from __future__ import annotations

MIGRATION_7: tuple[str, ...] = (
    """CREATE TABLE trace_summaries (
        trace_id TEXT PRIMARY KEY,
        session TEXT,
        start_ns INTEGER NOT NULL,
        root_span_id TEXT NOT NULL,
        root_parent INTEGER NOT NULL,
        root_start_ns INTEGER NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        end_ns INTEGER,
        span_count INTEGER NOT NULL DEFAULT 0,
        error_count INTEGER NOT NULL DEFAULT 0,
        iterations INTEGER NOT NULL DEFAULT 0,
        llm_calls INTEGER NOT NULL DEFAULT 0,
        tool_calls INTEGER NOT NULL DEFAULT 0,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        service TEXT,
        agent TEXT,
        stop_reason TEXT
    ) WITHOUT ROWID""",
    """CREATE INDEX trace_summaries_start ON trace_summaries(start_ns DESC, trace_id)""",
    """CREATE INDEX trace_summaries_runs ON trace_summaries(start_ns DESC, trace_id) WHERE kind = 'run'""",
    """CREATE INDEX trace_summaries_agent ON trace_summaries(agent, status, start_ns DESC, trace_id)
        WHERE kind = 'run'""",
    """CREATE INDEX trace_summaries_service ON trace_summaries(service, status, start_ns DESC, trace_id)
        WHERE kind = 'run'""",
    """CREATE INDEX trace_summaries_status ON trace_summaries(status, start_ns DESC, trace_id) WHERE kind = 'run'""",
    """CREATE INDEX trace_summaries_session ON trace_summaries(session, start_ns)""",
    """CREATE TABLE session_traces (
        session TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        PRIMARY KEY (session, trace_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE summary_dirty (
        trace_id TEXT NOT NULL,
        session TEXT NOT NULL,
        PRIMARY KEY (trace_id, session)
    ) WITHOUT ROWID""",
    """CREATE TRIGGER spans_deleted_summaries AFTER DELETE ON spans BEGIN
        INSERT OR IGNORE INTO summary_dirty (trace_id, session) VALUES (old.trace_id, coalesce(old.session, ''));
    END""",
    """ALTER TABLE sessions ADD COLUMN first_start_ns INTEGER""",
    """ALTER TABLE sessions ADD COLUMN last_activity_ns INTEGER""",
    """CREATE INDEX sessions_activity ON sessions(last_activity_ns DESC, session)""",
    """ALTER TABLE store_stats ADD COLUMN session_count INTEGER NOT NULL DEFAULT 0""",
    """ALTER TABLE store_stats ADD COLUMN deleted_since_scrub INTEGER NOT NULL DEFAULT 1""",
    """DELETE FROM summary_dirty""",
    """DELETE FROM trace_summaries""",
    """INSERT INTO trace_summaries (trace_id, session, start_ns, root_span_id, root_parent,
        root_start_ns, name, kind, status, end_ns, span_count, error_count, iterations, llm_calls, tool_calls,
        input_tokens, output_tokens, service, agent, stop_reason)
    SELECT g.trace_id, g.session, g.start_ns, r.span_id, r.parent_span_id IS NOT NULL, r.start_ns, r.name, r.kind,
        r.status, r.end_ns, g.n, g.errors, g.iterations, g.llm, g.tools, g.tokens_in, g.tokens_out,
        (SELECT (CASE WHEN json_valid(res.attributes) AND json_type(res.attributes, '$."service.name"') = 'text' THEN json_extract(res.attributes, '$."service.name"') END) FROM resources res WHERE res.id = r.resource_id),
        coalesce((CASE WHEN json_valid(r.attributes) AND json_type(r.attributes, '$."gen_ai.agent.name"') = 'text' THEN json_extract(r.attributes, '$."gen_ai.agent.name"') END), CASE WHEN r.kind = 'run' THEN r.name END),
        (CASE WHEN json_valid(r.attributes) AND json_type(r.attributes, '$."agentdiag.stop_reason"') = 'text' THEN json_extract(r.attributes, '$."agentdiag.stop_reason"') END)
    FROM (SELECT trace_id, MAX(session) AS session, MIN(start_ns) AS start_ns, COUNT(*) AS n,
            SUM(status = 'error') AS errors, SUM(kind = 'iteration') AS iterations, SUM(kind = 'llm') AS llm,
            SUM(kind = 'tool') AS tools, SUM(CASE WHEN kind = 'llm' THEN max(coalesce((CASE WHEN json_valid(attributes) AND json_type(attributes, '$."gen_ai.usage.input_tokens"') = 'integer' THEN json_extract(attributes, '$."gen_ai.usage.input_tokens"') END), 0), 0) ELSE 0 END) AS tokens_in, SUM(CASE WHEN kind = 'llm' THEN max(coalesce((CASE WHEN json_valid(attributes) AND json_type(attributes, '$."gen_ai.usage.output_tokens"') = 'integer' THEN json_extract(attributes, '$."gen_ai.usage.output_tokens"') END), 0), 0) ELSE 0 END) AS tokens_out
          FROM spans WHERE true GROUP BY trace_id) AS g
    JOIN spans r ON r.rowid = (SELECT x.rowid FROM spans x WHERE x.trace_id = g.trace_id
        ORDER BY x.parent_span_id IS NOT NULL, x.start_ns, x.span_id LIMIT 1)""",
    """DELETE FROM session_traces""",
    """INSERT INTO session_traces (session, trace_id) SELECT DISTINCT coalesce(session, ''), trace_id FROM spans""",
    """UPDATE sessions SET span_count = 0, bytes = 0, first_start_ns = NULL, last_activity_ns = NULL""",
    """INSERT INTO sessions (session, span_count, bytes, first_start_ns, last_activity_ns)
        SELECT coalesce(session, ''), COUNT(*), SUM(size), MIN(start_ns), MAX(max(coalesce(end_ns, start_ns), start_ns)) FROM spans WHERE true
        GROUP BY coalesce(session, '')
        ON CONFLICT (session) DO UPDATE SET span_count = excluded.span_count, bytes = excluded.bytes,
        first_start_ns = excluded.first_start_ns, last_activity_ns = excluded.last_activity_ns""",
    """INSERT OR IGNORE INTO store_stats (id) VALUES (1)""",
    """UPDATE store_stats SET span_count = (SELECT COUNT(*) FROM spans),
        total_bytes = (SELECT coalesce(SUM(size), 0) FROM spans),
        session_count = (SELECT COUNT(*) FROM sessions WHERE session <> '' AND first_start_ns IS NOT NULL)
        WHERE id = 1""",
)
"""Migration 7: the per trace, per session and per store summaries, then their backfill from the rows."""

MIGRATION_11: tuple[str, ...] = (
    """CREATE TABLE operations (
        service TEXT NOT NULL,
        name TEXT NOT NULL,
        span_kind TEXT NOT NULL,
        span_count INTEGER NOT NULL,
        PRIMARY KEY (service, name, span_kind)
    ) WITHOUT ROWID""",
    """CREATE TRIGGER spans_deleted_operations AFTER DELETE ON spans BEGIN
        INSERT INTO operations (service, name, span_kind, span_count)
        VALUES (coalesce((SELECT CASE WHEN json_valid(r.attributes) AND json_type(r.attributes, '$."service.name"') = 'text' AND json_extract(r.attributes, '$."service.name"') <> '' THEN json_extract(r.attributes, '$."service.name"') ELSE 'unknown_service' END FROM resources r WHERE r.id = old.resource_id), 'unknown_service'), old.name, old.span_kind, -1)
        ON CONFLICT (service, name, span_kind) DO UPDATE SET span_count = span_count - 1;
    END""",
    """INSERT INTO operations (service, name, span_kind, span_count) SELECT CASE WHEN json_valid(r.attributes) AND json_type(r.attributes, '$."service.name"') = 'text' AND json_extract(r.attributes, '$."service.name"') <> '' THEN json_extract(r.attributes, '$."service.name"') ELSE 'unknown_service' END, s.name, s.span_kind, COUNT(*) FROM spans s LEFT JOIN resources r ON r.id = s.resource_id GROUP BY 1, 2, 3""",
)
"""Migration 11: each (service, span name, span kind) the store holds, filled from the rows."""

MIGRATION_12: tuple[str, ...] = (
    """ALTER TABLE trace_summaries ADD COLUMN cost_nanos INTEGER""",
    """ALTER TABLE trace_summaries ADD COLUMN cost_usd REAL""",
    """ALTER TABLE trace_summaries ADD COLUMN budget_exceeded INTEGER NOT NULL DEFAULT 0""",
    """UPDATE trace_summaries SET
        cost_nanos = (SELECT (CASE WHEN COUNT((CASE WHEN kind = 'llm' AND json_valid(attributes) THEN (CASE WHEN json_type(attributes, '$."agentdiag.cost.usd"') IN ('real', 'integer') THEN (CASE WHEN json_extract(attributes, '$."agentdiag.cost.usd"') >= 0 AND json_extract(attributes, '$."agentdiag.cost.usd"') <= 1000000.0 THEN CAST(json_extract(attributes, '$."agentdiag.cost.usd"') * 1e9 + 0.5 AS INTEGER) END) END) END)) > 0 THEN CAST(min(TOTAL((CASE WHEN kind = 'llm' AND json_valid(attributes) THEN (CASE WHEN json_type(attributes, '$."agentdiag.cost.usd"') IN ('real', 'integer') THEN (CASE WHEN json_extract(attributes, '$."agentdiag.cost.usd"') >= 0 AND json_extract(attributes, '$."agentdiag.cost.usd"') <= 1000000.0 THEN CAST(json_extract(attributes, '$."agentdiag.cost.usd"') * 1e9 + 0.5 AS INTEGER) END) END) END)), 9007199254740992) AS INTEGER) END) FROM spans WHERE spans.trace_id = trace_summaries.trace_id),
        budget_exceeded = (SELECT coalesce(MAX(CASE WHEN kind = 'run' AND json_valid(attributes) THEN json_type(attributes, '$."agentdiag.budget.exceeded"') = 'true' END), 0) FROM spans WHERE spans.trace_id = trace_summaries.trace_id)""",
    """UPDATE trace_summaries SET cost_usd = cost_nanos / 1e9 WHERE cost_nanos IS NOT NULL""",
)
"""Migration 12: the cost and budget columns of ``trace_summaries``, filled from each trace's rows."""
