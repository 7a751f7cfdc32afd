"""gzip on the wire: a large answer is compressed for a client across a network that accepts it, with its security
headers on it; small answers, clients that do not ask for it, and loopback clients (a real ``agentdiag serve`` on
127.0.0.1: the bytes cost nothing to move there) get the bytes as they are.

The application sees a client that is not on loopback through Starlette's in-process client (its address is
``testclient``), as a remote server's Grafana or Jaeger UI would be seen."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import big_trace_store, client, demo_store, only_trace_id, served

from otel_agentdiag.serve.viewer import STATIC_DIR
from otel_agentdiag.storage.reading import ReadOnlyStore

SECURITY_HEADERS = {"x-content-type-options": "nosniff", "x-frame-options": "DENY", "referrer-policy": "no-referrer"}


def fetch(url: str, *, gzip_ok: bool, token: str) -> tuple[int, dict[str, str], bytes]:
    """The raw answer (status, lowercase headers, body bytes as sent): urllib never decodes a body itself."""
    headers = {"Accept-Encoding": "gzip"} if gzip_ok else {"Accept-Encoding": "identity"}
    headers["Authorization"] = f"Bearer {token}"
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
        return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one trace of 10,001 spans."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "20000")  # the whole run queued, none dropped
        path = big_trace_store(tmp_path_factory.mktemp("big") / "traces.db")
    with ReadOnlyStore(path) as reader:
        stored = reader.span_count()
    assert stored == 10_001
    return path


@pytest.fixture(scope="module")
def big(big_store: Path) -> Iterator[tuple[str, str, int, str]]:
    """That store served by a real ``agentdiag serve`` on loopback: (its URL, the trace id, its spans, its
    token)."""
    with served(big_store) as server:
        yield server.url, only_trace_id(big_store), 10_001, server.token


def _secured(headers: dict[str, str]) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, name
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert not any(name.startswith("access-control-") for name in headers)


@pytest.mark.parametrize("path", ["/api/traces/{id}", "/api/v3/traces/{id}", "/ui/api/runs/{id}"])
def test_a_ten_thousand_span_trace_is_sent_compressed_across_a_network(big_store: Path, path: str) -> None:
    trace_id = only_trace_id(big_store)
    with client(big_store) as http:  # not a loopback address
        response = http.get(path.format(id=trace_id), headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    headers = {k.lower(): v for k, v in response.headers.items()}
    assert headers["content-encoding"] == "gzip" and "accept-encoding" in headers["vary"].lower()
    _secured(headers)
    if path.startswith("/api/") and not path.startswith("/api/v3/"):
        assert headers["cache-control"] == "no-store"
    raw = response.content  # decoded by the client
    assert len(raw) > 10 * int(headers["content-length"])  # about 30-fold for these spans
    document: Any = json.loads(raw)
    if path.startswith("/api/v3/"):
        spans = [s for r in document["result"]["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
    elif path.startswith("/api/"):
        (trace,) = document["data"]
        spans = trace["spans"]
    else:
        spans = document["spans"]
    assert len(spans) == 10_001


def test_a_loopback_client_gets_the_answer_as_it_is(big: tuple[str, str, int, str]) -> None:
    """On loopback compressing only spends the CPU both ends share: even a client that accepts gzip gets the
    bytes as they are."""
    url, trace_id, stored, token = big
    status, headers, body = fetch(f"{url}/api/traces/{trace_id}", gzip_ok=True, token=token)
    assert status == 200 and "content-encoding" not in headers
    _secured(headers)
    (trace,) = json.loads(body)["data"]
    assert len(trace["spans"]) == stored


def test_without_accept_encoding_the_same_answer_is_sent_as_it_is(big_store: Path) -> None:
    trace_id = only_trace_id(big_store)
    with client(big_store) as http:
        zipped = http.get(f"/api/traces/{trace_id}", headers={"Accept-Encoding": "gzip"})
        plain = http.get(f"/api/traces/{trace_id}", headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "content-encoding" not in plain.headers
    assert int(plain.headers["content-length"]) == len(plain.content) > 1_000_000
    _secured({k.lower(): v for k, v in plain.headers.items()})
    assert zipped.headers["content-encoding"] == "gzip"
    assert plain.json() == zipped.json()
    assert zipped.headers["content-type"] == plain.headers["content-type"] == "application/json"


def test_small_answers_and_refusals_are_not_compressed(tmp_path: Path) -> None:
    store = demo_store(tmp_path)
    gzip_ok = {"Accept-Encoding": "gzip"}
    with client(store) as http:  # not a loopback address: compressed where it is worth it
        services = http.get("/api/services", headers=gzip_ok)
        assert services.status_code == 200 and "content-encoding" not in services.headers  # under 1 KB
        assert services.json()["data"] == ["agentdiag-demo"]
        _secured({k.lower(): v for k, v in services.headers.items()})
        refused = http.get("/api/services", headers={**gzip_ok, "Host": "evil"})
        assert refused.status_code == 421 and "content-encoding" not in refused.headers
        page = http.get(f"/runs/{only_trace_id(store)}", headers=gzip_ok)
        assert page.status_code == 200 and "content-encoding" not in page.headers  # the page itself is small
        assert b"<html" in page.content.lower() and "default-src 'self'" in page.headers["content-security-policy"]
        script = http.get("/ui/static/app.js", headers=gzip_ok)
        assert script.status_code == 200 and script.headers["content-encoding"] == "gzip"
        assert script.content == (STATIC_DIR / "app.js").read_bytes()
        _secured({k.lower(): v for k, v in script.headers.items()})
