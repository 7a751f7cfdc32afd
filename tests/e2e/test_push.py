"""``agentdiag push`` against a real, independent OTLP collector: rotel (Rust) on 127.0.0.1, no Docker.

The store holds the demo run, two more sessions made through the public API, and planted rows: one with raw
correlation ids and an unknown attribute (a row from an older or foreign writer), and one whose JSON is
corrupt. rotel's trace processor writes every span it received to a JSON-lines file; the store is the
reference. Every span but the corrupt one must arrive exactly once, under the strict policy (the local-only
``server.address`` gone, raw ids replaced by digests, the store's own digests unchanged), and a second push
must send nothing. A collector that is down, or dies between batches, must leave unmarked exactly the spans
it did not take.
"""

from __future__ import annotations

import json
import os
import pty
import select
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from opentelemetry import trace
from rotel_collector import RotelCollector, free_port, unavailable_reason

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.demo import run_demo_agent
from otel_agentdiag.diagnostics.projection import OMIT_CORRUPT_ROW, load_store_hasher
from otel_agentdiag.diagnostics.push import endpoint_key, push_exporter, push_spans
from otel_agentdiag.storage import SpanRow, SpanStore

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=unavailable_reason() or "")

WAIT_S = 10.0
PROTOCOLS = ("http/protobuf", "grpc")
SERVICE = "push-e2e"
EXTRA_AGENT = "push_checker"

_tag = uuid.uuid4().hex[:12]
SENTINEL_HOST = f"sentinel-host-{_tag}.internal.example"
"""``server.address``: the local policy stores it, the strict policy drops it."""
SENTINEL_CONV = f"SENTINEL_CONV_{_tag}"
SENTINEL_USER = f"SENTINEL_USER_{_tag}@example.com"
SENTINEL_ATTR = f"SENTINEL_ATTR_{_tag}"
SENTINEL_CORRUPT = f"SENTINEL_CORRUPT_{_tag}"
SENTINEL_CONV_EXTRA = f"SENTINEL_CONV_EXTRA_{_tag}"
SECRET = f"SENTINEL_PASSWORD_{_tag}"
SENTINELS = (SENTINEL_HOST, SENTINEL_CONV, SENTINEL_USER, SENTINEL_ATTR, SENTINEL_CORRUPT, SENTINEL_CONV_EXTRA, SECRET)

RAW_TRACE = "a1" * 16
RAW_SPAN = "b2" * 8
CORRUPT_SPAN = "c3" * 8


@pytest.fixture
def rotel(tmp_path: Path) -> Iterator[RotelCollector]:
    with RotelCollector(tmp_path / "rotel") as collector:
        yield collector


def build_store(tmp_path: Path) -> Path:
    """The demo run, two extra sessions, one planted raw row and one corrupt row; hash.key beside the store."""
    path = tmp_path / "t.db"
    with agentdiag.configure(service_name=SERVICE, store=path, set_global=False) as diag:
        run_demo_agent()
        for n in range(2):
            with agentdiag.agent_run(EXTRA_AGENT, conversation_id=f"{SENTINEL_CONV_EXTRA}-{n}"):
                with agentdiag.iteration(0):
                    with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                        trace.get_current_span().set_attribute(sc.SERVER_ADDRESS, SENTINEL_HOST)
                        call.record_response(response_model="gpt-4o-mini", finish_reasons=["stop"])
                    with agentdiag.tool_call("get_weather", call_id=f"call-{n}"):
                        pass
        diag.force_flush()
    with SpanStore(path, create=False) as store:
        now = time.time_ns()
        planted = dict(
            parent_span_id=None,
            kind="run",
            span_kind="internal",
            start_ns=now,
            end_ns=now + 1000,
            status="ok",
            session=None,
            events=[],
            links=[],
            resource={"service.name": SERVICE},
            scope={"name": "legacy-writer", "version": None},
        )
        store.write_spans(
            [
                SpanRow(
                    trace_id=RAW_TRACE,
                    span_id=RAW_SPAN,
                    name="invoke_agent trip-planner",
                    attributes={
                        sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                        sc.GEN_AI_AGENT_NAME: "trip-planner",
                        sc.GEN_AI_CONVERSATION_ID: SENTINEL_CONV,
                        sc.USER_ID: SENTINEL_USER,
                        "app.note": SENTINEL_ATTR,
                    },
                    **planted,
                ),
                SpanRow(
                    trace_id=RAW_TRACE,
                    span_id=CORRUPT_SPAN,
                    name="corrupt",
                    attributes={"app.note": SENTINEL_CORRUPT},
                    **planted,
                ),
            ]
        )
    # Corrupt one row by hand, as a damaged page or a foreign writer would.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE spans SET attributes = '{not json' WHERE span_id = ?", (CORRUPT_SPAN,))
    with SpanStore(path, create=False) as store:
        assert any(s.attributes.get(sc.SERVER_ADDRESS) == SENTINEL_HOST for s in all_spans(store)), "precondition"
    return path


