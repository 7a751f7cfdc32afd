"""Names that code declared, read from where code hands them to a model: the tool definitions of a request.

A tool offered to the model (OpenAI's ``tools`` / legacy ``functions``, the Responses API's function tools,
Anthropic's ``tools``, the GenAI conventions' ``gen_ai.tool.definitions``, OpenInference's
``llm.tools.{i}.tool.json_schema``, OpenLLMetry's ``llm.request.functions.{i}.name``) was written by the agent's
code, so its name is code, not data: once registered, the tool spans that use it keep it instead of ``_OTHER``.
A name the model answers with but was never offered stays unregistered, so it still leaves as ``_OTHER``.

Every reader here is total (anything unexpected yields no name), bounded (:data:`MAX_TOOLS` definitions, names
of :data:`~otel_agentdiag._internal.names.NAME_PATTERN`'s shape only) and reads the name alone: descriptions and
parameter schemas are content and are never looked at. Registration goes through
:meth:`NameRegistry.register_valid`, so a name that fails the public-safety check (a credential, an e-mail
address, a path) is refused with the registry's one warning, never registered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from otel_agentdiag._internal.names import NAME_PATTERN, NameRegistry, default_registry

__all__ = [
    "MAX_TOOLS",
    "register_tools",
    "tool_names",
    "tool_names_in_attributes",
]

MAX_TOOLS = 128
"""At most this many definitions of one request are read (OpenAI accepts 128 tools per request)."""

_MAX_JSON = 1 << 20
"""A JSON definition list longer than this (characters) is not parsed."""

_MEMO_LIMIT = 256

_json_memo: dict[str, tuple[str, ...]] = {}
"""Names per JSON text already parsed: a request offers the same tools on every call of a loop."""


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _name_of(definition: Any) -> str | None:
    """The name of one tool definition, in any of the shapes above; None when it has none of our shape."""
    function = _field(definition, "function")  # OpenAI chat: {"type": "function", "function": {"name": ...}}
    name = _field(function, "name") if function is not None else _field(definition, "name")
    return name if type(name) is str and NAME_PATTERN.fullmatch(name) else None


def tool_names(definitions: Any) -> tuple[str, ...]:
    """The names of a request's tool definitions (a list or tuple of dicts or SDK objects), in order, without
    duplicates; ``()`` for anything else."""
    if not isinstance(definitions, (list, tuple)):
        return ()
    found: dict[str, None] = {}
    for definition in definitions[:MAX_TOOLS]:
        try:
            name = _name_of(definition)
        except Exception:  # noqa: BLE001 - a definition object whose attributes raise has no name we can read
            continue
        if name is not None:
            found[name] = None
    return tuple(found)


def _names_in_json(text: str) -> tuple[str, ...]:
    """:func:`tool_names` of a JSON list of definitions, or of one definition (an object); memoised."""
    cached = _json_memo.get(text)
    if cached is not None:
        return cached
    names: tuple[str, ...] = ()
    if len(text) <= _MAX_JSON:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        names = tool_names(parsed if isinstance(parsed, list) else [parsed] if isinstance(parsed, dict) else None)
    if len(_json_memo) >= _MEMO_LIMIT:
        _json_memo.clear()
    _json_memo[text] = names
    return names


GENAI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
OPENINFERENCE_TOOLS = "llm.tools"
OPENINFERENCE_TOOL_PREFIX = "llm.tools."
OPENINFERENCE_TOOL_SUFFIX = ".tool.json_schema"
OPENLLMETRY_FUNCTION_PREFIX = "llm.request.functions."
OPENLLMETRY_NAME_SUFFIX = ".name"


def tool_names_in_attributes(attributes: Mapping[str, Any]) -> tuple[str, ...]:
    """The tool names a span's attributes say were offered to the model, in any convention we read: the GenAI
    conventions' ``gen_ai.tool.definitions`` (a JSON list), OpenInference's ``llm.tools.{i}.tool.json_schema``
    (one JSON definition per key; or ``llm.tools``, one JSON list), OpenLLMetry's
    ``llm.request.functions.{i}.name`` (the name itself)."""
    found: dict[str, None] = {}
    value = attributes.get(GENAI_TOOL_DEFINITIONS)
    if value is None:
        value = attributes.get(OPENINFERENCE_TOOLS)  # OpenInference's CrewAI event listener: one JSON list
    if type(value) is str:
        found.update(dict.fromkeys(_names_in_json(value)))
    elif isinstance(value, (list, tuple)):  # one JSON definition per item
        for item in value[:MAX_TOOLS]:
            if type(item) is str:
                found.update(dict.fromkeys(_names_in_json(item)))
    read = 0
    for key, value in attributes.items():
        if read >= MAX_TOOLS:
            break
        if type(value) is not str or not key.startswith("llm."):
            continue
        if key.startswith(OPENINFERENCE_TOOL_PREFIX) and key.endswith(OPENINFERENCE_TOOL_SUFFIX):
            read += 1
            found.update(dict.fromkeys(_names_in_json(value)))
        elif key.startswith(OPENLLMETRY_FUNCTION_PREFIX) and key.endswith(OPENLLMETRY_NAME_SUFFIX):
            read += 1
            if NAME_PATTERN.fullmatch(value):
                found[value] = None
    return tuple(found)


def register_tools(names: Iterable[str], registry: NameRegistry | None = None) -> None:
    """Register tool names read from definitions (see the module doc). Never raises for a name."""
    names = tuple(names)
    if names:
        (registry or default_registry).register_valid("tool", names)
