"""Uninstrumenting takes off our wrapper only, wherever another instrumentor's wrapper sits around it.

OpenTelemetry's ``unwrap`` replaces a method with its outermost wrapper's ``__wrapped__``: after ours and then a
peer's instrumentor wrapped the same method, it removed the peer's wrapper and left ours tracing. The unit tests
use a real class and real ``wrapt`` wrappers; the last test drives our OpenAI instrumentor beside OpenLLMetry's
(``opentelemetry-instrumentation-openai``, which wraps the same ``Completions.create``) over the real ``openai``
client and the fake model server.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import wrapt

from otel_agentdiag.instrumentation._unwrap import unwrap_ours


def _tagging(tag: str, calls: list[str]) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        calls.append(tag)
        return wrapped(*args, **kwargs)

    return wrapper


def _target() -> type:
    class Target:
        def method(self, x: int) -> int:
            return x + 1

    return Target


def test_ours_alone_restores_the_very_function() -> None:
    target, calls = _target(), []
    original = vars(target)["method"]
    ours = _tagging("ours", calls)
    wrapt.wrap_function_wrapper(target, "method", ours)
    assert unwrap_ours(target, "method", ours) is True
    assert vars(target)["method"] is original
    assert target().method(1) == 2 and calls == []


@pytest.mark.parametrize("ours_first", [True, False], ids=["peer-above-ours", "ours-above-peer"])
def test_the_peer_keeps_its_wrapper_in_either_order(ours_first: bool) -> None:
    target, calls = _target(), []
    ours, peer = _tagging("ours", calls), _tagging("peer", calls)
    for wrapper in (ours, peer) if ours_first else (peer, ours):
        wrapt.wrap_function_wrapper(target, "method", wrapper)
    assert target().method(1) == 2 and sorted(calls) == ["ours", "peer"]
    calls.clear()
    assert unwrap_ours(target, "method", ours) is True
    assert target().method(1) == 2 and calls == ["peer"]
    assert unwrap_ours(target, "method", ours) is False  # once only
    top = vars(target)["method"]
    assert isinstance(top, wrapt.FunctionWrapper) and not isinstance(top.__wrapped__, wrapt.FunctionWrapper)


def test_a_wrapper_that_is_not_wrapt_above_ours_leaves_ours_on() -> None:
    target, calls = _target(), []
    ours = _tagging("ours", calls)
    wrapt.wrap_function_wrapper(target, "method", ours)
    inner = vars(target)["method"]

    @functools.wraps(inner)
    def plain(self: Any, x: int) -> int:
        calls.append("plain")
        return inner(self, x)

    target.method = plain  # type: ignore[attr-defined]
    assert unwrap_ours(target, "method", ours) is False
    assert target().method(1) == 2 and calls == ["plain", "ours"]  # nothing broken, nothing half-removed


def test_a_method_never_wrapped_is_left_alone() -> None:
    target = _target()
    original = vars(target)["method"]
    assert unwrap_ours(target, "method", _tagging("ours", [])) is False
    assert unwrap_ours(target, "missing", _tagging("ours", [])) is False
    assert vars(target)["method"] is original


_PEER_APP = """
import json, sys, warnings
sys.path.insert(0, sys.argv[1])
warnings.simplefilter("ignore", DeprecationWarning)  # OpenLLMetry's modules use a Pydantic v1-style config
import openai
from fakes.openai_server import FakeModelServer
from opentelemetry.instrumentation.openai import OpenAIInstrumentor as Peer
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor as Ours

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
Ours().instrument(tracer_provider=provider)
Peer().instrument(tracer_provider=provider)  # wraps the same Completions.create, around ours
seen = []
with FakeModelServer() as server:
    client = openai.OpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
    for step in ("both", "ours_off"):
        exporter.clear()
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        seen.append(sorted({s.instrumentation_scope.name for s in exporter.get_finished_spans()}))
        if step == "both":
            Ours().uninstrument()
print(json.dumps(seen))
"""


def test_uninstrumenting_ours_beside_openllmetry_keeps_openllmetry_tracing() -> None:
    """In a fresh interpreter: OpenLLMetry's own ``uninstrument()`` leaves its wrapper on (its bug, not ours),
    which must not leak into this process's other tests."""
    pytest.importorskip("opentelemetry.instrumentation.openai")
    tests = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", _PEER_APP, str(tests)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    both, ours_off = json.loads(done.stdout.strip().splitlines()[-1])
    assert any(n.startswith("otel_agentdiag") for n in both), both
    assert any(n.startswith("opentelemetry.instrumentation.openai") for n in both), both
    assert not any(n.startswith("otel_agentdiag") for n in ours_off), ours_off
    assert any(n.startswith("opentelemetry.instrumentation.openai") for n in ours_off), ours_off
