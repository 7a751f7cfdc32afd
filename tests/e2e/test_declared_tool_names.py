"""End to end: a hand-written function-calling loop shows its real tool names with no ``register_names`` (issue 32).

The tools a request offers the model are code: the OpenAI and Anthropic instrumentors register their names as the
call starts, so the ``tool_call(tc.function.name)`` spans that follow (the names taken from the model's answer, as
every tutorial does) keep them. A name the model answers with that no request offered stays ``_OTHER``, and so does
an offered name that fails the public-safety check (a credential): it reaches no destination, and the warning names
the kind, never the name. Also: ``with_raw_response`` calls carry their usage and cost.

Real ``openai`` and ``anthropic`` clients against the fake model server on 127.0.0.1, ``configure()`` to a real
SQLite store and a real OTLP receiver (strict policy).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic", reason="the `anthropic` extra is not installed")
pytest.importorskip("openai", reason="the `openai` extra is not installed")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the `otlp` extra is not installed")

import anthropic
import openai
from click.testing import CliRunner
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from fakes.secret_names import RECOGNISED
from otlp_receiver import OTLPReceiver

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.instrumentation.anthropic import AnthropicInstrumentor
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor
from otel_agentdiag.storage import SpanStore, StoredSpan


def unique(stem: str) -> str:
    """A tool name no other test of this process registered (the registry is process-wide)."""
    return f"{stem}_{secrets.token_hex(4)}"


class AnsweringServer(FakeModelServer):
    """Answers the first call of a conversation with calls of ``self.answer_names`` (in one message), then text."""

    answer_names: tuple[str, ...] = ()

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        if any(isinstance(m, dict) and m.get("role") == "tool" for m in body.get("messages") or []):
            return super().chat_completion({k: v for k, v in body.items() if k != "tools"})
        out = super().chat_completion(body)
        (call,) = out["choices"][0]["message"]["tool_calls"]
        out["choices"][0]["message"]["tool_calls"] = [
            {**call, "id": f"{call['id']}-{i}", "function": {"name": name, "arguments": fake.TOOL_ARGUMENTS}}
            for i, name in enumerate(self.answer_names)
        ]
        return out

    def anthropic_message(self, body: dict[str, Any]) -> dict[str, Any]:
        out = super().anthropic_message(body)
        blocks = [b for b in out["content"] if b.get("type") == "tool_use"]
        if blocks:
            out["content"] = [
                {**blocks[0], "id": f"{blocks[0]['id']}-{i}", "name": n} for i, n in enumerate(self.answer_names)
            ]
        return out


@pytest.fixture
def server() -> Iterator[AnsweringServer]:
    with AnsweringServer() as running:
        yield running


@pytest.fixture
def pipeline(tmp_path: Path, clean_env: None) -> Iterator[tuple[Any, OTLPReceiver, Path]]:
    store = tmp_path / "traces.db"
    with OTLPReceiver() as receiver:
        diag = agentdiag.configure(
            service_name="loop",
            store=store,
            otlp_endpoint=receiver.endpoint,
            hash_key=secrets.token_bytes(32),
            set_global=False,
        )
        OpenAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
        AnthropicInstrumentor().instrument(tracer_provider=diag.tracer_provider)
        try:
            yield diag, receiver, store
        finally:
            OpenAIInstrumentor().uninstrument()
            AnthropicInstrumentor().uninstrument()
            diag.shutdown()
        assert receiver.errors == []


def openai_tools(*names: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": fake.SENTINEL_TOOL_DESCRIPTION,
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
        for name in names
    ]


def openai_loop(server: FakeModelServer, offered: list[dict[str, Any]], *, raw: bool = False) -> list[str]:
    """The tutorial loop: offer the tools, run each tool call the model answers with under ``tool_call(name)``."""
    client = openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
    messages: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
    called: list[str] = []
    with agentdiag.agent_run("loop-agent", conversation_id=fake.SENTINEL_CONVERSATION):
        for i in range(3):
            with agentdiag.iteration(i):
                if raw:
                    response = client.chat.completions.with_raw_response.create(
                        model="gpt-4o-mini", messages=messages, tools=offered
                    ).parse()
                else:
                    response = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=offered)
                message = response.choices[0].message
                if not message.tool_calls:
                    return called
                messages.append(message.model_dump(exclude_none=True))
                for tc in message.tool_calls:
                    with agentdiag.tool_call(tc.function.name, call_id=tc.id):
                        called.append(tc.function.name)
                    messages.append({"role": "tool", "tool_call_id": tc.id, "content": fake.SENTINEL_TOOL_RESULT})
    return called


def stored(store: Path) -> list[StoredSpan]:
    with SpanStore(store, create=False) as reader:
        return [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]


def tool_names(spans: list[StoredSpan]) -> list[str]:
    return sorted(s.name for s in spans if s.kind == sc.KIND_TOOL)


def test_openai_loop_shows_the_offered_tool_names(server: AnsweringServer, pipeline: Any) -> None:
    diag, receiver, store = pipeline
    weather, city, invented = unique("get_weather"), unique("lookup_city"), unique("delete_everything")
    server.answer_names = (weather, city, invented)  # the third was never offered
    assert openai_loop(server, openai_tools(weather, city)) == [weather, city, invented]
    diag.shutdown()
    spans = stored(store)
    assert tool_names(spans) == sorted([f"execute_tool {weather}", f"execute_tool {city}", "execute_tool _OTHER"])
    other = next(s for s in spans if s.name == "execute_tool _OTHER")
    assert other.attributes["agentdiag.redaction.unregistered_name"] >= 1  # why it reads _OTHER
    shown = CliRunner().invoke(cli, ["show", other.trace_id, "--store", str(store)], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    line = next(text for text in shown.output.splitlines() if "execute_tool _OTHER" in text)
    assert "_OTHER=undeclared name" in line  # why, beside it; never the name
    assert invented not in shown.output
    exported = {s.name for s in receiver.spans()}
    assert {f"execute_tool {weather}", f"execute_tool {city}", "execute_tool _OTHER"} <= exported
    assert not any(invented in s.name for s in receiver.spans())


def test_anthropic_loop_shows_the_offered_tool_names(server: AnsweringServer, pipeline: Any) -> None:
    diag, _, store = pipeline
    lookup, invented = unique("lookup_city"), unique("rm_rf")
    server.answer_names = (lookup, invented)
    client = anthropic.Anthropic(
        api_key=fake.SENTINEL_API_KEY, base_url=server.anthropic_base_url, open_telemetry=False
    )
    offered = [{"name": lookup, "description": fake.SENTINEL_TOOL_DESCRIPTION, "input_schema": {"type": "object"}}]
    with agentdiag.agent_run("loop-agent"):
        message = client.messages.create(
            model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "?"}], tools=offered
        )
        for block in message.content:
            if block.type == "tool_use":
                with agentdiag.tool_call(block.name, call_id=block.id):
                    pass
    diag.shutdown()
    assert tool_names(stored(store)) == sorted([f"execute_tool {lookup}", "execute_tool _OTHER"])


def test_raw_responses_carry_usage_and_cost(server: AnsweringServer, pipeline: Any) -> None:
    """``with_raw_response`` (CrewAI's path to OpenAI; also Anthropic's): the usage of the body the SDK read."""
    diag, _, store = pipeline
    weather = unique("get_weather")
    server.answer_names = (weather,)
    assert openai_loop(server, openai_tools(weather), raw=True) == [weather]
    claude = anthropic.Anthropic(
        api_key=fake.SENTINEL_API_KEY, base_url=server.anthropic_base_url, open_telemetry=False
    )
    raw = claude.messages.with_raw_response.create(
        model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "?"}]
    )
    assert raw.parse().type == "message"  # the caller's raw response still parses
    diag.shutdown()
    llm = [s for s in stored(store) if s.kind == sc.KIND_LLM]
    assert len(llm) == 3
    for span in llm:
        assert span.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0, span.name
        assert span.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0, span.name
        assert span.attributes[sc.AGENTDIAG_COST_USD] > 0, span.name
        assert span.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS], span.name


@pytest.mark.parametrize("shape", sorted(RECOGNISED))
def test_an_offered_credential_is_never_a_name(
    shape: str, server: AnsweringServer, pipeline: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool definition whose name is a credential: refused by the public-safety check, in no destination."""
    diag, receiver, store = pipeline
    secret = RECOGNISED[shape]()
    server.answer_names = (secret,)
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        openai_loop(server, openai_tools(secret))
        diag.shutdown()
    assert tool_names(stored(store)) == ["execute_tool _OTHER"]
    needle = secret.encode()
    for path in store.parent.iterdir():
        assert needle not in path.read_bytes(), path.name
    for body in receiver.raw_bodies:
        assert needle not in body
    assert all(secret not in record.getMessage() for record in caplog.records)


