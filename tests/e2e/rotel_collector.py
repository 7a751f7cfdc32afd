"""The real rotel collector (a Rust OTLP receiver shipped in the ``rotel`` wheel) on 127.0.0.1, for e2e tests.

Usage::

    reason = unavailable_reason()           # None when the binary runs here; else why not (skip with it)
    with RotelCollector(tmp_path) as rotel:
        configure(otlp_endpoint=rotel.endpoint("grpc"), otlp_protocol="grpc", ...)
        ...
        assert rotel.wait_for_spans(12, timeout=10)
        spans = rotel.spans()               # one dict per span, as rotel decoded it off the wire

rotel runs in the foreground as our child process (``rotel-agent start``) with its own free gRPC and HTTP ports,
exporter ``blackhole``, a detailed debug log of every span it receives (captured in ``console.log``), a Python
trace processor (``--otlp-with-trace-processor``) that appends one JSON line per received span to
``spans.jsonl``, and a metrics processor (``--otlp-with-metrics-processor``) that appends one JSON line per
received metric data point to ``metrics.jsonl`` (:meth:`RotelCollector.metric_points`). The processors run in
rotel's embedded interpreter, so they use the standard library only.

Facts this relies on (rotel 0.0.1a15, whose binary says ``0.0.1-alpha10``):

- The binary links ``libpython3.X.so.1.0``; the child gets ``sysconfig.get_config_var("LIBDIR")`` prepended to
  ``LD_LIBRARY_PATH``. Without a shared libpython it exits 127 at load time: :func:`unavailable_reason` says so.
- The trace and metrics processors share one global namespace: the metrics processor's globals are named apart.
- Both ports are bound before the HTTP port accepts connections, about 20 ms after exec.
- The processor sees the same objects for OTLP/HTTP and OTLP/gRPC: nothing in a span tells the protocol apart.
- Reading an array attribute in the processor reverses that array in what rotel then exports (the JSON line is
  right; only the blackhole sees the reversed copy). Harmless here; do not chain a forwarding rotel after it.
- ``--pid-file`` / ``--log-file`` default to shared ``/tmp`` paths, so each instance gets its own. In the
  foreground rotel writes neither (they are for ``--daemon``): its log goes to stdout, captured in ``console.log``,
  and the child's PID is the ``Popen``'s.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import socket
import subprocess
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
_POLL_S = 0.01
_START_ATTEMPTS = 3
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# Runs inside rotel's embedded Python: standard library only. {out!r} is the JSONL path.
_PROCESSOR = '''\
"""Written by tests/e2e/rotel_collector.py: append one JSON line per received span to OUT."""

import json

OUT = {out!r}


def _value(any_value):
    if any_value is None:
        return None
    value = any_value.value
    kind = type(value).__name__
    if kind == "ArrayValue":
        return [_value(value[i]) for i in range(len(value))]
    if kind == "KeyValueList":
        return {{value[i].key: _value(value[i].value) for i in range(len(value))}}
    if isinstance(value, (bytes, bytearray)):
        return {{"bytes": bytes(value).hex()}}
    return value


def _attributes(key_values):
    return {{kv.key: _value(kv.value) for kv in key_values}}


def _hex(raw):
    return bytes(raw).hex() if raw else None


def _span(span, resource, scope):
    status = span.status
    return {{
        "trace_id": _hex(span.trace_id),
        "span_id": _hex(span.span_id),
        "parent_span_id": _hex(span.parent_span_id),
        "trace_state": span.trace_state,
        "name": span.name,
        "kind": span.kind,
        "attributes": _attributes(span.attributes),
        "events": [{{"name": e.name, "attributes": _attributes(e.attributes)}} for e in span.events],
        "links": [
            {{"trace_id": _hex(l.trace_id), "span_id": _hex(l.span_id), "trace_state": l.trace_state,
              "attributes": _attributes(l.attributes)}}
            for l in span.links
        ],
        "status": {{"code": status.code if status is not None else 0,
                    "message": status.message if status is not None else ""}},
        "resource": resource,
        "scope": scope,
    }}


def process_spans(resource_spans):
    lines = []
    try:
        resource = _attributes(resource_spans.resource.attributes) if resource_spans.resource is not None else {{}}
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name if scope_spans.scope is not None else ""
            for span in scope_spans.spans:
                lines.append(json.dumps(_span(span, resource, scope), sort_keys=True))
    except Exception as exc:  # recorded, so a test fails with the reason instead of waiting for spans
        lines.append(json.dumps({{"processor_error": repr(exc)}}))
    with open(OUT, "a", encoding="utf-8") as out:
        out.write("".join(line + "\\n" for line in lines))
'''


# Runs inside rotel's embedded Python too, in the same global namespace as the trace processor (a name defined in
# both would be the last one loaded in both): so every global here has a name of its own. A metric's data is a
# tagged union (``MetricData.Histogram(h)``, ...): its class name says which, and ``data[0]`` is the value.
# {out!r} is the JSONL path.
_METRICS_PROCESSOR = '''\
"""Written by tests/e2e/rotel_collector.py: append one JSON line per received metric data point to METRICS_OUT."""

import json

METRICS_OUT = {out!r}


def _metric_value(any_value):
    if any_value is None:
        return None
    value = any_value.value
    if type(value).__name__ == "ArrayValue":
        return [_metric_value(value[i]) for i in range(len(value))]
    return value


def _metric_attributes(key_values):
    return {{kv.key: _metric_value(kv.value) for kv in key_values}}


def _metric_point(metric, kind, point, resource, scope):
    line = {{
        "name": metric.name,
        "unit": metric.unit,
        "type": kind,
        "attributes": _metric_attributes(point.attributes),
        "resource": resource,
        "scope": scope,
        "exemplars": [
            {{"trace_id": bytes(e.trace_id).hex(), "span_id": bytes(e.span_id).hex()}} for e in point.exemplars
        ],
    }}
    for field in ("count", "sum", "explicit_bounds", "bucket_counts"):
        if hasattr(point, field):
            found = getattr(point, field)
            line[field] = list(found) if field in ("explicit_bounds", "bucket_counts") else found
    return line


def process_metrics(resource_metrics):
    lines = []
    try:
        found = resource_metrics.resource
        resource = _metric_attributes(found.attributes) if found is not None else {{}}
        for scope_metrics in resource_metrics.scope_metrics:
            scope = scope_metrics.scope.name if scope_metrics.scope is not None else ""
            for metric in scope_metrics.metrics:
                kind = type(metric.data).__name__.rpartition("_")[2]
                for point in metric.data[0].data_points:
                    lines.append(json.dumps(_metric_point(metric, kind, point, resource, scope), sort_keys=True))
    except Exception as exc:  # recorded, so a test fails with the reason instead of waiting for points
        lines.append(json.dumps({{"processor_error": repr(exc)}}))
    with open(METRICS_OUT, "a", encoding="utf-8") as out:
        out.write("".join(line + "\\n" for line in lines))
'''


def rotel_binary() -> Path | None:
    """The ``rotel-agent`` binary inside the installed ``rotel`` wheel, or None when rotel is not installed."""
    try:
        import rotel
    except ImportError:
        return None
    return Path(rotel.__file__).parent / "rotel-agent"


def child_environment() -> dict[str, str]:
    """Our environment minus ``ROTEL_*`` (rotel reads its flags from them), with the interpreter's LIBDIR first
    on ``LD_LIBRARY_PATH`` so the binary finds the shared libpython it links."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("ROTEL_")}
    libdir = sysconfig.get_config_var("LIBDIR")
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, env.get("LD_LIBRARY_PATH")) if p)
    return env


