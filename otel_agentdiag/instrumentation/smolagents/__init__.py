"""smolagents: the names its agents declare, registered as code (its spans come from OpenInference's instrumentor).

::

    from openinference.instrumentation.smolagents import SmolagentsInstrumentor as Traces
    from otel_agentdiag.instrumentation.smolagents import SmolagentsInstrumentor

    Traces().instrument(tracer_provider=diag.tracer_provider)  # the spans (mapped by our OpenInference adapter)
    SmolagentsInstrumentor().instrument()                      # the names

``openinference-instrumentation-smolagents`` traces the loop (run, steps, model calls, tool calls); the names on
its spans are data to our policy, so without this instrumentor the agent and its tools leave as ``_OTHER``
unless the user registers them (``register_names``). This one wraps smolagents' public ``MultiStepAgent.run``
and, before each run, registers the names the agent's definitions declare: its ``name`` (and its class name,
which OpenInference uses for an unnamed agent), its tools' names and its managed agents' (which the model calls
as tools), recursively. A name that fails the public-safety check is not registered. Zero-code: the entry point
``agentdiag_smolagents`` loads it beside OpenInference's ``smolagents``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from wrapt import wrap_function_wrapper

from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation._instrumentor import Instrumentor
from otel_agentdiag.instrumentation._unwrap import unwrap_ours
from otel_agentdiag.instrumentation.smolagents.package import _instruments

__all__ = ["SmolagentsInstrumentor", "declared_names"]

_logger = logging.getLogger(__name__)
_MAX_DEPTH = 8
"""Managed agents looked through (a deeper hierarchy is a loop or a mistake)."""


def _agents(agent: Any, depth: int = 0, seen: set[int] | None = None) -> Iterator[Any]:
    """``agent`` and its managed agents, recursively, each once."""
    seen = set() if seen is None else seen
    if agent is None or id(agent) in seen or depth > _MAX_DEPTH:
        return
    seen.add(id(agent))
    yield agent
    managed = getattr(agent, "managed_agents", None)
    if isinstance(managed, dict):
        for child in list(managed.values()):
            yield from _agents(child, depth + 1, seen)


def declared_names(agent: Any) -> tuple[list[str], list[str]]:
    """(agent names, tool names) an agent's definitions declare: each agent's ``name`` and class name; its tools'
    names and its managed agents' names (called as tools)."""
    agents: list[str] = []
    tools: list[str] = []
    for each in _agents(agent):
        for name in (getattr(each, "name", None), type(each).__name__):
            if isinstance(name, str) and name not in agents:
                agents.append(name)
        for table in (getattr(each, "tools", None), getattr(each, "managed_agents", None)):
            if isinstance(table, dict):
                tools.extend(name for name in table if isinstance(name, str) and name not in tools)
    return agents, tools


def _register_then_run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    with handle_internal_errors("registering a smolagents agent's names"):
        agents, tools = declared_names(instance)
        default_registry.register_valid("agent", agents)
        default_registry.register_valid("tool", tools)
    return wrapped(*args, **kwargs)


class SmolagentsInstrumentor(Instrumentor):
    """Registers the names smolagents agents declare (see the module doc); makes no span of its own."""

    _wrapped = False

    _instruments = _instruments

    def _instrument(self, **kwargs: Any) -> None:
        from smolagents.agents import MultiStepAgent  # type: ignore[import-untyped,unused-ignore]

        try:
            wrap_function_wrapper(MultiStepAgent, "run", _register_then_run)
        except Exception as exc:  # noqa: BLE001 - an unknown layout: names stay data, never a failure
            _logger.warning("otel-agentdiag: smolagents names not registered (%s)", type(exc).__name__)
            return
        self._wrapped = True

    def _uninstrument(self, **kwargs: Any) -> None:
        if not self._wrapped:
            return
        from smolagents.agents import MultiStepAgent  # type: ignore[import-untyped,unused-ignore]

        unwrap_ours(MultiStepAgent, "run", _register_then_run)
        self._wrapped = False
