"""An OTLP/HTTP receiver that goes down and comes back on command, run as a child process on 127.0.0.1.

It stands for a collector that restarts or flaps. While **up** it decodes each ``POST /v1/traces`` body as an
``ExportTraceServiceRequest`` (a malformed export is a 400), counts the spans and answers ``200``. While
**down** its port is closed: the listening socket is closed and every open connection is shut, so a sender's
next request is refused (``ECONNREFUSED``), as with a collector that is not running. It comes back on the same
port.

The parent drives it through the child's stdin and reads one JSON line per command on its stdout:
``up``, ``down``, ``count`` (``{"spans", "requests", "rejected_requests", "up"}``) and ``quit``.

Usage from a benchmark::

    with FlappingCollector() as collector:
        configure(otlp_endpoint=collector.endpoint, ...)
        collector.down()
        collector.up()
        collector.count()["spans"]
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

START_TIMEOUT_S = 30.0
"""How long the child may take to import protobuf and listen."""
REBIND_TIMEOUT_S = 10.0
"""How long ``up`` retries binding the same port (a closed port lingers briefly in the kernel)."""


class FlappingCollector:
    """The receiver as a child process; ``endpoint`` is its base URL (``http://127.0.0.1:PORT``), stable across
    down/up cycles. Every command waits for the child's answer (no sleeps)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self.endpoint = ""
        self.is_up = False
        self.transitions = 0
        """How many times it went down or came back up."""

    def __enter__(self) -> FlappingCollector:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._flapping_collector"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            answer = self._read()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.endpoint = f"http://127.0.0.1:{int(answer['port'])}"
        self.is_up = True
        return self

    def _read(self) -> dict[str, Any]:
        assert self._process is not None and self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the flapping collector exited (status {self._process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the flapping collector failed: {answer['error']}")
        return answer

    def _command(self, word: str) -> dict[str, Any]:
        with self._lock:
            assert self._process is not None and self._process.stdin is not None
            self._process.stdin.write(word + "\n")
            self._process.stdin.flush()
            return self._read()

    def up(self) -> None:
        """Listen again on the same port (returns once it accepts connections)."""
        self._command("up")
        if not self.is_up:
            self.transitions += 1
        self.is_up = True

    def down(self) -> None:
        """Close the port and every open connection (returns once connections are refused)."""
        self._command("down")
        if self.is_up:
            self.transitions += 1
        self.is_up = False

    def count(self) -> dict[str, Any]:
        """``{"spans", "requests", "rejected_requests", "up"}`` received so far (works while down too)."""
        return self._command("count")

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            assert process.stdin is not None
            process.stdin.write("quit\n")
            process.stdin.flush()
            process.wait(10)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
        finally:
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()


# -- the child --------------------------------------------------------------------------------------------
class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, port: int, handler: type[BaseHTTPRequestHandler]) -> None:
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", port), handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.connections_lock:
                self.connections.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection this collector cut on purpose (going down mid-request) or its sender dropped ends its
        handler with an ``OSError`` (or a ``ValueError`` on a closed file): expected, not printed. Anything else
        is printed as socketserver does."""
        if isinstance(sys.exc_info()[1], (OSError, ValueError)):
            return
        super().handle_error(request, client_address)

    def close_everything(self) -> None:
        """Stop accepting, close the port, and cut every open connection (keep-alive ones included)."""
        self.shutdown()
        self.server_close()
        with self.connections_lock:
            open_connections = list(self.connections)
        for connection in open_connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    totals = {"spans": 0, "requests": 0, "rejected_requests": 0}
    lock = threading.Lock()
    empty = ExportTraceServiceResponse().SerializeToString()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces":
                self._reply(404, b"", "text/plain")
                return
            try:
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
            except Exception:  # noqa: BLE001 - a malformed export is the sender's error: 400, counted
                with lock:
                    totals["rejected_requests"] += 1
                self._reply(400, b"", "text/plain")
                return
            spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            with lock:  # counted before the answer: a 200 the sender saw is always in the count
                totals["requests"] += 1
                totals["spans"] += spans
            self._reply(200, empty, "application/x-protobuf")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    def start(port: int) -> _Server:
        deadline = time.monotonic() + REBIND_TIMEOUT_S
        pause = threading.Event()
        while True:
            try:
                server = _Server(port, Handler)
                break
            except OSError:
                if port == 0 or time.monotonic() > deadline:
                    raise
                pause.wait(0.05)  # the old socket is still being torn down; retry with a deadline
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return server

    def answer(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    first = start(0)
    port = int(first.server_address[1])
    server: _Server | None = first
    answer({"port": port})
    for line in sys.stdin:
        word = line.strip()
        try:
            if word == "up":
                if server is None:
                    server = start(port)
                answer({"up": True})
            elif word == "down":
                if server is not None:
                    server.close_everything()
                    server = None
                answer({"up": False})
            elif word == "count":
                with lock:
                    answer({**totals, "up": server is not None})
            elif word == "quit":
                break
            else:
                answer({"error": f"unknown command {word!r}"})
        except OSError as exc:
            answer({"error": f"{type(exc).__name__}: {exc}"})
    if server is not None:
        server.close_everything()


if __name__ == "__main__":
    _serve()
