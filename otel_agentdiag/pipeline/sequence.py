"""``SessionSequencer``: number every span of a session at start, so a span that never arrives leaves a gap.

Each span gets ``agentdiag.observer.id`` (this pipeline instance: 16 random hex digits per ``configure()``
in one process) and ``agentdiag.sequence`` (0, 1, 2, ... per (observer, session), in start order), kept beside
the span (``_internal/ids.py``; cheaper than two ``set_attribute`` calls): each of our redactors lays them over the
span it stores or exports; :func:`otel_agentdiag.testing.span_numbers` reads them. The
session is the one the store will file the span under: the span's ``gen_ai.conversation.id`` (else
``session.id``) when set at start, else the conversation id of the enclosing :func:`agent_run` (carried by the
OpenTelemetry context), else the session of an agent run that started its trace in this process (a span started
from the trace context alone: an in-process MCP server's), else none (spans outside any session are numbered too,
as one more "session").

The raw id is only a key of an in-process dict. A conversation id taken from the context is recorded beside
the span (``_internal/ids.py``), never set on it: every redactor of ours files the span under that session's
digest, and no other processor on the provider ever sees the raw id. At ``on_end`` the sequencer, first on
the provider, hands the span's recorded ids over to the ended span object the redactors read them from.

Our model and tool calls (``agentdiag.kind`` ``llm`` or ``tool``) without a ``gen_ai.agent.name`` get the name
of the nearest enclosing agent run (carried by the context like its conversation id; a registered name, which
the policy checks as on the run): what they cost and how long they took can be told apart per agent.

Memory is bounded: beyond ``max_sessions`` keys (4,096 by default) the session that has been idle longest is
forgotten; if it starts spans again its numbering restarts at 0, which a receipt reports as duplicate sequence
numbers rather than hiding.
"""

from __future__ import annotations

import logging
import secrets
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.context import (
    LLM_CALL_KEY,
    current_conversation_id,
    enclosing_agent,
    peer_conversation_id,
)
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag._internal.sdk import attribute_dict, span_attributes
from otel_agentdiag.pipeline.adapters.owners import LLMCallOwners


class SpanHolder(Protocol):
    """What the sequencer tells the processor that holds other instrumentations' traces
    (:class:`~otel_agentdiag.pipeline.assembly.TraceAssembler`) about the spans that start."""

    @property
    def held(self) -> Mapping[int, Any]:
        """The traces it holds, by trace id: their spans are numbered by the holder, not at start."""
        ...

    def started(self, context: Any, *, root: bool, session: str | None) -> None:
        """A span of a held trace started, or (``root``) another instrumentation's local root."""
        ...


_logger = logging.getLogger(__name__)

DEFAULT_MAX_SESSIONS = 4_096
"""About 160 bytes each (the raw id and its counter): about 0.6 MiB at most, whatever the number of sessions."""
_MAX_ID_LENGTH = 4096
"""Longer ids are dropped by the redactor (``too_long``): such a span is stored without a session."""
_INT64 = (-(2**63), 2**63 - 1)


def session_key(value: Any) -> str | None:
    """The key under which a raw session id is numbered: equal keys are exactly the ids with one digest.

    Mirrors the ``HashedId`` rule: non-empty strings up to 4096 characters (compared in Unicode NFC, as they
    are hashed) and 64-bit integers (hashed as their decimal text); anything else is stored without a session.
    """
    if isinstance(value, str):
        if not value or len(value) > _MAX_ID_LENGTH:
            return None
        return value if value.isascii() else unicodedata.normalize("NFC", value)
    if isinstance(value, int) and not isinstance(value, bool) and _INT64[0] <= value <= _INT64[1]:
        return str(value)
    return None


