"""An agent instrumented by a real OpenAI instrumentation (a third party's, or ours), exporting through
``configure()``.

Run by ``test_third_party.py`` in a subprocess (instrumentations patch the ``openai`` module for the whole
process and read their settings at import time, so each gets a fresh interpreter)::

    python third_party_app.py <instrumentation> <store path> <otlp endpoint> <fake openai base url> <raw dump>

``<instrumentation>`` is one of :data:`INSTRUMENTATIONS`. Content capture is switched to its most permissive
setting for every library before any of them is imported. The app drives the real ``openai`` client against
the fake server (``tests/fakes/openai_server.py``): a chat turn that asks for a tool, the tool run, the turn
that sends the tool's result back, two streamed chats (text with usage, and a tool call), an embeddings call,
a Responses API call and a call the server refuses. Every value it sends carries a sentinel.

Beside the pipeline ``configure()`` installs, an in-memory exporter on the same provider sees the spans as
the instrumentation made them (the control). After ``shutdown()`` the app writes them, with the versions in
use and the redacting processors' counters, as JSON to ``<raw dump>``.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

# Content capture: the most permissive setting of every library, set before any of them is imported.
os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_AND_EVENT"
os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
os.environ["OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT"] = "true"
os.environ["TRACELOOP_TRACE_CONTENT"] = "true"
for _hide in (
    "INPUTS",
    "OUTPUTS",
    "INPUT_MESSAGES",
    "OUTPUT_MESSAGES",
    "INPUT_TEXT",
    "OUTPUT_TEXT",
    "INPUT_IMAGES",
    "EMBEDDINGS_TEXT",
    "EMBEDDINGS_VECTORS",
    "LLM_INVOCATION_PARAMETERS",
    "LLM_TOOLS",
    "PROMPTS",
    "CHOICES",
):
    os.environ[f"OPENINFERENCE_HIDE_{_hide}"] = "false"  # OpenInference's defaults, spelled out

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the shared sentinels

from fakes import openai_server as fake  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import otel_agentdiag  # noqa: E402

INSTRUMENTATIONS: dict[str, tuple[str, str]] = {
    # name -> (distribution, module holding OpenAIInstrumentor)
    "openinference": ("openinference-instrumentation-openai", "openinference.instrumentation.openai"),
    "openllmetry": ("opentelemetry-instrumentation-openai", "opentelemetry.instrumentation.openai"),
    "otel-genai": ("opentelemetry-instrumentation-genai-openai", "opentelemetry.instrumentation.genai.openai"),
    "agentdiag": ("otel-agentdiag", "otel_agentdiag.instrumentation.openai"),
}
VERSIONS_OF = (
    "openai",
    "opentelemetry-sdk",
    "opentelemetry-instrumentation",
    "openinference-instrumentation-openai",
    "openinference-instrumentation",
    "openinference-semantic-conventions",
    "opentelemetry-instrumentation-openai",
    "opentelemetry-semantic-conventions-ai",
    "opentelemetry-instrumentation-genai-openai",
    "opentelemetry-util-genai",
)
HASH_KEY = b"809a371a6ec77b2072275a5c0cbb7cf7ee3189e49a72e9c6fb0798d4eacdbcfe"
SERVICE_NAME = "third-party-app"
AGENT_NAME = "trip-planner"
MODEL = "gpt-4o-mini"
EMBEDDING_MODEL = "text-embedding-3-small"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": fake.TOOL_NAME,
            "description": f"Current weather for a city. {fake.SENTINEL_TOOL_DESCRIPTION}",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius"]}},
                "required": ["city"],
            },
        },
    }
]


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in VERSIONS_OF:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _dump(span: ReadableSpan) -> dict[str, Any]:
    """The span as the SDK serialises it, plus the instrumentation scope (which ``to_json()`` leaves out)."""
    out: dict[str, Any] = json.loads(span.to_json())
    scope = span.instrumentation_scope
    out["scope"] = None
    if scope is not None:
        out["scope"] = {
            "name": scope.name,
            "version": scope.version,
            "schema_url": scope.schema_url,
            "attributes": dict(scope.attributes or {}),
        }
    return out


def _counters(processor: Any) -> dict[str, int]:
    """A redacting processor's counters (spans forwarded, dropped, ...), whichever this version keeps."""
    names = ("redacted", "failed", "tombstoned", "dropped")
    return {name: getattr(processor, name) for name in names if isinstance(getattr(processor, name, None), int)}


def _instrument(name: str, tracer_provider: Any) -> None:
    _, module = INSTRUMENTATIONS[name]
    instrumentor_class = __import__(module, fromlist=["OpenAIInstrumentor"]).OpenAIInstrumentor
    instrumentor_class().instrument(tracer_provider=tracer_provider)