def all_spans(store: SpanStore) -> list[Any]:
    return [span for summary in store.list_traces() for span in store.get_trace(summary.trace_id)]


def stored_ids(path: Path) -> dict[tuple[str, str], Any]:
    with SpanStore(path, create=False) as store:
        return {(s.trace_id, s.span_id): s for s in all_spans(store)}


def deliverable(path: Path) -> set[tuple[str, str]]:
    """Every stored span but the corrupt row."""
    return {key for key, span in stored_ids(path).items() if not span.corrupt}


def push(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["push", *(str(a) for a in args)], catch_exceptions=False, env=env)


def received(rotel: RotelCollector, n: int) -> list[dict[str, Any]]:
    assert rotel.wait_for_spans(n, timeout=WAIT_S), f"rotel got {len(rotel.spans())} spans, expected {n}"
    return rotel.spans()


def with_credentials(endpoint: str) -> str:
    return endpoint.replace("http://", f"http://push-user:{SECRET}@", 1)


def assert_clean(rotel: RotelCollector, *outputs: str) -> None:
    wire = rotel.spans_path.read_text(encoding="utf-8") + rotel.log_text()
    for sentinel in SENTINELS:
        assert sentinel not in wire, f"{sentinel} reached the collector"
    for output in outputs:
        assert SECRET not in output and "push-user" not in output


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_push_delivers_every_span_once_and_a_second_push_none(tmp_path: Path, rotel: RotelCollector, protocol: str):
    path = build_store(tmp_path)
    expected = deliverable(path)
    stored = stored_ids(path)
    assert len(stored) == len(expected) + 1 and len(expected) >= 12 + 2 * 4 + 1
    # http/protobuf: credentials in the URL (the exporter sends them as basic auth); gRPC: in a header variable.
    endpoint = with_credentials(rotel.endpoint(protocol)) if protocol != "grpc" else rotel.endpoint(protocol)
    env = {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"authorization=Bearer%20{SECRET}"}

    first = push("--endpoint", endpoint, "--protocol", protocol, "--store", path, "--batch-size", "7", env=env)

    assert first.exit_code == 0, first.output
    assert first.output.startswith(f"pushed {len(expected)} new spans to ")
    assert f"({protocol})" in first.output
    assert f"0 already pushed (skipped); 1 omitted by re-validation ({OMIT_CORRUPT_ROW} 1)" in first.output
    spans = received(rotel, len(expected))
    ids = Counter((s["trace_id"], s["span_id"]) for s in spans)
    assert set(ids) == expected
    assert max(ids.values()) == 1, "a span arrived twice"
    # The tree and the store's own digests crossed unchanged; the strict policy did the rest.
    by_id = {(s["trace_id"], s["span_id"]): s for s in spans}
    for key, span in by_id.items():
        assert span["parent_span_id"] == stored[key].parent_span_id
        assert sc.SERVER_ADDRESS not in span["attributes"]
        assert "app.note" not in span["attributes"]
        if key != (RAW_TRACE, RAW_SPAN):
            for attribute in (sc.GEN_AI_CONVERSATION_ID, sc.USER_ID, sc.GEN_AI_TOOL_CALL_ID):
                assert span["attributes"].get(attribute) == stored[key].attributes.get(attribute)
    raw = by_id[(RAW_TRACE, RAW_SPAN)]["attributes"]
    assert raw[sc.GEN_AI_CONVERSATION_ID].startswith("hmac-sha256:")
    assert raw[sc.USER_ID].startswith("hmac-sha256:")
    assert any(s["attributes"].get(sc.GEN_AI_AGENT_NAME) == EXTRA_AGENT for s in spans)
    with SpanStore(path, create=False) as store:
        assert store.pushed_span_ids(endpoint_key(endpoint, protocol)) == expected

    second = push("--endpoint", endpoint, "--protocol", protocol, "--store", path, env=env)

    assert second.exit_code == 0, second.output
    assert second.output.startswith("pushed 0 new spans to ")
    assert f"; {len(expected)} already pushed (skipped); 1 omitted by re-validation" in second.output

    # A span stored since then goes alone. It also fences the second push: rotel's pipeline is one queue, so had
    # the second push sent anything, it would be counted before this span arrives.
    with SpanStore(path, create=False) as store:
        template = stored[(RAW_TRACE, RAW_SPAN)]
        store.write_spans([SpanRow(**{**_fields(template), "span_id": "d4" * 8, "parent_span_id": RAW_SPAN})])
    third = push("--endpoint", endpoint, "--protocol", protocol, "--store", path, "--format", "json", env=env)

    assert third.exit_code == 0, third.output
    report = json.loads(third.stdout)
    assert (report["pushed"], report["already_pushed"], report["omitted"]) == (1, len(expected), 1)
    assert report["protocol"] == protocol and "@" not in report["endpoint"]
    spans = received(rotel, len(expected) + 1)
    assert len(spans) == len(expected) + 1
    assert (spans[-1]["trace_id"], spans[-1]["span_id"]) == (RAW_TRACE, "d4" * 8)
    assert_clean(rotel, first.output, second.output, third.output)


