"""One warning per kind of name, the first time a name no code declared leaves as ``_OTHER``.

A tool, agent or guardrail name is code or it is data (:mod:`otel_agentdiag._internal.names`). A name that only
reached a span at run time (a tool name taken from the model's answer and never offered to it, a per-call run
name) is exported as ``_OTHER`` with the ``agentdiag.redaction.unregistered_name`` counter on the span, which
``agentdiag show`` and the viewer print beside it. So that a user who did not look there still learns why, the
pipeline's redacting processors log one warning per kind per process: it names the kind and how to declare such
names, never the name (it may be anything the model wrote).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.redaction.reasons import UNREGISTERED_NAME

__all__ = ["UNREGISTERED_COUNTER", "note_undeclared"]

_logger = logging.getLogger(__name__)

UNREGISTERED_COUNTER = sc.AGENTDIAG_REDACTION_PREFIX + UNREGISTERED_NAME

_NAME_KEYS: tuple[tuple[str, str], ...] = (
    (sc.GEN_AI_TOOL_NAME, "tool"),
    (sc.GEN_AI_AGENT_NAME, "agent"),
    (sc.AGENTDIAG_GUARDRAIL_NAME, "guardrail"),
)

_HOW_TO_DECLARE = {
    "tool": (
        "offer the tool to the model in the request's `tools` (our OpenAI and Anthropic instrumentors read them), "
        "decorate it with @agentdiag.tool, or call agentdiag.register_names(tools=[...])"
    ),
    "agent": "name it in agent_run(name) or @agentdiag.agent, or call agentdiag.register_names(agents=[...])",
    "guardrail": "call agentdiag.register_names(guardrails=[...])",
}

_warned: set[str] = set()
_lock = threading.Lock()


def note_undeclared(span: Any) -> None:
    """After redaction: warn once per kind when ``span`` carries a name that became ``_OTHER`` because no code
    declared it. Cheap when the span has no unregistered name (one lookup), and once every kind was warned about."""
    attributes = span.attributes
    if not attributes or UNREGISTERED_COUNTER not in attributes or len(_warned) == len(_NAME_KEYS):
        return
    for key, kind in _NAME_KEYS:
        if kind in _warned or attributes.get(key) != sc.OTHER_VALUE:
            continue
        with _lock:
            if kind in _warned:
                continue
            _warned.add(kind)
        _logger.warning(
            "otel-agentdiag: %s %s name that no code declared was exported as %s (names are code; a name taken "
            "from a model's answer or other data is never kept). To keep your %s names, %s. This is logged once.",
            "an" if kind[0] in "aeiou" else "a",
            kind,
            sc.OTHER_VALUE,
            kind,
            _HOW_TO_DECLARE[kind],
        )
