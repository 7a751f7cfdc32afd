"""Both instrumentors, with no provider given, trace into the pipeline ``configure()`` built (here not the global
one) and land in a real SQLite store: every call shape, with a sentinel in every value sent, and none stored."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer

import otel_agentdiag
from otel_agentdiag.instrumentation.anthropic import AnthropicInstrumentor
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor
from otel_agentdiag.storage import SpanStore, StoredSpan

CONTENT = f"{fake.SENTINEL_PROMPT} {fake.SENTINEL_API_KEY} /home/alice/.ssh/id_rsa https://x.test/?token=1"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[StoredSpan]]]:
    store = tmp_path_factory.mktemp("pipeline") / "traces.db"
    diag = otel_agentdiag.configure(
        service_name="pipeline-test",
        store=store,
        hash_key=b"442f18475e673d6886dacd45328a7ec155d9a207f69c7098cd618ac0ac152443",
        set_global=False,
    )
    OpenAIInstrumentor().instrument()  # no provider: the one configure() built
    AnthropicInstrumentor().instrument()
    try:
        with FakeModelServer() as server:
            _drive(server)
    finally:
        OpenAIInstrumentor().uninstrument()
        AnthropicInstrumentor().uninstrument()
        gc.collect()
        diag.shutdown()
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
    yield store, spans


def _drive(server: FakeModelServer) -> None:
    messages: list[Any] = [{"role": "user", "content": CONTENT}]
    oai = openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=2)
    claude = anthropic.Anthropic(
        api_key=fake.SENTINEL_API_KEY, base_url=server.anthropic_base_url, max_retries=2, open_telemetry=False
    )
    with otel_agentdiag.agent_run("pipeline-agent", conversation_id=fake.SENTINEL_CONVERSATION):
        server.fail_next(429)
        oai.chat.completions.create(model="gpt-4o-mini", messages=messages, user=fake.SENTINEL_END_USER)
        for _ in oai.chat.completions.create(
            model="gpt-4o-mini", messages=messages, stream=True, stream_options={"include_usage": True}
        ):
            pass
        oai.responses.create(model="gpt-4o-mini", input=CONTENT, instructions=fake.SENTINEL_INSTRUCTIONS)
        oai.embeddings.create(model="text-embedding-3-small", input=fake.SENTINEL_EMBEDDING_INPUT)
        with pytest.raises(openai.BadRequestError):
            oai.chat.completions.create(model=fake.ERROR_MODEL, messages=messages)
        claude.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=messages, system=fake.SENTINEL_SYSTEM)
        with claude.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=messages) as stream:
            stream.get_final_message()
        with pytest.raises(anthropic.NotFoundError):
            claude.messages.create(model=fake.ERROR_MODEL, max_tokens=64, messages=messages)

        async def async_calls() -> None:
            aoai = openai.AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
            await aoai.chat.completions.create(model="gpt-4o-mini", messages=messages)

        asyncio.run(async_calls())


def test_every_call_is_one_llm_span_in_the_store(stored: tuple[Path, list[StoredSpan]]) -> None:
    _, spans = stored
    llm = [s for s in spans if s.kind == "llm"]
    assert sorted(s.name for s in llm) == sorted(
        ["chat gpt-4o-mini"] * 4
        + ["embeddings text-embedding-3-small", f"chat {fake.ERROR_MODEL}"]
        + ["chat claude-haiku-4-5"] * 2
        + [f"chat {fake.ERROR_MODEL}"]
    )
    assert len({s.trace_id for s in spans}) == 1  # inside the run: one trace
    run = next(s for s in spans if s.kind == "run")
    conversation = run.attributes["gen_ai.conversation.id"]
    assert all(s.attributes.get("gen_ai.conversation.id") == conversation for s in llm)


def test_usage_and_attempts_survive_the_local_policy(stored: tuple[Path, list[StoredSpan]]) -> None:
    _, spans = stored
    first = next(s for s in spans if s.kind == "llm" and len(s.events) == 2)  # the retried call
    assert first.attributes["gen_ai.usage.input_tokens"] == fake.ANSWER_USAGE.prompt_tokens
    assert [e["attributes"].get("http.response.status_code") for e in first.events] == [429, 200]
    streamed = [s for s in spans if s.attributes.get("agentdiag.stream.end") == "exhausted"]
    assert len(streamed) == 2
    claude = next(s for s in spans if s.name == "chat claude-haiku-4-5" and "gen_ai.request.stream" not in s.attributes)
    whole = (
        fake.ANTHROPIC_USAGE.input_tokens
        + fake.ANTHROPIC_USAGE.cache_read_input_tokens
        + fake.ANTHROPIC_USAGE.cache_creation_input_tokens
    )
    assert claude.attributes["gen_ai.usage.input_tokens"] == whole
    assert claude.attributes["gen_ai.response.id"].startswith("hmac-sha256:")  # an id: hashed


def test_no_sentinel_anywhere_in_the_store(stored: tuple[Path, list[StoredSpan]]) -> None:
    store, _ = stored
    secrets = (*fake.SENTINELS, "/home/alice", "token=1")
    for path in store.parent.iterdir():
        blob = path.read_bytes()
        assert not [s for s in secrets if s.encode() in blob or s.lower().encode() in blob.lower()], path.name
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert "pipeline-agent" in dump  # the search can find what is allowed
    assert not [s for s in secrets if s in dump]
