"""Zero-code for the frameworks traced by a peer's instrumentor or by their own spans: smolagents, LiteLLM and
Pydantic AI apps with no tracing code, run under ``opentelemetry-instrument`` in the dev venv with our distro.

The apps (``zero_code_{smolagents,litellm,pydantic_ai}_app.py``) import neither OpenTelemetry nor otel_agentdiag.
``opentelemetry-instrument`` loads our distro and configurator (the pipeline from the environment: the store, the
hash key, the OTLP endpoint) and every ``opentelemetry_instrumentor`` entry point installed: ours
(``agentdiag_*``, among them ``agentdiag_pydantic_ai``) and OpenInference's ``smolagents`` and ``litellm``, which
declare theirs, so they load by themselves. Each run sets ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` to the other
peers' instrumentors of the same libraries only (OpenInference's, OpenLLMetry's and the official GenAI ones named
``openai``, ``openai_agents``, ``langchain``, ``llama_index``: each would trace the same calls a second time), and
to the OpenInference instrumentor of the library the app does not use (it would only slow the start-up).

Each app runs one agent (two tool calls and a failing tool) against a scripted fake model server on 127.0.0.1;
the test reads back the store and a real OTLP/HTTP receiver: our tree (LiteLLM has no agent loop: its LLM spans),
tokens on the LLM leaves only, valid receipts, and no sentinel in the store or on the wire.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from agent_runs import trace_summaries
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from leak_search import Surfaces
from otlp_receiver import OTLPReceiver, ReceivedSpan

from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipts
from otel_agentdiag.storage import SpanStore, StoredSpan

E2E = Path(__file__).resolve().parent
TESTS = E2E.parent
ROOT = TESTS.parent
INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")
APP_TIMEOUT_S = 300.0
HASH_KEY = "3f9a1c7e5b2d8f4a6c0e9b3d7f1a5c8e2b6d0f4a9c3e7b1d5f8a2c6e0b4d9f3a"
SENTINELS = (*fake.SENTINELS, "/home/alice")
PEERS = ("openai", "openai_agents", "langchain", "llama_index")
"""The entry point names under which other packages' instrumentors of the same libraries are registered."""
WEATHER, LOOKUP = "get_weather", "lookup_city"
SCRIPT = (WEATHER, WEATHER, LOOKUP)
"""The tool the model asks for at each step; then it answers (smolagents: with its ``final_answer`` tool)."""

pytestmark = pytest.mark.skipif(not INSTRUMENT.exists(), reason=f"no opentelemetry-instrument next to {sys.executable}")


class ScriptedServer(FakeModelServer):
    """The fake server, answering one agent's loop: its n-th chat completion asks for ``SCRIPT[n]``, after them
    for ``final`` (a tool, for smolagents) or it answers in text. (smolagents sends tool results back as user
    messages, so the turn count, not the request, tells the step.)"""

    def __init__(self, final: str | None = None) -> None:
        super().__init__()
        self._turns = itertools.count()
        self._final = final

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        step = next(self._turns)
        messages = [m for m in body.get("messages") or [] if m.get("role") != "tool"][:2]
        if step >= len(SCRIPT) and self._final is None:
            return super().chat_completion({**body, "messages": [*messages, {"role": "tool", "content": ""}]})
        out = super().chat_completion({**body, "messages": messages})  # a tool call, with its usage
        (call,) = out["choices"][0]["message"]["tool_calls"]
        if step < len(SCRIPT):
            call["function"]["name"] = SCRIPT[step]
        else:
            answer = json.dumps({"answer": f"sunny {fake.SENTINEL_OUTPUT}"})
            call["function"] = {"name": self._final, "arguments": answer}
        return out


@dataclass
class Run:
    done: subprocess.CompletedProcess[str]
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipts: list[str]
    requests: int


def disabled(*also: str) -> str:
    return ",".join((*PEERS, *also))


def run_app(app: str, folder: Path, disable: str, final: str | None = None) -> Run:
    """``opentelemetry-instrument python APP`` against a fresh scripted server, with the pipeline from the
    environment: the store in ``folder`` and a real OTLP receiver."""
    store = folder / "store" / "traces.db"  # its own folder: the leak search reads every file there
    prefixes = ("OTEL_", "AGENTDIAG_", "OPENAI_", "ANTHROPIC_", "TRACELOOP_", "OPENINFERENCE_", "LITELLM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes) and k.lower() != "pythonpath"}
    with OTLPReceiver() as receiver, ScriptedServer(final) as server:
        env |= {
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)]),  # the fakes' sentinels; this checkout
            "ZERO_CODE_OPENAI_URL": server.base_url,
            "OTEL_SERVICE_NAME": "zero-code-" + app,
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disable,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.endpoint}/v1/traces",
            "AGENTDIAG_STORE": str(store),
            "AGENTDIAG_HASH_KEY": HASH_KEY,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        command = [str(INSTRUMENT), sys.executable, str(E2E / f"zero_code_{app}_app.py")]
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=APP_TIMEOUT_S)
        assert done.returncode == 0, done.stderr[-3000:]
        assert receiver.errors == []
        requests = len(server.requests_to("/v1/chat/completions"))
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        receipts, malformed = session_receipts(reader)
        assert malformed == 0
        verdicts = [r.status if r.status == "valid" else f"{r.status} {r.reasons} {r.counts}" for r in receipts]
    return Run(done, store, spans, received, raw_bodies, verdicts, requests)


