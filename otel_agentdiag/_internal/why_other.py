"""Why a stored name reads ``_OTHER``, from the redaction counters on its span: for ``agentdiag show`` and the viewer.

Kept apart from :mod:`otel_agentdiag._internal.names` (the registry, its lock and its logger), so the readers that
print a trace import nothing they do not need.
"""

from __future__ import annotations

from collections.abc import Mapping

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import reason_codes

__all__ = ["OTHER_REFUSED", "OTHER_UNDECLARED", "other_reason"]


OTHER_UNDECLARED = "a name no code declared (agentdiag.register_names, @agentdiag.tool, or the request's tools)"
OTHER_REFUSED = "a name refused by the public-safety check (it looked like a secret)"

_NAME_ATTRIBUTES = (sc.GEN_AI_TOOL_NAME, sc.GEN_AI_AGENT_NAME, sc.AGENTDIAG_GUARDRAIL_NAME)


def other_reason(attributes: Mapping[str, object], name: str) -> str | None:
    """Why a stored span's name (or a name attribute) reads ``_OTHER``, from the redaction counters on it: for
    ``agentdiag show`` and the viewer. None when no name reads ``_OTHER`` or no counter says why."""
    if not name.endswith(sc.OTHER_VALUE) and not any(attributes.get(k) == sc.OTHER_VALUE for k in _NAME_ATTRIBUTES):
        return None
    if attributes.get(reason_codes.UNREGISTERED_COUNTER):
        return OTHER_UNDECLARED
    if attributes.get(reason_codes.PUBLIC_SAFETY_COUNTER):
        return OTHER_REFUSED
    return None
