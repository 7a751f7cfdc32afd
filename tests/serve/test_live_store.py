"""Serving a store another process is writing to: a real ``agentdiag serve`` process reads the store while this
process writes runs into it through ``configure()``. Every answer during the writes is a 200 (the read-only
connection never blocks the writer nor fails on its transactions), and the new runs appear in the Jaeger API and
the viewer's runs list without a restart (each request reads the newest committed transaction)."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

from serve_helpers import demo_store, served

import otel_agentdiag as agentdiag

SERVICE = "live-writer"
RUNS = 30
DEADLINE_S = 60.0


def _get(url: str, headers: dict[str, str]) -> tuple[int, Any]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
        return response.status, json.loads(response.read())


def test_runs_written_while_serving_appear_and_every_answer_is_ok(tmp_path: Path) -> None:
    store = demo_store(tmp_path)
    statuses: list[int] = []
    done = threading.Event()
    with served(store) as server:
        url, headers = server.url, server.headers

        def read_while_writing() -> None:
            while not done.is_set():
                for path in ("/api/services", "/api/traces?service=agentdiag-demo&limit=5", "/ui/api/runs?limit=20"):
                    statuses.append(_get(url + path, headers)[0])

        reader = threading.Thread(target=read_while_writing, name="live-reader")
        reader.start()
        try:
            agentdiag.register_names(tools=["lookup"], agents=["live-agent"])
            with agentdiag.configure(store=store, service_name=SERVICE, set_global=False) as handle:
                for n in range(RUNS):
                    with agentdiag.agent_run("live-agent", conversation_id=f"live-{n}"):
                        with agentdiag.tool_call("lookup"):
                            pass
                    if n % 10 == 9:
                        handle.force_flush()  # commit in several transactions while the server reads
        finally:
            done.set()
            reader.join(DEADLINE_S)
        assert statuses and set(statuses) == {200}, sorted(set(statuses))
        # Every batch is committed once configure()'s block has shut down: the next request sees them all.
        _status, services = _get(f"{url}/api/services", headers)
        assert SERVICE in services["data"]
        _status, found = _get(f"{url}/api/traces?service={SERVICE}&limit=100", headers)
        assert len(found["data"]) == RUNS
        _status, runs = _get(f"{url}/ui/api/runs?service={SERVICE}&limit=100", headers)
        assert len(runs["runs"]) == RUNS and {r["agent"] for r in runs["runs"]} == {"live-agent"}