def _kinds(spans: list[StoredSpan], kind: str) -> list[StoredSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_ns)


def _summaries(store: Path) -> list[tuple[Any, ...]]:
    """The roll-ups ``traces`` and ``sessions`` read, per trace, sorted."""
    return sorted(trace_summaries(store, "llm_calls, tool_calls, input_tokens, output_tokens"))


def _assert_loop(spans: list[StoredSpan], tools: list[str], *, answer_step: bool = False) -> StoredSpan:
    """One trace: run → one iteration per model call → (a framework step →) our ``chat`` span, and the step's
    tool; the third tool failed; with ``answer_step``, the last iteration holds the framework's answer tool as a
    step (smolagents' ``final_answer``). Returns the run."""
    assert len({s.trace_id for s in spans}) == 1
    (run,) = _kinds(spans, "run")
    assert run.parent_span_id is None
    iterations = _kinds(spans, "iteration")
    assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(len(SCRIPT) + 1))
    assert {s.parent_span_id for s in iterations} == {run.span_id}
    # The framework's (or OpenInference's) LLM span and ours wrap the same call: ours owns it (usage, finish
    # reason), the outer one stays as a step without usage.
    others = _kinds(spans, "other")
    answers = [s for s in others if s.attributes.get(sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE) == "final_answer"]
    assert [s.parent_span_id for s in answers] == ([iterations[-1].span_id] if answer_step else [])
    steps = {s.span_id: s for s in others if s not in answers}
    assert {s.attributes.get(sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE) for s in steps.values()} == {"duplicate_llm_call"}
    llm = _kinds(spans, "llm")
    assert [s.name for s in llm] == ["chat gpt-4o-mini"] * len(iterations)
    assert {(s.scope or {}).get("name") for s in llm} == {"otel_agentdiag.instrumentation.openai"}
    assert [steps[s.parent_span_id].parent_span_id for s in llm] == [s.span_id for s in iterations]
    used = _kinds(spans, "tool")
    assert [s.name for s in used] == [f"execute_tool {name}" for name in tools]
    assert [s.parent_span_id for s in used] == [s.span_id for s in iterations[: len(used)]]
    assert [s.status == "error" for s in used] == [False, False, True, False][: len(used)]
    assert {s.kind for s in spans} == {"run", "iteration", "other", "llm", "tool"}
    for span in spans:
        if span.kind != "llm":
            assert not [k for k in span.attributes if k.startswith(("gen_ai.usage.", "llm.token_count."))], span.name
    return run


USED = [fake.TOOL_CALL_USAGE] * len(SCRIPT)


def _needs(*modules: str) -> None:
    """Skip unless the app's packages are installed; looked up, not imported (importing LiteLLM here would fetch
    its price table)."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the dev extras)")


@pytest.fixture(scope="module")
def smolagents_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    _needs("smolagents", "openinference.instrumentation.smolagents")
    return run_app("smolagents", tmp_path_factory.mktemp("zc-smolagents"), disabled("litellm"), final="final_answer")


@pytest.fixture(scope="module")
def litellm_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    _needs("litellm", "openinference.instrumentation.litellm")
    return run_app("litellm", tmp_path_factory.mktemp("zc-litellm"), disabled("smolagents"))


@pytest.fixture(scope="module")
def pydantic_ai_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    _needs("pydantic_ai")
    return run_app("pydantic_ai", tmp_path_factory.mktemp("zc-pydantic-ai"), disabled("smolagents", "litellm"))


def test_the_peers_instrumentors_load_by_their_entry_points() -> None:
    """What ``opentelemetry-instrument`` finds: OpenInference's ``smolagents`` and ``litellm``, and ours."""
    points = {(ep.name, ep.value) for ep in metadata.entry_points(group="opentelemetry_instrumentor")}
    assert ("smolagents", "openinference.instrumentation.smolagents:SmolagentsInstrumentor") in points
    assert ("litellm", "openinference.instrumentation.litellm:LiteLLMInstrumentor") in points
    assert ("agentdiag_pydantic_ai", "otel_agentdiag.instrumentation.pydantic_ai:PydanticAIInstrumentor") in points


