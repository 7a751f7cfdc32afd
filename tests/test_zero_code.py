"""Zero-code: ``opentelemetry-instrument python app.py`` traces an app that has no tracing code at all.

The app (``zero_code_app.py``) imports neither OpenTelemetry nor otel_agentdiag. ``opentelemetry-instrument``
finds our distro, our configurator and our instrumentors through their entry points (``pyproject.toml``); the
test runs it in a fresh interpreter against the fake model server (``fakes/openai_server.py``) and reads back
what reached the SQLite store (with the project's own reader, and byte for byte) or a real OTLP/HTTP receiver
on 127.0.0.1 (``e2e/otlp_receiver.py``).

Every run sets ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=openai,openai_agents,langchain,smolagents,litellm``: the
venv also has OpenInference's, OpenLLMetry's and the official GenAI instrumentors registered under those entry
point names (the first three would trace the same calls twice; the last two, OpenInference's smolagents and
LiteLLM instrumentors of the ``dev`` extras, import their libraries at start-up, several seconds with LiteLLM,
for apps that use neither; ``e2e/test_zero_code_frameworks.py`` runs smolagents and LiteLLM apps with them on).
Ours are named ``agentdiag_openai``, ``agentdiag_anthropic``,
``agentdiag_openai_agents`` and ``agentdiag_langchain``, so they still run.

The in-process tests at the end drive the distro and the configurator directly; none of them installs a
global TracerProvider in the test process.
"""

from __future__ import annotations

import ast
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from e2e.otlp_receiver import OTLPReceiver
from fakes import openai_server as fake
from fakes.openai_server import FakeOpenAIServer, RecordedRequest
from opentelemetry import trace

from otel_agentdiag import distro
from otel_agentdiag.storage import SpanStore, StoredSpan

TESTS = Path(__file__).resolve().parent
APP = TESTS / "zero_code_app.py"
INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")
APP_TIMEOUT_S = 120.0
WAIT_S = 10.0
SERVICE = "zero-code-agent"
OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-6"  # zero_code_app.ANTHROPIC_MODEL
APP_STDOUT = ["chat stop True", "stream True", "anthropic end_turn True", "done"]
"""What the app prints when every call got the fake server's answer (no answer text in it)."""
OUR_SCOPES = {"otel_agentdiag.instrumentation.openai", "otel_agentdiag.instrumentation.anthropic"}
ANTHROPIC_SDK_SCOPE = "com.anthropic.sdk.python"

requires_instrument = pytest.mark.skipif(
    not INSTRUMENT.exists(),
    reason=f"no opentelemetry-instrument next to {sys.executable} (pip install opentelemetry-instrumentation)",
)


@dataclass(frozen=True)
class Expected:
    """One LLM call of the app, as its span must show it."""

    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    stream: bool


EXPECTED = (
    Expected("openai", OPENAI_MODEL, fake.ANSWER_USAGE.prompt_tokens, fake.ANSWER_USAGE.completion_tokens, False),
    Expected("openai", OPENAI_MODEL, fake.STREAM_USAGE.prompt_tokens, fake.STREAM_USAGE.completion_tokens, True),
    Expected(
        "anthropic",
        ANTHROPIC_MODEL,
        # GenAI semconv: input tokens include the cached ones (Anthropic reports them apart).
        fake.ANTHROPIC_USAGE.input_tokens
        + fake.ANTHROPIC_USAGE.cache_read_input_tokens
        + fake.ANTHROPIC_USAGE.cache_creation_input_tokens,
        fake.ANTHROPIC_USAGE.output_tokens,
        False,
    ),
)
"""The app's calls, in order, with what the fake server reported for each."""
EXPECTED_REQUESTS = [("POST", "/v1/chat/completions"), ("POST", "/v1/chat/completions"), ("POST", "/v1/messages")]


# -- running the app ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    done: subprocess.CompletedProcess[str]
    requests: list[RecordedRequest]
    store_path: Path


def _subprocess_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The test's environment without anything that could steer the app, the SDKs or the instrumentation."""
    prefixes = ("OTEL_", "AGENTDIAG_", "OPENAI_", "ANTHROPIC_", "TRACELOOP_", "OPENINFERENCE_")
    proxies = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes) and k.lower() not in proxies}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = str(TESTS)  # the app imports fakes.openai_server (sentinels)
    env.update(extra)
    return env