def test_definitions_of_every_shape_are_read() -> None:
    from otel_agentdiag._internal.declared import tool_names, tool_names_in_attributes

    chat = openai_tools("a_tool")
    responses = [{"type": "function", "name": "b_tool", "parameters": {}}, {"type": "web_search"}]
    claude = [{"name": "c_tool", "input_schema": {}}]
    assert tool_names(chat + responses + claude) == ("a_tool", "b_tool", "c_tool")
    assert tool_names("a_tool") == () and tool_names(None) == () and tool_names([{"name": "has space"}]) == ()
    attributes = {
        "gen_ai.tool.definitions": json.dumps([{"type": "function", "name": "d_tool"}]),
        "llm.tools.0.tool.json_schema": json.dumps(openai_tools("e_tool")[0]),
        "llm.request.functions.0.name": "f_tool",
        "llm.request.functions.1.name": "not a name",
        "llm.tools.1.tool.json_schema": "{not json",
    }
    assert sorted(tool_names_in_attributes(attributes)) == ["d_tool", "e_tool", "f_tool"]


def test_an_undeclared_name_is_warned_about_once_per_kind(
    server: AnsweringServer, pipeline: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first tool name that leaves as _OTHER logs one warning that names the kind and the fix, never the name;
    later ones log nothing (the counter on each span, and `show`, still say why)."""
    from otel_agentdiag.redaction import undeclared

    monkeypatch.setattr(undeclared, "_warned", set())
    diag, _, _ = pipeline
    invented = unique("invented_tool")
    server.answer_names = (invented,)
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        openai_loop(server, openai_tools(unique("offered")))
        openai_loop(server, openai_tools(unique("offered")))
        diag.shutdown()
    messages = [r.getMessage() for r in caplog.records if "no code declared" in r.getMessage()]
    assert len(messages) == 1
    assert "a tool name" in messages[0] and "register_names(tools=" in messages[0]
    assert all(invented not in r.getMessage() for r in caplog.records)