def test_the_apps_have_no_tracing_code() -> None:
    for app in ("smolagents", "litellm", "pydantic_ai"):
        text = (E2E / f"zero_code_{app}_app.py").read_text()
        assert "import opentelemetry" not in text and "from opentelemetry" not in text, app
        assert "otel_agentdiag" not in text and "openinference" not in text, app


def test_smolagents_run_iterations_llm_and_tool_spans(smolagents_run: Run) -> None:
    run = smolagents_run
    assert run.done.stdout.splitlines() == ["agent True"], run.done.stderr
    assert run.requests == len(SCRIPT) + 1
    # Names on OpenInference's spans are data; our agentdiag_smolagents entry point registers the names the
    # agent's definitions declare (its name, its tools, smolagents' own final_answer) before the run.
    agent = _assert_loop(run.spans, list(SCRIPT), answer_step=True)
    assert agent.name == "invoke_agent weather_agent"
    assert _kinds(run.spans, "tool")[2].attributes[sc.ERROR_TYPE] == "LookupError"
    tokens = [*USED, fake.TOOL_CALL_USAGE]  # smolagents answers with its final_answer tool
    llm = _kinds(run.spans, "llm")
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [u.prompt_tokens for u in tokens]
    total_in, total_out = sum(u.prompt_tokens for u in tokens), sum(u.completion_tokens for u in tokens)
    assert _summaries(run.store) == [(len(tokens), len(SCRIPT), total_in, total_out)]  # final_answer: a step


def test_litellm_one_llm_span_per_call(litellm_run: Run) -> None:
    """No agent loop in LiteLLM: its calls are the tree, one LLM span each (OpenInference's, mapped to ours);
    our ``agentdiag_openai`` adds none (LiteLLM posts through the ``openai`` client's low-level ``post()``)."""
    run = litellm_run
    assert run.done.stdout.splitlines() == ["agent True"], run.done.stderr
    assert run.requests == len(SCRIPT) + 1
    llm = _kinds(run.spans, "llm")
    assert len(llm) == len(run.spans) == run.requests
    assert [s.name for s in llm] == ["chat openai/gpt-4o-mini"] * len(llm)
    assert {(s.scope or {}).get("name") for s in llm} == {"openinference.instrumentation.litellm"}
    assert {s.attributes.get(sc.GEN_AI_PROVIDER_NAME) for s in llm} == {"openai"}
    assert all(s.parent_span_id is None for s in llm)  # no run: each call is a trace of its own
    tokens = [*USED, fake.ANSWER_USAGE]
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [u.prompt_tokens for u in tokens]
    assert [s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in llm] == [u.completion_tokens for u in tokens]
    assert _summaries(run.store) == sorted((1, 0, u.prompt_tokens, u.completion_tokens) for u in tokens)


def test_pydantic_ai_run_iterations_llm_and_tool_spans(pydantic_ai_run: Run) -> None:
    run = pydantic_ai_run
    assert run.done.stdout.splitlines() == ["agent True"], run.done.stderr
    assert run.requests == len(SCRIPT) + 1
    agent = _assert_loop(run.spans, list(SCRIPT))  # declared tools: registered by our instrumentor
    assert agent.name == "invoke_agent weather_agent"
    assert str(agent.attributes[sc.GEN_AI_CONVERSATION_ID]).startswith("hmac-sha256:")
    tokens = [*USED, fake.ANSWER_USAGE]
    total_in, total_out = sum(u.prompt_tokens for u in tokens), sum(u.completion_tokens for u in tokens)
    assert (agent.attributes["agentdiag.usage.input_tokens"], agent.attributes["agentdiag.usage.output_tokens"]) == (
        total_in,
        total_out,
    )
    assert _summaries(run.store) == [(len(tokens), len(SCRIPT), total_in, total_out)]
    # Our OpenAI instrumentor's chat spans are numbered in the run's session too: the iteration carries the run's
    # conversation in the context (Pydantic AI sets it on its own spans only).
    assert {s.session for s in run.spans} == {agent.session}
    assert {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in run.spans} == {
        agent.attributes[sc.GEN_AI_CONVERSATION_ID]
    }


@pytest.mark.parametrize("name", ["smolagents_run", "litellm_run", "pydantic_ai_run"])
def test_receipts_valid_and_no_sentinel_in_the_store_or_on_the_wire(name: str, request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(name)
    assert run.receipts and set(run.receipts) == {"valid"}
    assert sorted(str(r.attributes.get(sc.AGENTDIAG_KIND)) for r in run.received) == sorted(s.kind for s in run.spans)
    assert "otel-agentdiag" not in run.done.stderr and "Traceback" not in run.done.stderr, run.done.stderr
    seen = Surfaces.of(run.store, run.raw_bodies, run.received)
    assert seen.leaks(SENTINELS) == []
