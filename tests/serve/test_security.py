"""The server's safety checks through the real app: methods, the Host header (DNS rebinding), the bearer token of
a remote server, the response headers, no CORS, never content remotely, short errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_helpers import client, demo_store, only_trace_id
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from otel_agentdiag.serve import ServeSettings, create_app

TOKEN = "s3cret-token-of-the-test-0123456789"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store(tmp_path_factory.mktemp("demo"), capture_content=True)


def probed(settings: ServeSettings, seen: list[bool]) -> Starlette:
    """The real app with one more route that notes ``request.state.local`` (the viewer's switch for content)."""
    app = create_app(settings)

    def probe(request: Request) -> PlainTextResponse:
        seen.append(request.state.local)
        return PlainTextResponse("ok")

    app.router.routes.append(Route("/probe", probe))
    return app


def remote(store: Path) -> TestClient:
    settings = ServeSettings(store_path=store, host="192.0.2.10", port=8080, allow_remote=True, token=TOKEN)
    return TestClient(create_app(settings), base_url="http://192.0.2.10:8080")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_only_get_and_head(demo: Path, method: str) -> None:
    with client(demo) as http:
        response = http.request(method, "/api/services")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
    assert response.json()["errors"][0]["code"] == 405


@pytest.mark.parametrize("host", ["evil.example:16687", "127.0.0.1:1", "localhost", "127.0.0.1.nip.io:16687", ""])
def test_a_foreign_host_header_is_421(demo: Path, host: str) -> None:
    with client(demo) as http:
        response = http.get("/api/services", headers={"host": host})
        v3 = http.get("/api/v3/services", headers={"host": host})
        page = http.get("/", headers={"host": host})
    assert response.status_code == v3.status_code == page.status_code == 421
    assert response.json()["errors"][0]["code"] == 421
    assert v3.json()["error"]["httpCode"] == 421
    assert page.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize("host", ["127.0.0.1:16687", "localhost:16687", "[::1]:16687", "LOCALHOST:16687"])
def test_loopback_names_are_accepted_on_a_loopback_bind(demo: Path, host: str) -> None:
    with client(demo) as http:
        assert http.get("/api/services", headers={"host": host}).status_code == 200


def test_security_headers_and_no_cors(demo: Path) -> None:
    with client(demo) as http:
        api = http.get("/api/services", headers={"origin": "http://evil.example"})
        viewer = http.get("/ui/api/runs", headers={"origin": "http://evil.example"})
        missing = http.get("/nothing-here", headers={"origin": "http://evil.example"})
    for response in (api, viewer, missing):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert not [name for name in response.headers if name.lower().startswith("access-control-")]
    assert api.headers["cache-control"] == "no-store"
    assert viewer.status_code == 200 and viewer.headers["cache-control"] == "no-store"  # may hold content


def test_remote_needs_the_token(demo: Path) -> None:
    with remote(demo) as http:
        assert http.get("/api/services").status_code == 401
        assert http.get("/api/services", headers={"authorization": "Bearer wrong-token-0123456789"}).status_code == 401
        assert http.get("/api/services", headers={"authorization": TOKEN}).status_code == 401  # no scheme
        assert http.get("/api/services", headers={"authorization": f"Basic {TOKEN}"}).status_code == 401
        denied = http.get("/", headers={"authorization": "Bearer nope"})
        assert denied.status_code == 401 and denied.headers["www-authenticate"] == "Bearer"
        ok = http.get("/api/services", headers={"authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and ok.json()["data"] == ["agentdiag-demo"]
        wrong_host = http.get("/api/services", headers={"authorization": f"Bearer {TOKEN}", "host": "localhost:8080"})
        assert wrong_host.status_code == 421  # a remote bind answers only to its own address


def test_content_is_never_served_remotely(demo: Path) -> None:
    """The store holds captured content (the demo with --capture-content); the API serves the strict
    projection to everyone, and a remote server never marks a request local."""
    from otel_agentdiag.storage.reading import ReadOnlyStore

    trace_id = only_trace_id(demo)
    with ReadOnlyStore(demo) as reader:
        content = reader.trace_content(trace_id)
    assert content, "the demo captured content"
    samples = [c.projection for c in content if len(c.projection) > 12]
    headers = {"authorization": f"Bearer {TOKEN}"}
    with remote(demo) as http:
        bodies = [
            http.get(f"/api/traces/{trace_id}", headers=headers).text,
            http.get(f"/api/v3/traces/{trace_id}", headers=headers).text,
            http.get("/api/traces", params={"service": "agentdiag-demo"}, headers=headers).text,
        ]
    local_flags: list[bool] = []
    settings = ServeSettings(store_path=demo, host="192.0.2.10", port=8080, allow_remote=True, token=TOKEN)
    with TestClient(probed(settings, local_flags), base_url="http://192.0.2.10:8080", client=("127.0.0.1", 1)) as http:
        assert http.get("/probe", headers=headers).status_code == 200
    assert local_flags == [False]  # even a loopback client: the server is remote
    for body in bodies:
        assert "Lisbon" not in body and "day trips" not in body
        for sample in samples:
            assert sample not in body


def test_a_loopback_client_of_a_loopback_server_is_local(demo: Path) -> None:
    seen: list[bool] = []
    settings = ServeSettings(store_path=demo)
    app = probed(settings, seen)
    headers = {"authorization": f"Bearer {settings.token}"}

    with TestClient(app, base_url="http://127.0.0.1:16687", client=("127.0.0.1", 5000), headers=headers) as http:
        http.get("/probe")
    with TestClient(app, base_url="http://127.0.0.1:16687", client=("203.0.113.5", 5000), headers=headers) as http:
        http.get("/probe")
    assert seen == [True, False]
