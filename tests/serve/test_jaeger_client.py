"""A real, independently written client of the Jaeger query API from PyPI (jaeger-mcp 0.6.1's ``JaegerClient``)
driven against a real ``agentdiag serve``, in a pinned environment of its own (it pins mcp<2). It sends the server's
token as a bearer header, as jaeger-mcp does with ``JAEGER_TOKEN``; without it, it reads nothing."""

from __future__ import annotations

import json
from pathlib import Path

from isolated_envs import run_in
from serve_helpers import demo_store, only_trace_id, served

SCRIPT = Path(__file__).with_name("jaeger_client_script.py")


def test_jaeger_mcp_reads_the_demo(tmp_path: Path) -> None:
    store = demo_store(tmp_path)
    trace_id = only_trace_id(store)
    with served(store) as server:
        done = run_in(
            "jaeger_client",
            [str(SCRIPT), "agentdiag-demo"],
            env={"JAEGER_URL": server.url, "JAEGER_TOKEN": server.token},
        )
        refused = run_in(
            "jaeger_client",
            [str(SCRIPT), "agentdiag-demo"],
            env={"JAEGER_URL": server.url, "JAEGER_RETRY_ATTEMPTS": "0"},
        )
    assert refused.returncode != 0 and "401" in refused.stderr, refused.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["services"] == ["agentdiag-demo"]
    assert seen["found"] == [trace_id]
    assert seen["root_service"] == "agentdiag-demo"
    assert seen["span_count"] == seen["trace_spans"] == 12
    assert seen["trace_root"] == "invoke_agent trip-planner"
    assert seen["errors"] == seen["trace_errors"] == 1  # the demo's failed convert_currency call
    assert "execute_tool convert_currency" in seen["operations"]
    assert seen["dependencies"] == 0