def _fields(span: Any) -> dict[str, Any]:
    return {name: getattr(span, name) for name in SpanRow.__dataclass_fields__}


def test_collector_down_exits_1_marks_nothing_and_the_next_push_sends_everything(tmp_path: Path):
    path = build_store(tmp_path)
    expected = deliverable(path)
    down = f"http://push-user:{SECRET}@127.0.0.1:{free_port()}"  # nothing listens there

    started = time.monotonic()
    result = push("--endpoint", down, "--store", path, "--timeout", "1")
    elapsed = time.monotonic() - started

    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("agentdiag: error: push to http://127.0.0.1:") and "/v1/traces (http/protobuf)" in line
    assert "failed at batch 1" in line and "nothing was pushed" in line
    assert f"{len(expected)} spans not marked" in line
    assert SECRET not in result.output and "push-user" not in result.output
    assert elapsed < 10, f"a down collector took {elapsed:.1f} s to report with --timeout 1"
    with SpanStore(path, create=False) as store:
        assert store.pushed_span_ids(endpoint_key(down, "http/protobuf")) == set()

    with RotelCollector(tmp_path / "rotel") as rotel:
        again = push("--endpoint", rotel.http_endpoint, "--store", path)
        assert again.exit_code == 0, again.output
        assert {(s["trace_id"], s["span_id"]) for s in received(rotel, len(expected))} == expected


