"""``agentdiag demo`` with the OTLP collector down: one summary line with the true attempt count, no SDK retry
lines, and the local store still gets the whole trace.

The collector is a real closed port on 127.0.0.1. The demo runs in a subprocess under a small wrapper that counts,
from outside otel-agentdiag, what the SDK's OTLP exporter really did: how often its ``export`` was called and how
many TCP connections were tried to the closed port.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from otel_agentdiag.storage import SpanStore

_ENV_PREFIXES = ("OTEL_", "AGENTDIAG_")
_SUMMARY = re.compile(
    r"otel-agentdiag: (\d+) spans could not be exported after (\d+) attempts; counted as export_failure"
)

_WRAPPER = r"""
import atexit, json, socket, sys

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

counts_file, port, store = sys.argv[1], int(sys.argv[2]), sys.argv[3]
counts = {"exports": 0, "connects": 0}

sdk_export = OTLPSpanExporter.export
def export(self, spans):
    counts["exports"] += 1
    return sdk_export(self, spans)
OTLPSpanExporter.export = export

connect, connect_ex = socket.socket.connect, socket.socket.connect_ex
def counted(address):
    if isinstance(address, tuple) and len(address) >= 2 and address[1] == port:
        counts["connects"] += 1
def counting_connect(self, address):
    counted(address)
    return connect(self, address)
def counting_connect_ex(self, address):
    counted(address)
    return connect_ex(self, address)
socket.socket.connect, socket.socket.connect_ex = counting_connect, counting_connect_ex

def write():
    with open(counts_file, "w") as f:
        json.dump(counts, f)
atexit.register(write)

from otel_agentdiag.cli import cli
cli(["demo", "--store", store], prog_name="agentdiag")
"""


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_demo_with_the_collector_down_says_so_once_with_the_true_attempt_count(tmp_path: Path) -> None:
    port = closed_port()
    store = tmp_path / "traces.db"
    counts_file = tmp_path / "counts.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
    # One batch for the demo's spans (however slow this machine is), so the one summary line covers them all.
    env["OTEL_BSP_SCHEDULE_DELAY"] = "60000"
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(counts_file), str(port), str(store)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    summaries = [m for m in map(_SUMMARY.search, lines) if m]
    assert len(summaries) == 1, proc.stderr
    assert lines == [summaries[0].group(0)], proc.stderr  # nothing else: no "Transient error ... retrying" lines
    assert "Transient error" not in proc.stderr and "retrying" not in proc.stderr
    spans, attempts = int(summaries[0].group(1)), int(summaries[0].group(2))

    counts = json.loads(counts_file.read_text(encoding="utf-8"))
    assert attempts >= 1
    assert counts["exports"] == attempts  # one SDK attempt per call: the count is what the exporter tried
    # Each attempt connected to the closed port; the SDK's http transport (1.45) reconnects once at once inside one.
    assert counts["connects"] in (attempts, 2 * attempts), counts

    with SpanStore(store, create=False) as opened:
        (trace,) = opened.list_traces()
        stored = opened.get_trace(trace.trace_id)
    assert len(stored) == spans  # the local branch got every span the OTLP branch could not export
    assert trace.trace_id[:12] in proc.stdout