class SessionSequencer(SpanProcessor):
    """Give every sampled span ``agentdiag.observer.id`` and ``agentdiag.sequence`` at start, beside it. Never raises.

    Add it to the provider *before* the redacting processors (``configure()`` does): its ``on_end`` ties the
    numbers to the ended span every destination sees. A span numbered already is left as it is. After
    ``os.fork()`` the child gets a new observer id and starts every session at 0 again (a different stream).
    """

    exports_only_redacted = True
    """It exports nothing (see :func:`otel_agentdiag.pipeline.audit.foreign_processors`)."""

    def __init__(self, *, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.max_sessions = max_sessions
        self.observer_id = secrets.token_hex(8)
        """16 lowercase hex digits naming this pipeline instance."""
        self.forgotten = 0
        """Sessions forgotten to keep memory bounded (their numbering restarts if they resume)."""
        self._lock = threading.Lock()
        self._next: OrderedDict[str | None, int] = OrderedDict()
        self.assembler: SpanHolder | None = None
        """Set by the :class:`~otel_agentdiag.pipeline.assembly.TraceAssembler` built with this sequencer: the
        spans of a trace another instrumentation started are numbered by it, when the trace is handed on."""
        self._trace_sessions: dict[int, str] = {}
        """Trace id → the session key the first span of that trace naming its own session started with."""
        self.llm_calls = LLMCallOwners()
        """Foreign spans that started inside one of our model calls, for the convention adapters."""
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()
        self._next = OrderedDict()
        self._trace_sessions = {}
        self.observer_id = secrets.token_hex(8)

    def _trace_starts(self, trace_id: int, raw: Any) -> str | None:
        """The session key of a foreign span that names its own session; the first such span of a trace files the
        spans of that trace started after it without one (bounded: the oldest traces are forgotten first)."""
        key = session_key(raw)
        if key is not None and trace_id not in self._trace_sessions:
            self.file_trace(trace_id, key)
        return key

    def file_trace(self, trace_id: int, key: str) -> None:
        """File the spans of ``trace_id`` that start from now on without a session of their own in session ``key``
        (also the assembler, once it has handed on a trace, for the spans that trace still starts). Bounded: the
        oldest traces are forgotten first."""
        traces = self._trace_sessions
        if len(traces) >= self.max_sessions:
            with self._lock:
                while len(traces) >= self.max_sessions:
                    traces.pop(next(iter(traces)), None)
        traces[trace_id] = key

    def next_sequence(self, key: str | None) -> int:
        """Take the next number for the session ``key`` (see :func:`session_key`)."""
        with self._lock:
            counters = self._next
            n = counters.get(key)
            if n is None:
                n = 0
                if len(counters) >= self.max_sessions:
                    counters.popitem(last=False)
                    self.forgotten += 1
            else:
                counters.move_to_end(key)
            counters[key] = n + 1
        return n

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            context = span.context
            if not context.trace_flags.sampled:
                return  # never exported: numbering it would leave a gap
            # Read through the backing dict: the ``Mapping`` API of ``BoundedAttributes`` takes a lock per lookup.
            attributes = attribute_dict(span_attributes(span))
            foreign = sc.AGENTDIAG_KIND not in attributes
            if foreign:
                call = otel_context.get_value(LLM_CALL_KEY, parent_context)
                if call is not None and not getattr(call, "defers", False):
                    # Another instrumentation's span, started inside one of our model calls: if it is an LLM
                    # span, it is the same call, which ours owns (the adapters take its usage off).
                    self.llm_calls.mark_inside(span)
            if sc.AGENTDIAG_OBSERVER_ID in attributes or _ids.TABLE.numbers_of(span) is not None:
                return  # numbered by another sequencer on the provider (on the span, or beside it)
            assembler = self.assembler
            root = deferred = False
            if assembler is not None:
                # A span of a held trace, or another instrumentation's local root (its trace is then held): the
                # assembler numbers them when the trace is handed on (pipeline/assembly.py). Ours: one lookup.
                deferred = context[0] in assembler.held  # SpanContext is a tuple: [0] is its trace id (no call)
                if foreign and not deferred:
                    parent = span.parent
                    root = deferred = parent is None or parent.is_remote
            agent = enclosing_agent(attributes, parent_context)  # a span our start paths did not name
            if agent is not None:
                span.set_attribute(sc.GEN_AI_AGENT_NAME, agent)
            # The session the span names itself (plain lookups: no call on our spans' path).
            if sc.GEN_AI_CONVERSATION_ID in attributes:
                own = attributes[sc.GEN_AI_CONVERSATION_ID]
            elif sc.SESSION_ID in attributes:
                own = attributes[sc.SESSION_ID]
            else:
                own = None
            if deferred:
                found = None
                if own is None:
                    found = current_conversation_id(parent_context) or peer_conversation_id(parent_context)
                    if found is not None:
                        _ids.TABLE.record_conversation(span, found)  # the assembler files the trace from it
                assert assembler is not None
                assembler.started(context, root=root, session=session_key(own if own is not None else found))
                return
            from_context = None
            if own is not None:
                raw = own
                # Another instrumentation's span naming its session files the later spans of its trace there.
                key = self._trace_starts(context[0], raw) if foreign else session_key(raw)
            else:
                # Ours (an agent run's), else the official GenAI instrumentations' (set on their spans at end
                # only: numbered under it now, the span is filed where it is numbered), else the session an
                # earlier span of the same trace started with (another instrumentation's run span that names its
                # session, over model calls that do not): a run's session is its trace's.
                raw = from_context = (
                    current_conversation_id(parent_context)
                    or peer_conversation_id(parent_context)
                    or (self._trace_sessions.get(context[0]) if self._trace_sessions else None)
                )
                key = session_key(raw)
                if key is not None and attributes.get(sc.AGENTDIAG_KIND) == sc.KIND_RUN:
                    # Our agent run files its trace in its session: a span of that trace started here without
                    # the run's context (an MCP server's span in process, parented on the trace context the
                    # client sent) belongs to the run's session too.
                    if context[0] not in self._trace_sessions:
                        self.file_trace(context[0], key)
            # Beside the span, with the run's conversation id from the context (a foreign processor would export
            # that raw): each of our redactors lays them over the span's attributes. on_end pins the entry.
            numbers = {sc.AGENTDIAG_OBSERVER_ID: self.observer_id, sc.AGENTDIAG_SEQUENCE: self.next_sequence(key)}
            _ids.TABLE.record_conversation(span, from_context, numbers)
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("numbering a span", exc)

    def on_end(self, span: ReadableSpan) -> None:
        # First of our processors on the provider: the span's raw ids move onto the ended span object, where
        # each destination's redactor finds them on its worker (``_internal/ids.py``).
        try:
            _ids.TABLE.pin(span)
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("handing a span's ids over", exc)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
