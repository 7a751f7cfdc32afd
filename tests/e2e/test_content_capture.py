"""End to end: with content capture on, content reaches the local ``span_content`` table, losslessly, and no
other output: not the OTLP branch (a real receiver on 127.0.0.1), not the stored spans, not ``push`` (a second
real receiver), not ``export --format bundle|otlp-json|jaeger-json``, not a store written under the strict
policy. What capture always excludes (credentials, headers, environment, URL query strings and user-info, big
media) reaches nothing at all, not even the store file's bytes.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fakes import openai_server as fake
from fakes.openai_server import FakeOpenAIServer
from otlp_receiver import OTLPReceiver

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.content import CapturedException, Elided, decode, snapshot
from otel_agentdiag.storage import SpanStore

HASH_KEY = "2978eb22b849b8956a0ea60303487a78701d99a8e169cf050a76b48763f63a62"
_tag = uuid.uuid4().hex[:12]

# Content: kept locally, exactly, and nowhere else.
PROMPT = f"SENTINEL_PROMPT_{_tag}"
SYSTEM = f"SENTINEL_SYSTEM_{_tag}"
ANSWER = f"SENTINEL_ANSWER_{_tag}"
TOOL_DEF = f"SENTINEL_TOOLDEF_{_tag}"
TOOL_ARG = f"SENTINEL_TOOLARG_{_tag}"
TOOL_RESULT = f"SENTINEL_RESULT_{_tag}"
TOOL_ERROR = f"SENTINEL_TOOLERROR_{_tag}"
RUN_INPUT = f"SENTINEL_RUNINPUT_{_tag}"
CONTENT = (PROMPT, SYSTEM, ANSWER, TOOL_DEF, TOOL_ARG, TOOL_RESULT, TOOL_ERROR, RUN_INPUT)

# Excluded even when capturing: reach no output, the store file included.
API_KEY = f"sk-SENTINELKEY{_tag}"
HEADER = f"SENTINEL_HEADER_{_tag}"
QUERY = f"SENTINEL_QUERY_{_tag}"
USERINFO = f"SENTINEL_USERINFO_{_tag}"
ENV_VALUE = f"SENTINEL_ENV_{_tag}"
MEDIA = base64.b64encode(f"SENTINEL_MEDIA_{_tag}".encode() * 2000).decode()
EXCLUDED = (API_KEY, HEADER, QUERY, USERINFO, ENV_VALUE, MEDIA[:64])
CLIENT_CONTENT = (fake.SENTINEL_PROMPT, fake.SENTINEL_OUTPUT)
"""What the instrumented OpenAI client call sent and got back."""
SPANS = 6
"""run, iteration, two LLM calls (by hand and by the client), two tool calls."""

# Values JSON cannot hold, which the lossless form must keep exactly.
AWKWARD = {
    "big": 2**200 + 1,
    "nan": math.nan,
    "neg_inf": -math.inf,
    "bytes": b"\x00\xffraw",
    "tuple": (1, "two"),
    "set": frozenset({3, 4}),
    (1, 2): "non-string key",
    "surrogate": "\udc80",
}

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "AGENTDIAG_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SENTINEL_ENV_VAR", ENV_VALUE)


def run_agent(client: Any = None) -> dict[str, Any]:
    """One run through the public API, with content in every role, and (given ``client``, a real OpenAI
    client on the fake model server) one instrumented client call whose prompt and answer carry the fake
    server's sentinels. Returns what was captured, by role."""
    agentdiag.register_names(tools=["lookup"])
    messages = [{"role": "user", "content": PROMPT}]
    tools = [{"name": "lookup", "description": TOOL_DEF}]
    arguments = {
        "query": TOOL_ARG,
        "api_key": API_KEY,
        "headers": {"Authorization": f"Bearer {HEADER}"},
        "env": os.environ,
        "link": f"https://{USERINFO}:pw@example.com/search?q={QUERY}",
        "image": f"data:image/png;base64,{MEDIA}",
        "awkward": AWKWARD,
    }
    with agentdiag.agent_run("content-agent", conversation_id=f"conv-{_tag}") as run:
        run.record_content(input_messages=RUN_INPUT)
        with agentdiag.iteration(0):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_content(system_instructions=SYSTEM, input_messages=messages, tool_definitions=tools)
                call.record_content(output_messages=[{"role": "assistant", "content": ANSWER}])
                call.record_response(input_tokens=12, output_tokens=3)
            messages.append({"role": "assistant", "content": "later change, not captured"})
            if client is not None:
                answer = client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": fake.SENTINEL_PROMPT}]
                )
                assert answer.choices[0].message.content == fake.ANSWER_TEXT
            with agentdiag.tool_call("lookup", call_id=f"call-{_tag}", arguments=arguments) as tool:
                tool.record_result({"result": TOOL_RESULT})
            with pytest.raises(RuntimeError):
                with agentdiag.tool_call("lookup", call_id=f"call2-{_tag}") as failing:
                    error = RuntimeError(TOOL_ERROR)
                    failing.record_result(error)
                    raise error
    return {"arguments": arguments, "messages": [{"role": "user", "content": PROMPT}], "tools": tools}


