"""A minimal OTLP/HTTP receiver for benchmarks, run as a child process on 127.0.0.1.

It decodes each ``POST /v1/traces`` body as an ``ExportTraceServiceRequest`` (so a malformed export is an
error, and spans are counted, not guessed), answers ``200`` with an empty ``ExportTraceServiceResponse``, and
serves the running total at ``GET /count``. It stores nothing: it stands for a collector that keeps up, so the
benchmark measures the sending side. It runs in its own process, so its decoding never holds the sender's GIL
(it still shares the machine's cores, as a collector on the same host would).

Usage from a benchmark::

    with OtlpSink() as sink:
        configure(otlp_endpoint=sink.endpoint, ...)
        ...
        sink.count()   # spans received so far
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class OtlpSink:
    """The receiver as a child process; ``endpoint`` is its base URL (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self.endpoint = ""

    def __enter__(self) -> OtlpSink:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._otlp_sink"], stdout=subprocess.PIPE, text=True
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()  # the child prints its port once it listens
        if not line.strip().isdigit():
            self.__exit__(None, None, None)
            raise RuntimeError(f"the OTLP sink did not start (it printed {line!r})")
        self.endpoint = f"http://127.0.0.1:{int(line)}"
        return self

    def count(self) -> int:
        with urllib.request.urlopen(f"{self.endpoint}/count", timeout=30) as response:
            return int(json.load(response)["spans"])

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


def _serve() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    total = {"spans": 0, "requests": 0}
    lock = threading.Lock()
    empty = ExportTraceServiceResponse().SerializeToString()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces":
                self._reply(404, b"", "text/plain")
                return
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            with lock:
                total["requests"] += 1
                total["spans"] += spans
            self._reply(200, empty, "application/x-protobuf")

        def do_GET(self) -> None:
            with lock:
                answer = json.dumps(total).encode()
            self._reply(200, answer, "application/json")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    _serve()