@functools.cache
def unavailable_reason() -> str | None:
    """Why rotel cannot run here (a skip reason), or None when ``rotel-agent --version`` runs.

    Only "not installed" and "cannot be executed or loaded" (exit 127) are reasons; any other failure is left
    for the test to report.
    """
    binary = rotel_binary()
    if binary is None:
        return "rotel is not installed (it comes with the dev extra: pip install -e '.[dev]')"
    if not binary.is_file():
        return f"the rotel wheel has no rotel-agent binary at {binary}"
    try:
        done = subprocess.run(
            [str(binary), "--version"], env=child_environment(), capture_output=True, text=True, timeout=30
        )
    except OSError as exc:
        return f"rotel-agent cannot be executed here ({type(exc).__name__}: {exc})"
    if done.returncode == 127:
        detail = (done.stderr or done.stdout).strip().splitlines()
        return (
            "rotel-agent cannot load its libraries (exit 127"
            + (f": {detail[0]}" if detail else "")
            + f"); it needs libpython{sysconfig.get_python_version()} as a shared library, from LIBDIR "
            f"{sysconfig.get_config_var('LIBDIR')} or the system (apt-get install "
            f"libpython{sysconfig.get_python_version()})"
        )
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _processes_with(marker: str) -> list[int]:
    """PIDs whose command line contains ``marker`` (Linux ``/proc``; empty elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


class RotelCollector:
    """One ``rotel-agent`` child process on 127.0.0.1 (free ports), writing what it receives under ``workdir``.

    Start and stop it with ``with`` (or :meth:`start` / :meth:`stop`); :meth:`kill` simulates a crash.
    """

    def __init__(self, workdir: Path) -> None:
        binary = rotel_binary()
        if binary is None:
            raise RuntimeError("rotel is not installed")
        self.binary = binary
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.spans_path = workdir / "spans.jsonl"
        """One JSON line per span rotel received (written by the trace processor)."""
        self.console_path = workdir / "console.log"
        """rotel's stdout and stderr: its log, with the detailed debug dump of every span received."""
        self.log_path = workdir / "rotel.log"
        self.pid_path = workdir / "rotel.pid"
        self.processor_path = workdir / "jsonl_processor.py"
        self.processor_path.write_text(_PROCESSOR.format(out=str(self.spans_path)))
        self.metrics_path = workdir / "metrics.jsonl"
        """One JSON line per metric data point rotel received (written by the metrics processor)."""
        self.metrics_processor_path = workdir / "jsonl_metrics_processor.py"
        self.metrics_processor_path.write_text(_METRICS_PROCESSOR.format(out=str(self.metrics_path)))
        self.grpc_port = 0
        self.http_port = 0
        self._process: subprocess.Popen[bytes] | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> RotelCollector:
        if self._process is not None:
            raise RuntimeError("rotel already started")
        failures = []
        for _ in range(_START_ATTEMPTS):  # a free port can be taken between our probe and rotel's bind
            self.grpc_port, self.http_port = free_port(), free_port()
            if self.grpc_port == self.http_port:
                continue
            process = self._spawn()
            outcome = self._wait_ready(process)
            if outcome is None:
                self._process = process
                return self
            failures.append(outcome)
        raise RuntimeError(f"rotel did not start: {failures}\n{self.log_text()[-2000:]}")

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [
            str(self.binary),
            "start",
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"127.0.0.1:{self.http_port}",
            "--exporter",
            "blackhole",
            "--otlp-with-trace-processor",
            str(self.processor_path),
            "--otlp-with-metrics-processor",
            str(self.metrics_processor_path),
            "--debug-log",
            "traces",
            "--debug-log-verbosity",
            "detailed",
            "--pid-file",
            str(self.pid_path),
            "--log-file",
            str(self.log_path),
        ]
        with self.console_path.open("ab") as console:
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, env=child_environment()
            )

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> str | None:
        """None once both ports accept connections; else why not (the process is then gone)."""
        # Polling an external process for readiness, with a deadline: there is nothing to wait on instead.
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return f"exited with {process.returncode}"
            if accepts_connections(self.http_port) and accepts_connections(self.grpc_port):
                return None
            time.sleep(_POLL_S)
        self._terminate(process)
        return f"not listening within {START_TIMEOUT_S} s"

    def kill(self) -> None:
        """SIGKILL: the collector vanishes mid-conversation, as in a crash."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM (rotel drains and exits), SIGKILL if it is still there after a bound; then check that no
        process of this instance is left and its ports are closed."""
        process = self._process
        if process is None:
            return
        self._terminate(process)
        assert process.returncode is not None
        left = _processes_with(str(self.processor_path))
        assert left == [], f"rotel processes left: {left}"
        assert not accepts_connections(self.http_port), "rotel's HTTP port still accepts connections"

    @staticmethod
    def _terminate(process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT_S)

    def __enter__(self) -> RotelCollector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- where to send --------------------------------------------------------------------------------
    @property
    def http_endpoint(self) -> str:
        """OTLP/HTTP base URL (``OTEL_EXPORTER_OTLP_ENDPOINT`` style: ``/v1/traces`` not included)."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_endpoint(self) -> str:
        """OTLP/gRPC target; the ``http`` scheme means plaintext."""
        return f"http://127.0.0.1:{self.grpc_port}"

    def endpoint(self, protocol: str) -> str:
        """The endpoint for ``http/protobuf`` or ``grpc``."""
        return self.grpc_endpoint if protocol == "grpc" else self.http_endpoint

    # -- what arrived ---------------------------------------------------------------------------------
    def _lines(self, path: Path | None = None) -> list[dict[str, Any]]:
        try:
            text = (path or self.spans_path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        complete = text[: text.rfind("\n") + 1]  # a line still being written is not read
        return [json.loads(line) for line in complete.splitlines() if line]

    def spans(self) -> list[dict[str, Any]]:
        """Every span received so far, in arrival order. Raises if the processor reported an error."""
        return self._received(self._lines(), "trace")

    def wait_for_spans(self, n: int, timeout: float = START_TIMEOUT_S) -> bool:
        """True once at least ``n`` spans were received, False after ``timeout`` seconds.

        rotel answers the exporter before its pipeline (and so the processor) has seen the spans, so arrival
        is polled, with a deadline.
        """
        return _until(lambda: len(self.spans()) >= n, timeout)

    def metric_points(self) -> list[dict[str, Any]]:
        """Every metric data point received so far, in arrival order (``name``, ``unit``, ``type``, ``attributes``,
        ``count``, ``sum``, ``explicit_bounds``, ``bucket_counts``, ``exemplars``, ``resource``, ``scope``). Raises
        if the processor reported an error."""
        return self._received(self._lines(self.metrics_path), "metrics")

    def wait_for_metric(self, name: str, timeout: float = START_TIMEOUT_S) -> bool:
        """True once a data point of metric ``name`` was received, False after ``timeout`` seconds (polled, as
        :meth:`wait_for_spans`)."""
        return _until(lambda: any(point["name"] == name for point in self.metric_points()), timeout)

    @staticmethod
    def _received(lines: list[dict[str, Any]], what: str) -> list[dict[str, Any]]:
        """The JSON lines a processor wrote, or an AssertionError naming the errors it reported."""
        errors = [line["processor_error"] for line in lines if "processor_error" in line]
        if errors:
            raise AssertionError(f"the rotel {what} processor failed: {errors}")
        return lines

    def log_text(self) -> str:
        """rotel's console output and log file, colour codes removed."""
        parts = []
        for path in (self.console_path, self.log_path):
            if path.exists():
                parts.append(path.read_text(encoding="utf-8", errors="replace"))
        return _ANSI.sub("", "\n".join(parts))


def _until(arrived: Callable[[], bool], timeout: float) -> bool:
    """True once ``arrived()`` is, False after ``timeout`` seconds. rotel answers the exporter before its pipeline
    (and so the processor) has seen the data, and writes to files: there is nothing to wait on but the files."""
    deadline = time.monotonic() + timeout
    while not arrived():
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True
