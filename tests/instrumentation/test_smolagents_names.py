"""The smolagents names instrumentor, on real ``smolagents`` agents: the names an agent's definitions declare
(its name, class name, tools, managed agents, recursively) are registered before its run, and ``uninstrument()``
takes its wrapper off. The spans themselves come from OpenInference's instrumentor (tests/e2e/test_smolagents.py;
zero-code in tests/e2e/test_zero_code_frameworks.py)."""

from __future__ import annotations

from typing import Any

import pytest

smolagents = pytest.importorskip("smolagents", reason="smolagents (the `smolagents` extra) is not installed")

from smolagents import OpenAIServerModel, ToolCallingAgent, tool  # noqa: E402
from smolagents.agents import MultiStepAgent  # noqa: E402
from wrapt import FunctionWrapper  # noqa: E402

from otel_agentdiag._internal.names import default_registry  # noqa: E402
from otel_agentdiag.instrumentation.smolagents import SmolagentsInstrumentor, declared_names  # noqa: E402


@tool
def forecast_lookup(city: str) -> str:
    """Looks up a forecast.

    Args:
        city: the city.
    """
    return "sunny"


@tool
def currency_rate(code: str) -> str:
    """Looks up a rate.

    Args:
        code: the currency code.
    """
    return "1.0"


@tool
def seasonal_outlook(region: str) -> str:
    """Looks up a seasonal outlook.

    Args:
        region: the region.
    """
    return "mild"


def _model() -> Any:
    return OpenAIServerModel(model_id="gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key="unused")


def test_the_declared_names_of_an_agent_and_its_managed_agents() -> None:
    helper = ToolCallingAgent(tools=[currency_rate], model=_model(), name="money_agent", description="rates")
    agent = ToolCallingAgent(tools=[forecast_lookup], model=_model(), name="trip_agent", managed_agents=[helper])
    agents, tools = declared_names(agent)
    assert agents == ["trip_agent", "ToolCallingAgent", "money_agent"]
    # the managed agent is called as a tool by its name; smolagents adds its own final_answer tool
    assert set(tools) == {"forecast_lookup", "final_answer", "money_agent", "currency_rate"}


def test_a_managed_agent_loop_is_read_once() -> None:
    agent = ToolCallingAgent(tools=[forecast_lookup], model=_model(), name="loop_agent")
    agent.managed_agents = {"loop_agent": agent}  # a mistake a user can make: never a hang
    assert declared_names(agent)[0] == ["loop_agent", "ToolCallingAgent"]


def test_the_run_registers_them_and_uninstrument_removes_the_wrapper() -> None:
    agent = ToolCallingAgent(tools=[seasonal_outlook], model=_model(), name="outlook_agent_7f3", max_steps=1)
    assert not default_registry.is_registered("agent", "outlook_agent_7f3")  # names no other test uses
    assert not default_registry.is_registered("tool", "seasonal_outlook")
    SmolagentsInstrumentor().instrument()
    try:
        assert isinstance(vars(MultiStepAgent)["run"], FunctionWrapper)
        with pytest.raises(Exception):  # noqa: B017 - the model server is closed: the agent's own error, unchanged
            agent.run("hello", max_steps=1)
    finally:
        SmolagentsInstrumentor().uninstrument()
    assert not isinstance(vars(MultiStepAgent)["run"], FunctionWrapper)
    assert default_registry.is_registered("agent", "outlook_agent_7f3")
    assert default_registry.is_registered("tool", "seasonal_outlook")
