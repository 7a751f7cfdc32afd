"""Values other instrumentations write in a shape the policy would refuse or misread, mended before it judges them.

A foreign span is not punished for its library's spelling: the adapter rewrites, on the copy it builds, a value
whose meaning is clear into the shape our model and the policy use. Each rule reads one key and writes the same
key; nothing is added that the span did not say, and a value that cannot be read with certainty is left as it is
(the policy then judges it as before: dropped, or ``_OTHER``, and counted).

- ``server.address`` holding a URL (Semantic Kernel writes its endpoint there): the URL's host. The rest (scheme,
  port, path, query) is never kept; a URL whose host cannot be read loses the key.
- ``gen_ai.provider.name`` in another case (``OpenAI``, Agno) or spelled as the vendor's SDK spells it: the
  conventions' well-known value (:data:`PROVIDER_ALIASES`). A framework naming itself there
  (``strands-agents``, :data:`FRAMEWORK_PROVIDERS`) is not the model's provider: the provider the model's name
  gives (``openai/gpt-4.1-mini``), else the one provider the price table knows the model under, else the
  value stays.
- ``gen_ai.response.finish_reasons`` written as an enum's repr or in capitals (``FinishReason.TOOL_CALLS``,
  ``END_TURN``): the documented value (``tool_calls``, ``end_turn``) when the lower-cased name is one; written
  as one string, or as a JSON array in a string (AG2's ``'["tool_calls"]'``): the array.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.providers import PROVIDER_ALIASES
from otel_agentdiag.cost.pricing import active_table
from otel_agentdiag.redaction.finish_reasons import FINISH_REASONS

__all__ = ["FRAMEWORK_PROVIDERS", "PROVIDER_ALIASES", "normalise"]

FRAMEWORK_PROVIDERS: frozenset[str] = frozenset(
    {
        "strands-agents",
        "strands",
        "litellm",
        "langchain",
        "llama_index",
        "llamaindex",
        "crewai",
        "agno",
        "dspy",
        "haystack",
        "beeai",
        "semantic_kernel",
        "autogen",
        "ag2",
    }
)
"""Provider values that name the agent framework or router, not the model's provider."""

_MAX_VALUE = 256


def _host(value: str) -> str | None:
    try:
        host = urlsplit(value).hostname
    except ValueError:
        return None
    return host or None


def _provider_of_model(attributes: dict[str, Any]) -> str | None:
    table = active_table()
    for key in (sc.GEN_AI_REQUEST_MODEL, sc.GEN_AI_RESPONSE_MODEL):
        model = attributes.get(key)
        if type(model) is str and 0 < len(model) <= _MAX_VALUE:
            prefix, slash, _ = model.partition("/")
            if slash and prefix.lower() in PROVIDER_ALIASES:
                return PROVIDER_ALIASES[prefix.lower()]
            found = table.provider_for_model(model) if table is not None else None
            if found is not None:
                return found
    return None


def _provider(value: str, attributes: dict[str, Any]) -> str:
    lowered = value.strip().lower()
    if lowered in FRAMEWORK_PROVIDERS:
        return _provider_of_model(attributes) or lowered
    return PROVIDER_ALIASES.get(lowered, lowered)


def _finish_reason(value: Any) -> Any:
    if type(value) is not str or value in FINISH_REASONS or len(value) > _MAX_VALUE:
        return value
    prefix, dot, name = value.rpartition(".")
    candidate = (name if dot and prefix.isidentifier() else value).lower()
    return candidate if candidate in FINISH_REASONS else value


def normalise(attributes: dict[str, Any]) -> None:
    """Mend, in place, the values of a mapped span's attributes that the module doc lists."""
    address = attributes.get(sc.SERVER_ADDRESS)
    if type(address) is str and "://" in address:
        host = _host(address) if len(address) <= 2048 else None
        if host is None:
            del attributes[sc.SERVER_ADDRESS]
        else:
            attributes[sc.SERVER_ADDRESS] = host
    provider = attributes.get(sc.GEN_AI_PROVIDER_NAME)
    if type(provider) is str and 0 < len(provider) <= _MAX_VALUE:
        attributes[sc.GEN_AI_PROVIDER_NAME] = _provider(provider, attributes)
    reasons = attributes.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
    if isinstance(reasons, Sequence) and not isinstance(reasons, str) and len(reasons) <= 64:
        mended = tuple(_finish_reason(r) for r in reasons)
        if mended != tuple(reasons):
            attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = mended
    elif type(reasons) is str:
        listed = _json_list(reasons) if reasons.startswith("[") else None  # AG2 writes the array as JSON text
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (
            tuple(_finish_reason(r) for r in listed) if listed is not None else (_finish_reason(reasons),)
        )


def _json_list(text: str) -> list[str] | None:
    """A JSON array of at most 64 short strings, else None."""
    if len(text) > 4096:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, list) and len(value) <= 64 and all(type(v) is str and len(v) <= 64 for v in value):
        return value
    return None
