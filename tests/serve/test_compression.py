"""gzip on the wire: a real ``agentdiag serve`` compresses a large answer for a client that accepts it, keeps its
security headers on it, and sends small answers and clients that do not ask for it the bytes as they are."""

from __future__ import annotations

import gzip
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import big_trace_store, demo_store, only_trace_id, served

from otel_agentdiag.serve.viewer import STATIC_DIR
from otel_agentdiag.storage.reading import ReadOnlyStore

SECURITY_HEADERS = {"x-content-type-options": "nosniff", "x-frame-options": "DENY", "referrer-policy": "no-referrer"}


def fetch(url: str, *, gzip_ok: bool) -> tuple[int, dict[str, str], bytes]:
    """The raw answer (status, lowercase headers, body bytes as sent): urllib never decodes a body itself."""
    headers = {"Accept-Encoding": "gzip"} if gzip_ok else {"Accept-Encoding": "identity"}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
        return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, int]]:
    """A served store holding one trace of (about) 10,001 spans: (the server's URL, the trace id, its spans)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "20000")  # the whole run queued, none dropped
        path = big_trace_store(tmp_path_factory.mktemp("big") / "traces.db")
    with ReadOnlyStore(path) as reader:
        stored = reader.span_count()
    assert stored == 10_001
    with served(path) as url:
        yield url, only_trace_id(path), stored


def _secured(headers: dict[str, str]) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, name
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert not any(name.startswith("access-control-") for name in headers)


@pytest.mark.parametrize("path", ["/api/traces/{id}", "/api/v3/traces/{id}", "/ui/api/runs/{id}"])
def test_a_ten_thousand_span_trace_is_sent_compressed_and_parses(big: tuple[str, str, int], path: str) -> None:
    url, trace_id, stored = big
    status, headers, body = fetch(url + path.format(id=trace_id), gzip_ok=True)
    assert status == 200
    assert headers["content-encoding"] == "gzip" and "accept-encoding" in headers["vary"].lower()
    _secured(headers)
    if path.startswith("/api/") and not path.startswith("/api/v3/"):
        assert headers["cache-control"] == "no-store"
    raw = gzip.decompress(body)
    assert len(raw) > 10 * len(body)  # about 30-fold for these spans
    document: Any = json.loads(raw)
    if path.startswith("/api/v3/"):
        spans = [s for r in document["result"]["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
    elif path.startswith("/api/"):
        (trace,) = document["data"]
        spans = trace["spans"]
    else:
        spans = document["spans"]
    assert len(spans) == stored


def test_without_accept_encoding_the_same_answer_is_sent_as_it_is(big: tuple[str, str, int]) -> None:
    url, trace_id, _stored = big
    _, zipped_headers, zipped = fetch(f"{url}/api/traces/{trace_id}", gzip_ok=True)
    status, headers, body = fetch(f"{url}/api/traces/{trace_id}", gzip_ok=False)
    assert status == 200 and "content-encoding" not in headers
    assert int(headers["content-length"]) == len(body) > 1_000_000
    _secured(headers)
    assert json.loads(body) == json.loads(gzip.decompress(zipped))
    assert zipped_headers["content-type"] == headers["content-type"] == "application/json"


def test_small_answers_and_refusals_are_not_compressed(tmp_path: Path) -> None:
    store = demo_store(tmp_path)
    with served(store) as url:
        status, headers, body = fetch(f"{url}/api/services", gzip_ok=True)
        assert status == 200 and "content-encoding" not in headers  # under 1 KB
        assert json.loads(body)["data"] == ["agentdiag-demo"]
        _secured(headers)
        request = urllib.request.Request(f"{url}/api/services", headers={"Accept-Encoding": "gzip", "Host": "evil"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        with refused.value:
            assert refused.value.code == 421 and "content-encoding" not in refused.value.headers
        page_status, page_headers, page = fetch(f"{url}/runs/{only_trace_id(store)}", gzip_ok=True)
        assert page_status == 200 and "content-encoding" not in page_headers  # the page itself is small
        assert b"<html" in page.lower() and "default-src 'self'" in page_headers["content-security-policy"]
        script_status, script_headers, script = fetch(f"{url}/ui/static/app.js", gzip_ok=True)
        assert script_status == 200 and script_headers["content-encoding"] == "gzip"
        assert gzip.decompress(script) == (STATIC_DIR / "app.js").read_bytes()
        _secured(script_headers)
