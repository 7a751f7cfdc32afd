"""What the convention adapters share: the result type and the small key moves each of them makes.

An adapter reads a foreign span's attributes and says what the span is in our model (:class:`Mapped`); it never
adds content: every value it writes is a value the span already carried (moved to our key), or a closed
constant (a kind, an operation name). The redactor then decides every key exactly as for our own spans.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from otel_agentdiag import semconv as sc
from otel_agentdiag.redaction import keys as _keys

__all__ = ["LEAF_USAGE_KEYS", "Mapped", "copy_if_absent", "copy_texts", "copy_tokens", "is_text"]

LEAF_USAGE_KEYS: frozenset[str] = frozenset(_keys.GEN_AI_USAGE_KEYS) | frozenset(_keys.OPENINFERENCE_TOKEN_COUNT_KEYS)
"""Token counts of one model call, in every convention we read: kept on leaves (``llm``) only."""

_MAX_TEXT = 1024
"""Longer strings are not moved: no name, model or kind is that long (the redactor would drop it anyway)."""


class Mapped(NamedTuple):
    """What a foreign span is in our model.

    ``kind``: one of :data:`~otel_agentdiag.semconv.KINDS`. ``set``: attributes to add under our keys (moved
    values and closed constants; a key the span already has is never overwritten). ``name``: a fixed span name
    to use (None: the redactor names the span from its operation, as for ours). ``span_type``: for kind
    ``other``, the convention's kind of step (``agentdiag.framework.span_type``). ``content``: ``(key, role)``
    pairs: the span's content keys and the content role (``semconv.CONTENT_*``) each is, read only for the local
    store with content capture on (:meth:`~otel_agentdiag.content.recorder.ContentRecorder.attach`). ``agents``:
    see below.
    """

    kind: str
    set: dict[str, Any]
    name: str | None = None
    span_type: str | None = None
    content: tuple[tuple[str, str], ...] = ()
    agents: tuple[str, ...] = ()
    """Agent names the span shows code declared (an instrumentor's ``{agent}.run`` span name): registered by the
    adapter, if they pass the registry's checks, before the span is judged."""
    tools: tuple[str, ...] = ()
    """Tool names the span shows code declared, registered as :attr:`agents` are."""


GENAI_CONTENT: tuple[tuple[str, str], ...] = tuple((role, role) for role in sc.CONTENT_ROLES)
"""The GenAI conventions' content attributes carry our content roles' very names (``gen_ai.input.messages``,
``gen_ai.tool.call.arguments``, ...)."""


def is_text(value: Any) -> bool:
    """A string short enough to be a name, a model or a kind."""
    return type(value) is str and 0 < len(value) <= _MAX_TEXT


def copy_if_absent(attributes: Mapping[str, Any], out: dict[str, Any], source: str, target: str) -> None:
    """``out[target] = attributes[source]`` when the span has ``source`` as a short string and no ``target``."""
    if target not in attributes and target not in out:
        value = attributes.get(source)
        if type(value) is str and 0 < len(value) <= _MAX_TEXT:
            out[target] = value


def copy_texts(attributes: Mapping[str, Any], out: dict[str, Any], pairs: tuple[tuple[str, str], ...]) -> None:
    """:func:`copy_if_absent` for each ``(source, target)``, in order (the first source found fills a target)."""
    for source, target in pairs:
        if target not in attributes and target not in out:
            value = attributes.get(source)
            if type(value) is str and 0 < len(value) <= _MAX_TEXT:
                out[target] = value


def copy_tokens(attributes: Mapping[str, Any], out: dict[str, Any], pairs: tuple[tuple[str, str], ...]) -> None:
    """Move token counts: for each ``(source, target)``, an ``int`` (not a bool) at ``source`` goes to
    ``target`` unless the span already reports ``target``. Other types stay where they are (the redactor drops
    them as invalid there, and counts them)."""
    for source, target in pairs:
        if target not in attributes and target not in out:
            value = attributes.get(source)
            if type(value) is int:
                out[target] = value


OPERATION_KINDS: dict[str, str] = {
    sc.OP_INVOKE_AGENT: sc.KIND_RUN,
    sc.OP_INVOKE_WORKFLOW: sc.KIND_RUN,
    sc.OP_CHAT: sc.KIND_LLM,
    sc.OP_TEXT_COMPLETION: sc.KIND_LLM,
    sc.OP_GENERATE_CONTENT: sc.KIND_LLM,
    sc.OP_EMBEDDINGS: sc.KIND_LLM,
    sc.OP_EXECUTE_TOOL: sc.KIND_TOOL,
}
"""``gen_ai.operation.name`` → our kind; any other operation (``retrieval``, ``plan``, unknown ones) is ``other``.
``create_agent`` is ``other`` too: building an agent (AutoGen makes the span when an agent object is constructed,
in a trace of its own) is not a run of it."""
