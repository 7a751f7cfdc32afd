"""What a contract app (``tests/contract/apps/*.py``, run in a framework's own environment) shares: reading its
arguments, configuring the pipeline the way the suite's in-process setups are, the tools, and the sentinels.

Run as ``python APP STORE OTLP_ENDPOINT BASE_URL ANTHROPIC_BASE_URL NAMES_JSON`` with this folder and the checkout
on ``PYTHONPATH`` (``tests/isolated_envs.run_in``). Only the standard library, otel-agentdiag and the app's
framework are imported here: the environment has nothing else.
"""

from __future__ import annotations

import json
import secrets
import sys
from dataclasses import dataclass
from typing import Any

import otel_agentdiag

SENTINEL_PROMPT = "SENTINEL-PROMPT-7f3a"
SENTINEL_SYSTEM = "SENTINEL-SYSPROMPT-1c8d"
SENTINEL_TOOL_DESCRIPTION = "SENTINEL-TOOLDESC-52ae"
SENTINEL_TOOL_RESULT = "SENTINEL-TOOLRESULT-d4c7"
SENTINEL_CONVERSATION = "SENTINEL-CONV-2a6f"
SENTINEL_API_KEY = "sk-SENTINELKEY" + "Q7rT2vX9" * 4 + "z4"
"""The sentinels of ``tests/fakes/openai_server.py``, spelled again: the environment cannot import the tests'
fakes' dependencies (``tests/contract/test_contract.py`` checks they are the same)."""


@dataclass(frozen=True)
class Args:
    store: str
    endpoint: str
    base_url: str
    anthropic_base_url: str
    agent: str
    weather: str
    lookup: str


def args() -> Args:
    store, endpoint, base_url, anthropic_base_url, names = sys.argv[1:6]
    declared = json.loads(names)
    weather, lookup = declared["tools"]
    return Args(store, endpoint, base_url, anthropic_base_url, declared["agent"] or "weather_agent", weather, lookup)


def configure(a: Args, **kwargs: Any) -> Any:
    """The pipeline of every contract setup: the local store and the strict OTLP branch."""
    return otel_agentdiag.configure(
        service_name="contract",
        store=a.store,
        otlp_endpoint=a.endpoint,
        hash_key=secrets.token_bytes(32),
        set_global=kwargs.pop("set_global", False),
        **kwargs,
    )


def get_weather(city: str, unit: str = "celsius") -> str:
    return f"{SENTINEL_TOOL_RESULT}: sunny in {city}"


def lookup_city(city: str, unit: str = "celsius") -> str:
    raise ValueError(f"lookup failed for {SENTINEL_TOOL_RESULT}")