def store_bytes(path: Path) -> bytes:
    """Every byte of the store: the database file and any WAL/SHM beside it."""
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


def cli_run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def by_span_name(path: Path) -> dict[str, dict[str, Any]]:
    """``{span label: {role: decoded value}}``; a name's second span (by start) is labelled ``name#2``."""
    with SpanStore(path, create=False) as store:
        traces = store.list_traces()
        if not traces:
            return {}
        (trace,) = traces
        labels: dict[str, str] = {}
        for span in store.get_trace(trace.trace_id):
            n = sum(1 for label in labels.values() if label.split("#")[0] == span.name)
            labels[span.span_id] = span.name if n == 0 else f"{span.name}#{n + 1}"
        found: dict[str, dict[str, Any]] = {}
        for item in store.trace_content(trace.trace_id):
            found.setdefault(labels[item.span_id], {})[item.role] = decode(item.lossless)
        return found


def spans_table_text(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name, attributes, events, links, coalesce(scope, '') FROM spans").fetchall()
        resources = conn.execute("SELECT attributes FROM resources").fetchall()
    finally:
        conn.close()
    return "\n".join("\n".join(map(str, row)) for row in [*rows, *resources])


def assert_absent(label: str, data: bytes | str, sentinels: tuple[str, ...]) -> None:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    leaked = [s for s in sentinels if s in text]
    assert leaked == [], f"{label} carries {leaked}"


def test_content_reaches_the_local_table_only(tmp_path: Path, receiver: OTLPReceiver) -> None:
    from openai import OpenAI

    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    path = tmp_path / "traces.db"
    instrumentor = OpenAIInstrumentor()
    with (
        FakeOpenAIServer() as server,
        agentdiag.configure(
            store=path, otlp_endpoint=receiver.endpoint, hash_key=HASH_KEY, set_global=False, capture_content=True
        ) as diag,
    ):
        instrumentor.instrument(tracer_provider=diag.tracer_provider)
        try:
            client = OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)
            given = run_agent(client)
        finally:
            instrumentor.uninstrument()
        assert diag.force_flush()
    assert receiver.wait_for_spans(SPANS, timeout=10)

    # Present, exactly, in the payload table.
    content = by_span_name(path)
    llm = content["chat gpt-4o-mini"]
    assert llm[sc.CONTENT_SYSTEM_INSTRUCTIONS] == SYSTEM
    assert llm[sc.CONTENT_INPUT_MESSAGES] == given["messages"]  # as it was when captured
    assert llm[sc.CONTENT_TOOL_DEFINITIONS] == given["tools"]
    assert llm[sc.CONTENT_OUTPUT_MESSAGES] == [{"role": "assistant", "content": ANSWER}]
    assert content["invoke_agent content-agent"][sc.CONTENT_INPUT_MESSAGES] == RUN_INPUT
    tool = content["execute_tool lookup"]
    assert tool[sc.CONTENT_TOOL_RESULT] == {"result": TOOL_RESULT}
    stored_args = tool[sc.CONTENT_TOOL_ARGUMENTS]
    assert stored_args["query"] == TOOL_ARG
    assert stored_args["api_key"] == Elided("credential")
    assert stored_args["headers"] == Elided("headers")
    assert stored_args["env"] == Elided("environment")
    assert stored_args["link"] == "https://[redacted]@example.com/search?[redacted]"
    media = stored_args["image"]
    assert isinstance(media, Elided) and media.reason == "media"
    expected_media = f"data:image/png;base64,{MEDIA}".encode()
    assert (media.size, media.sha256) == (len(expected_media), hashlib.sha256(expected_media).hexdigest())
    # Lossless: the awkward values come back as they went in (the snapshot is the value captured).
    assert repr(stored_args["awkward"]) == repr(snapshot(AWKWARD))
    assert stored_args["awkward"]["big"] == 2**200 + 1 and math.isnan(stored_args["awkward"]["nan"])
    assert stored_args["awkward"][(1, 2)] == "non-string key" and stored_args["awkward"]["tuple"] == (1, "two")
    assert stored_args["awkward"]["bytes"] == b"\x00\xffraw"
    client_call = content["chat gpt-4o-mini#2"]
    assert client_call[sc.CONTENT_INPUT_MESSAGES] == [{"role": "user", "content": fake.SENTINEL_PROMPT}]
    assert fake.SENTINEL_OUTPUT in repr(client_call[sc.CONTENT_OUTPUT_MESSAGES])
    failed = content["execute_tool lookup#2"]
    assert failed == {sc.CONTENT_TOOL_RESULT: CapturedException("RuntimeError", TOOL_ERROR, (TOOL_ERROR,))}

    # Absent from the spans themselves, from what went over OTLP, and (excluded values) from every byte stored.
    assert_absent("the stored spans", spans_table_text(path), CONTENT + CLIENT_CONTENT + EXCLUDED)
    for body in [*receiver.raw_bodies, *receiver.decoded_bodies]:
        assert_absent("an OTLP request", body, CONTENT + CLIENT_CONTENT + EXCLUDED)
    assert_absent("the store file", store_bytes(path), (*EXCLUDED, fake.SENTINEL_API_KEY))
    assert os.stat(path).st_mode & 0o777 == 0o600

    # Absent from every way the store's spans leave it.
    for fmt in ("bundle", "otlp-json", "jaeger-json"):
        out = tmp_path / f"export.{fmt}"
        result = cli_run("export", "--store", path, "--format", fmt, "--out", out)
        assert result.exit_code == 0, result.output
        assert_absent(f"export --format {fmt}", out.read_bytes(), CONTENT + CLIENT_CONTENT + EXCLUDED)
    with OTLPReceiver() as pushed:
        result = cli_run("push", "--store", path, "--endpoint", pushed.endpoint)
        assert result.exit_code == 0, result.output
        assert pushed.span_count == SPANS
        for body in [*pushed.raw_bodies, *pushed.decoded_bodies]:
            assert_absent("push", body, CONTENT + CLIENT_CONTENT + EXCLUDED)
        assert pushed.errors == []


def test_the_strict_policy_stores_no_content_in_spans(tmp_path: Path) -> None:
    path = tmp_path / "strict.db"
    with agentdiag.configure(
        store=path, local_policy="strict", hash_key=HASH_KEY, set_global=False, capture_content=True
    ):
        run_agent()
    assert_absent("spans under the strict policy", spans_table_text(path), CONTENT + EXCLUDED)
    assert by_span_name(path)["chat gpt-4o-mini"][sc.CONTENT_SYSTEM_INSTRUCTIONS] == SYSTEM


def test_without_capture_nothing_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "off.db"
    with agentdiag.configure(store=path, hash_key=HASH_KEY, set_global=False):
        run_agent()
    assert by_span_name(path) == {}
    assert_absent("the store file", store_bytes(path), CONTENT + EXCLUDED)