def get_weather(city: str, unit: str = "celsius") -> str:
    """The tool: its result goes back to the model."""
    return json.dumps({"city": city, "temperature": 21, "unit": unit, "note": fake.SENTINEL_TOOL_RESULT})


def run_agent(client: Any) -> dict[str, int]:
    """The agent: every call the fake server scripts, inside one agent run. Returns what happened."""
    import openai

    done = {"chat": 0, "stream": 0, "embeddings": 0, "responses": 0, "errors": 0}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"You plan trips. {fake.SENTINEL_SYSTEM}"},
        {"role": "user", "content": f"What is the weather in Paris? {fake.SENTINEL_PROMPT}"},
    ]
    common: dict[str, Any] = {
        "model": MODEL,
        "user": fake.SENTINEL_END_USER,
        "metadata": {"ticket": fake.SENTINEL_METADATA},
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 256,
        "seed": 7,
    }
    with otel_agentdiag.agent_run(AGENT_NAME, conversation_id=fake.SENTINEL_CONVERSATION, user_id=fake.SENTINEL_USER):
        with otel_agentdiag.iteration(0):
            first = client.chat.completions.create(messages=messages, tools=TOOLS, **common)
            done["chat"] += 1
            (call,) = first.choices[0].message.tool_calls
            assert call.function.name == fake.TOOL_NAME, call
            with otel_agentdiag.tool_call(call.function.name, call_id=call.id):
                result = get_weather(**json.loads(call.function.arguments))
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        with otel_agentdiag.iteration(1):
            final = client.chat.completions.create(messages=messages, tools=TOOLS, **common)
            done["chat"] += 1
            assert fake.SENTINEL_OUTPUT in (final.choices[0].message.content or ""), final

        # Streamed: a text answer with a usage chunk, then a tool call.
        stream = client.chat.completions.create(
            messages=messages[:2], stream=True, stream_options={"include_usage": True}, **common
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert fake.SENTINEL_STREAM_OUTPUT in text, text
        done["stream"] += 1
        stream = client.chat.completions.create(messages=messages[:2], tools=TOOLS, stream=True, **common)
        arguments = "".join(
            tool.function.arguments or ""
            for c in stream
            if c.choices
            for tool in c.choices[0].delta.tool_calls or ()
            if tool.function is not None
        )
        assert fake.SENTINEL_TOOL_ARGS in arguments, arguments
        done["stream"] += 1

        embedding = client.embeddings.create(model=EMBEDDING_MODEL, input=[fake.SENTINEL_EMBEDDING_INPUT])
        assert len(embedding.data[0].embedding) == fake.EMBEDDING_DIMENSIONS
        done["embeddings"] += 1

        response = client.responses.create(
            model=MODEL,
            instructions=fake.SENTINEL_INSTRUCTIONS,
            input=f"Summarise the weather. {fake.SENTINEL_PROMPT}",
            user=fake.SENTINEL_END_USER,
            metadata={"ticket": fake.SENTINEL_METADATA},
        )
        assert fake.SENTINEL_OUTPUT in response.output_text, response
        done["responses"] += 1

        try:
            client.chat.completions.create(model=fake.ERROR_MODEL, messages=messages[:2])
        except openai.BadRequestError as exc:
            assert fake.SENTINEL_ERROR in str(exc), exc
            done["errors"] += 1
    return done


def main(argv: list[str]) -> int:
    if len(argv) != 6 or argv[1] not in INSTRUMENTATIONS:
        print(__doc__, file=sys.stderr)
        return 2
    name, store, otlp_endpoint, base_url, dump = argv[1:]

    diag = otel_agentdiag.configure(
        service_name=SERVICE_NAME, store=store, otlp_endpoint=otlp_endpoint, hash_key=HASH_KEY, set_global=True
    )
    provider = diag.tracer_provider
    assert provider is not None, "configure() installed nothing"
    control = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(control))  # beside ours: sees the spans unredacted

    _instrument(name, provider)
    otel_agentdiag.register_names(tools=[fake.TOOL_NAME])

    import openai

    client = openai.OpenAI(
        api_key=fake.SENTINEL_API_KEY,
        base_url=base_url,
        default_headers={"X-Request-Tag": fake.SENTINEL_HEADER},
        max_retries=0,
    )
    try:
        done = run_agent(client)
    finally:
        client.close()
        diag.shutdown()

    report = {
        "instrumentation": name,
        "versions": _versions(),
        "key_id": diag.key_id,
        "key_ids": dict(getattr(diag, "key_ids", {})),
        "done": done,
        "processors": [_counters(processor) for processor in diag.processors],
        "spans": [_dump(span) for span in control.get_finished_spans()],
    }
    Path(dump).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