def test_a_collector_that_dies_between_batches_leaves_exactly_the_rest_unmarked(tmp_path: Path):
    path = build_store(tmp_path)
    expected = deliverable(path)
    hasher = load_store_hasher(path)
    assert hasher is not None
    first_rotel = RotelCollector(tmp_path / "rotel-1").start()
    key = endpoint_key(first_rotel.http_endpoint, "http/protobuf")
    pages: list[int] = []

    def kill_after_first_batch(rows: int) -> None:
        pages.append(rows)
        if len(pages) == 1:
            first_rotel.kill()

    try:
        exporter = push_exporter(first_rotel.http_endpoint, "http/protobuf", timeout=1)
        with SpanStore(path, create=False) as store:
            result = push_spans(
                store, exporter, endpoint=key, hasher=hasher, batch_size=5, on_batch=kill_after_first_batch
            )
            marked = store.pushed_span_ids(key)
        exporter.shutdown()
    finally:
        first_rotel.stop()

    assert (result.ok, result.failed_batch, result.batches, result.pushed) == (False, 2, 1, 5)
    assert result.error == "the exporter reported a failure"
    assert (result.omitted, result.not_pushed) == (0, len(expected) + 1 - 5)
    assert len(marked) == 5 and marked <= expected
    # The same endpoint, back (a new rotel; its port differs, so the marks' key is passed as it was): it gets
    # exactly the spans the first did not take. Nothing twice, nothing lost.
    with RotelCollector(tmp_path / "rotel-2") as second_rotel, SpanStore(path, create=False) as store:
        exporter = push_exporter(second_rotel.http_endpoint, "http/protobuf")
        rest = push_spans(store, exporter, endpoint=key, hasher=hasher, batch_size=5)
        exporter.shutdown()
        assert (rest.ok, rest.already_pushed, rest.pushed, rest.omitted) == (True, 5, len(expected) - 5, 1)
        arrived = Counter((s["trace_id"], s["span_id"]) for s in received(second_rotel, len(expected) - 5))
        assert set(arrived) == expected - marked and max(arrived.values()) == 1
        assert store.pushed_span_ids(key) == expected


def test_session_and_since_select_what_is_pushed(tmp_path: Path, rotel: RotelCollector):
    path = build_store(tmp_path)
    stored = stored_ids(path)
    demo_session = next(
        s.session for s in stored.values() if s.attributes.get(sc.GEN_AI_AGENT_NAME) == "trip-planner" and s.session
    )
    demo = {key for key, s in stored.items() if s.session == demo_session}

    by_session = push("--endpoint", rotel.http_endpoint, "--store", path, "--session", demo_session[:24])

    assert by_session.exit_code == 0, by_session.output
    assert by_session.output.startswith(f"pushed {len(demo)} new spans")
    assert {(s["trace_id"], s["span_id"]) for s in received(rotel, len(demo))} == demo

    # --since as Unix seconds: the planted rows started last, after every span of the runs.
    planted_start = stored[(RAW_TRACE, RAW_SPAN)].start_ns
    since = f"{planted_start // 1_000_000_000}.{planted_start % 1_000_000_000:09d}"
    late = {key for key, s in stored.items() if s.start_ns >= planted_start and not s.corrupt}
    assert (RAW_TRACE, RAW_SPAN) in late and not (late & demo)
    by_time = push("--endpoint", rotel.http_endpoint, "--store", path, "--since", since)

    assert by_time.exit_code == 0, by_time.output
    assert by_time.output.startswith(f"pushed {len(late)} new span")
    assert {(s["trace_id"], s["span_id"]) for s in received(rotel, len(demo) + len(late))} == demo | late


def test_progress_bar_on_a_terminal(tmp_path: Path, rotel: RotelCollector):
    """stdout a TTY: a progress bar, then the summary; the collector got everything."""
    path = build_store(tmp_path)
    expected = deliverable(path)
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "otel_agentdiag",
            "push",
            "--endpoint",
            rotel.http_endpoint,
            "--store",
            str(path),
            "--batch-size",
            "4",
        ],
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(terminal)
    chunks = []
    while True:
        ready, _, _ = select.select([controller], [], [], WAIT_S)
        if not ready:
            break
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    assert process.wait(WAIT_S) == 0, process.stderr.read() if process.stderr else ""
    if process.stderr:
        process.stderr.close()
    shown = b"".join(chunks).decode("utf-8", errors="replace")
    assert "pushing" in shown and f"{len(expected) + 1}/{len(expected) + 1}" in shown, shown
    assert f"pushed {len(expected)} new spans" in shown
    assert {(s["trace_id"], s["span_id"]) for s in received(rotel, len(expected))} == expected