def run_app(base: Path, extra_env: Mapping[str, str] | None = None, app: Path = APP) -> Run:
    """Run ``app`` under ``opentelemetry-instrument`` (cwd ``base``) against a fresh fake model server."""
    store_path = base / "store" / "traces.db"
    with FakeOpenAIServer() as server:
        env = _subprocess_env(
            {
                "ZERO_CODE_OPENAI_URL": server.base_url,
                "ZERO_CODE_ANTHROPIC_URL": server.anthropic_base_url,
                "OTEL_SERVICE_NAME": SERVICE,
                # The peers' instrumentors (OpenInference, OpenLLMetry, the official GenAI ones) of the same
                # libraries would add their own spans; ours are named agentdiag_* and keep running. smolagents and
                # litellm: only start-up time here (these apps use neither).
                "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai,openai_agents,langchain,smolagents,litellm",
                "AGENTDIAG_STORE": str(store_path),
                **(extra_env or {}),
            }
        )
        command = [str(INSTRUMENT), sys.executable, str(app)]
        try:
            done = subprocess.run(command, cwd=base, env=env, capture_output=True, text=True, timeout=APP_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the app did not finish within {APP_TIMEOUT_S} s\nstderr:\n{exc.stderr}")
        return Run(done=done, requests=list(server.requests), store_path=store_path)


def assert_app_ran_normally(run: Run) -> None:
    assert run.done.returncode == 0, f"stdout:\n{run.done.stdout}\nstderr:\n{run.done.stderr}"
    assert run.done.stdout.splitlines() == APP_STDOUT, run.done.stderr
    assert "Traceback" not in run.done.stderr, run.done.stderr
    assert "otel-agentdiag" not in run.done.stderr, run.done.stderr  # nothing of ours went wrong
    assert [(r.method, r.path) for r in run.requests] == EXPECTED_REQUESTS


def found(blob: bytes) -> list[str]:
    """The sentinels in ``blob``, as UTF-8 bytes or in any letter case."""
    lower = blob.lower()
    return [s for s in fake.SENTINELS if s.encode() in blob or s.lower().encode() in lower]


def stored_spans(store_path: Path) -> list[StoredSpan]:
    with SpanStore(store_path, create=False) as store:
        return [span for summary in store.list_traces() for span in store.get_trace(summary.trace_id)]


def llm_spans_in_call_order(spans: list[Any], attributes: Any) -> list[Any]:
    llm = [span for span in spans if attributes(span).get("agentdiag.kind") == "llm"]
    return sorted(llm, key=lambda span: attributes(span)["agentdiag.sequence"])


def assert_llm_span(expected: Expected, name: str, attributes: Mapping[str, Any]) -> None:
    assert name == f"chat {expected.model}"
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == expected.provider
    assert attributes["gen_ai.request.model"] == expected.model
    assert attributes["gen_ai.response.model"] == expected.model + fake.MODEL_SNAPSHOT_SUFFIX
    assert attributes["gen_ai.usage.input_tokens"] == expected.input_tokens
    assert attributes["gen_ai.usage.output_tokens"] == expected.output_tokens
    if expected.stream:
        assert attributes["gen_ai.request.stream"] is True
    else:
        assert "gen_ai.request.stream" not in attributes


# -- the traced run, read back from the store ---------------------------------------------------------------
@dataclass(frozen=True)
class StoreRun:
    run: Run
    files: dict[str, bytes]
    """Every file of the store's folder, read raw before anything reopened the store."""
    modes: dict[str, int]
    folder_mode: int
    spans: list[StoredSpan]


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> StoreRun:
    if not INSTRUMENT.exists():
        pytest.skip(f"no opentelemetry-instrument next to {sys.executable}")
    run = run_app(tmp_path_factory.mktemp("zero-code"))
    assert_app_ran_normally(run)
    folder = run.store_path.parent
    assert run.store_path.is_file(), f"no store was written\nstderr:\n{run.done.stderr}"
    files = {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()}
    return StoreRun(run, files, modes, stat.S_IMODE(folder.stat().st_mode), stored_spans(run.store_path))


def test_the_app_has_no_tracing_code() -> None:
    tree = ast.parse(APP.read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {"openai", "anthropic"} <= imported
    assert not [name for name in imported if name.startswith(("opentelemetry", "otel_agentdiag"))]


@requires_instrument
def test_the_app_runs_unchanged_and_its_calls_reach_the_server(traced: StoreRun) -> None:
    assert_app_ran_normally(traced.run)
    chat, stream, message = (request.body for request in traced.run.requests)
    assert chat["messages"][1]["content"] == fake.SENTINEL_PROMPT  # the sentinels really went out
    assert stream["stream"] is True and stream["stream_options"] == {"include_usage": True}
    assert message["system"] == fake.SENTINEL_SYSTEM and message["model"] == ANTHROPIC_MODEL


@requires_instrument
def test_one_llm_span_per_call_with_the_reported_tokens(traced: StoreRun) -> None:
    spans = traced.spans
    # Exactly the app's three calls, each traced by our instrumentors: no span from the other packages' `openai`
    # instrumentors (disabled by name), none from the anthropic SDK's own tracing (off by the distro's default).
    assert len(spans) == len(EXPECTED), [(s.name, s.scope) for s in spans]
    assert sorted((span.scope or {}).get("name") for span in spans) == sorted(
        ["otel_agentdiag.instrumentation.openai"] * 2 + ["otel_agentdiag.instrumentation.anthropic"]
    )
    llm = llm_spans_in_call_order(spans, lambda span: span.attributes)
    assert len(llm) == len(EXPECTED)
    for expected, span in zip(EXPECTED, llm, strict=True):
        assert span.span_kind == "client"
        assert span.status != "error"
        assert_llm_span(expected, span.name, span.attributes)
        assert span.resource["service.name"] == SERVICE


@requires_instrument
def test_no_sentinel_anywhere_in_the_store_files(traced: StoreRun) -> None:
    assert "traces.db" in traced.files
    for name, blob in traced.files.items():
        assert not found(blob), f"{found(blob)} leaked into {name}"


@requires_instrument
def test_the_store_is_private(traced: StoreRun) -> None:
    assert traced.folder_mode == 0o700
    assert traced.modes["traces.db"] == 0o600
    for name, mode in traced.modes.items():  # -wal, -shm and hash.key too, when present
        assert mode == 0o600, f"{name} has mode {oct(mode)}"


# -- switches --------------------------------------------------------------------------------------------
@requires_instrument
def test_agentdiag_enabled_false_builds_nothing(tmp_path: Path) -> None:
    run = run_app(tmp_path, {"AGENTDIAG_ENABLED": "false"})
    assert_app_ran_normally(run)
    assert not run.store_path.parent.exists()
    assert not (tmp_path / ".agentdiag").exists()  # nor the default store


@requires_instrument
def test_an_unusable_store_never_reaches_the_app(tmp_path: Path) -> None:
    """The store's folder is a regular file (unusable even for root): the app still runs, exit code 0."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    store = blocker / "traces.db"
    run = run_app(tmp_path, {"AGENTDIAG_STORE": str(store)})
    assert run.done.returncode == 0, run.done.stderr
    assert run.done.stdout.splitlines() == APP_STDOUT
    assert "Traceback" not in run.done.stderr
    assert [(r.method, r.path) for r in run.requests] == EXPECTED_REQUESTS
    assert "cannot open the trace store" in run.done.stderr  # logged, not raised
    assert blocker.read_text() == ""


@requires_instrument
def test_a_user_who_turns_the_anthropic_sdk_tracing_on_keeps_it(tmp_path: Path) -> None:
    """``ANTHROPIC_OPEN_TELEMETRY=true`` wins over the distro's default: the SDK's own span comes back.

    AnthropicInstrumentor then makes no span of its own and marks the SDK's as the call's LLM span, so there is
    still one LLM span per call. This is the control for the scope check above: with the distro's default the
    anthropic LLM span is ours.
    """
    run = run_app(tmp_path, {"ANTHROPIC_OPEN_TELEMETRY": "true"})
    assert_app_ran_normally(run)
    spans = stored_spans(run.store_path)
    assert len(spans) == len(EXPECTED), [(s.name, s.scope) for s in spans]
    llm = llm_spans_in_call_order(spans, lambda span: span.attributes)
    assert [(span.scope or {}).get("name") for span in llm] == [
        "otel_agentdiag.instrumentation.openai",
        "otel_agentdiag.instrumentation.openai",
        ANTHROPIC_SDK_SCOPE,
    ]
    for expected, span in zip(EXPECTED, llm, strict=True):
        assert_llm_span(expected, span.name, span.attributes)


# -- OTLP ------------------------------------------------------------------------------------------------
@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running
        assert running.errors == []


@requires_instrument
def test_otlp_traces_endpoint_receives_the_spans(tmp_path: Path, receiver: OTLPReceiver) -> None:
    run = run_app(tmp_path, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.traces_url})
    assert_app_ran_normally(run)
    # The app's exit flushed the pipeline before the process ended; the wait only bounds a straggler.
    assert receiver.wait_for_spans(len(EXPECTED), timeout=WAIT_S), receiver.span_count
    received = receiver.spans()
    assert len(received) == len(EXPECTED), [span.name for span in received]
    llm = llm_spans_in_call_order(received, lambda span: span.attributes)
    for expected, span in zip(EXPECTED, llm, strict=True):
        assert_llm_span(expected, span.name, span.attributes)
        assert span.resource["service.name"] == SERVICE
        assert span.scope_name in OUR_SCOPES
    for blob in [*receiver.raw_bodies, *receiver.decoded_bodies]:
        assert not found(blob), f"{found(blob)} leaked into an OTLP request"
    assert run.store_path.is_file()  # the local branch runs beside the OTLP one


# -- in process: the entry points, the distro and the configurator -----------------------------------------
def test_the_entry_points_resolve_to_our_classes() -> None:
    def load(group: str) -> object:
        (entry_point,) = [ep for ep in metadata.entry_points(group=group) if ep.name == distro.ENTRY_POINT_NAME]
        return entry_point.load()

    assert load("opentelemetry_distro") is distro.AgentDiagDistro
    assert load("opentelemetry_configurator") is distro.AgentDiagConfigurator
    instrumentors = {ep.name: ep.value for ep in metadata.entry_points(group="opentelemetry_instrumentor")}
    assert instrumentors["agentdiag_openai"] == "otel_agentdiag.instrumentation.openai:OpenAIInstrumentor"
    assert instrumentors["agentdiag_anthropic"] == "otel_agentdiag.instrumentation.anthropic:AnthropicInstrumentor"
    assert (
        instrumentors["agentdiag_openai_agents"]
        == "otel_agentdiag.instrumentation.openai_agents:OpenAIAgentsInstrumentor"
    )
    assert instrumentors["agentdiag_langchain"] == "otel_agentdiag.instrumentation.langchain:LangChainInstrumentor"
    assert instrumentors["agentdiag_mcp"] == "otel_agentdiag.instrumentation.mcp:MCPInstrumentor"


@requires_instrument
def test_an_agents_sdk_app_becomes_one_tree_with_one_span_per_model_call(tmp_path: Path) -> None:
    pytest.importorskip("agents", reason="the openai-agents package (the `openai-agents` extra) is not installed")
    run = run_app(tmp_path, app=TESTS / "zero_code_agents_app.py")
    assert run.done.returncode == 0, run.done.stderr
    assert run.done.stdout.splitlines() == ["agent True"], run.done.stderr
    assert "otel-agentdiag" not in run.done.stderr, run.done.stderr
    assert [(r.method, r.path) for r in run.requests] == [("POST", "/v1/chat/completions")] * 2
    spans = stored_spans(run.store_path)
    assert sorted(s.name for s in spans) == [
        "agent.iteration",
        "agent.iteration",
        "chat gpt-4o-mini",
        "chat gpt-4o-mini",
        "execute_tool get_weather",
        "invoke_agent weather_agent",
    ]
    (root,) = [s for s in spans if s.kind == "run"]
    assert all(s.trace_id == root.trace_id for s in spans)
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {root.attributes["gen_ai.conversation.id"]}
    llm = [s for s in spans if s.kind == "llm"]
    assert all(s.events for s in llm)  # the OpenAI instrumentor's attempt events: it enriched the SDK's span
    for path in run.store_path.parent.iterdir():
        assert not found(path.read_bytes()), path.name


@requires_instrument
@pytest.mark.skipif(
    "agentdiag_llama_index" not in {ep.name for ep in metadata.entry_points(group="opentelemetry_instrumentor")},
    reason="the installed otel-agentdiag predates the agentdiag_llama_index entry point: pip install -e '.[dev]'",
)
def test_a_llama_index_app_becomes_one_tree(tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core", reason="llama-index-core (the `llama-index` extra) is not installed")
    run = run_app(tmp_path, app=TESTS / "zero_code_llama_index_app.py")
    assert run.done.returncode == 0, run.done.stderr
    assert run.done.stdout.splitlines() == ["agent True"], run.done.stderr
    spans = stored_spans(run.store_path)
    assert sorted(s.name for s in spans) == sorted(
        ["invoke_agent weather_agent"]
        + ["agent.iteration"] * 3
        + ["chat gpt-4o-mini"] * 3
        + ["execute_tool get_weather", "execute_tool get_time", "execute_tool lookup"]
    )
    (root,) = [s for s in spans if s.kind == "run"]
    assert all(s.trace_id == root.trace_id for s in spans)
    for path in run.store_path.parent.iterdir():
        assert not found(path.read_bytes()), path.name


@requires_instrument
def test_capture_from_the_environment_keeps_content_in_the_store_only(tmp_path: Path) -> None:
    """``AGENTDIAG_CAPTURE_CONTENT=true`` under ``opentelemetry-instrument``: the prompts and answers are in the
    store's content table, exactly; the spans are the same; credentials, headers, the end-user id and metadata
    (none of them content) are nowhere."""
    from otel_agentdiag.content import decode

    run = run_app(tmp_path, {"AGENTDIAG_CAPTURE_CONTENT": "true"})
    assert_app_ran_normally(run)
    spans = stored_spans(run.store_path)
    assert len(spans) == len(EXPECTED)
    with SpanStore(run.store_path, create=False) as store:
        by_trace = {span.span_id: span for summary in store.list_traces() for span in store.get_trace(summary.trace_id)}
        content = [
            (by_trace[c.span_id], c.role, decode(c.lossless))
            for summary in store.list_traces()
            for c in store.trace_content(summary.trace_id)
        ]
    chat = llm_spans_in_call_order(spans, lambda span: span.attributes)[0]
    sent = {role: value for span, role, value in content if span.span_id == chat.span_id}
    assert sent["gen_ai.input.messages"] == [
        {"role": "system", "content": fake.SENTINEL_SYSTEM},
        {"role": "user", "content": fake.SENTINEL_PROMPT},
    ]
    assert fake.SENTINEL_OUTPUT in repr(sent["gen_ai.output.messages"])
    blob = b"".join(path.read_bytes() for path in run.store_path.parent.iterdir() if path.is_file())
    never = (fake.SENTINEL_API_KEY, fake.SENTINEL_HEADER, fake.SENTINEL_END_USER, fake.SENTINEL_METADATA)
    assert [s for s in never if s.encode() in blob] == []
    for span in spans:  # the spans themselves carry no content
        assert fake.SENTINEL_PROMPT not in repr(span.attributes) + repr(span.events)


@pytest.fixture
def distro_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The distro writes os.environ itself: register each variable with monkeypatch so it is restored."""
    for name in distro.DISTRO_DEFAULTS:
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)


def test_the_distro_sets_its_defaults_when_unset(distro_env: None) -> None:
    distro.AgentDiagDistro().configure()
    assert os.environ["OTEL_PYTHON_CONFIGURATOR"] == "agentdiag"
    assert os.environ["ANTHROPIC_OPEN_TELEMETRY"] == "false"


def test_the_distro_never_overrides_a_users_value(distro_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_PYTHON_CONFIGURATOR", "someone_else")
    monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY", "true")
    distro.AgentDiagDistro().configure()
    assert os.environ["OTEL_PYTHON_CONFIGURATOR"] == "someone_else"
    assert os.environ["ANTHROPIC_OPEN_TELEMETRY"] == "true"


@pytest.fixture
def fresh_configurator(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A process in which the configurator has not run yet; returns a store path under ``tmp_path``."""
    monkeypatch.setattr(distro, "_attempted", False)
    monkeypatch.setattr(distro, "_handle", None)
    monkeypatch.chdir(tmp_path)
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return tmp_path / "store" / "traces.db"


def test_the_configurator_logs_a_failure_and_never_raises(
    fresh_configurator: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A malformed SDK limit makes TracerProvider() raise ValueError inside configure(), before anything is
    # installed; the message would carry the value.
    secret = "not-a-number-sentinel-limit"
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", secret)
    monkeypatch.setenv("AGENTDIAG_STORE", str(fresh_configurator))
    with caplog.at_level(logging.DEBUG, logger="otel_agentdiag"):
        distro.AgentDiagConfigurator().configure(auto_instrumentation_version="test")
    failures = [r for r in caplog.records if r.name == "otel_agentdiag.distro" and r.levelno == logging.ERROR]
    assert len(failures) == 1
    assert "ValueError" in failures[0].getMessage()
    assert secret not in caplog.text.lower()
    assert distro._handle is None
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert not fresh_configurator.exists()


def test_the_configurator_runs_once(fresh_configurator: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDIAG_ENABLED", "false")
    monkeypatch.setenv("AGENTDIAG_STORE", str(fresh_configurator))
    distro.AgentDiagConfigurator().configure()
    first = distro._handle
    assert first is not None and not first.enabled
    # Were the second call to configure again, it would now build a store and install a global provider.
    monkeypatch.delenv("AGENTDIAG_ENABLED")
    distro.AgentDiagConfigurator().configure()
    assert distro._handle is first
    assert not fresh_configurator.parent.exists()
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
