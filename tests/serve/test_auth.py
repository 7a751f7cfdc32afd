"""``agentdiag serve`` trusts no one by default: every request needs the token, loopback included.

Through the real app in process (every route, every way of presenting a credential, the exchange of ``?token=``
for a cookie) and through a real ``agentdiag serve`` process: another user of the machine (a child that drops to
uid 65534) gets 401 and nothing else on every route; the token shows in no log line but the URL line and in no
answer; ``--token-file``, ``AGENTDIAG_SERVE_TOKEN``, ``--insecure-no-token`` and ``--open`` as a user runs them;
Grafana's Jaeger data source with the header its provisioning file sends.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from serve_helpers import client, demo_store, only_trace_id, served
from starlette.routing import Match
from starlette.testclient import TestClient

from otel_agentdiag.cli import cli
from otel_agentdiag.serve import ServeSettings, create_app
from otel_agentdiag.serve.security import cookie_name, cookie_value

NOBODY = 65534
SERVICE = "agentdiag-demo"
ROOT = Path(__file__).resolve().parents[2]
DATASOURCES = ROOT / "collector-config" / "grafana" / "provisioning" / "datasources" / "datasources.yaml"
V3_WINDOW = "query.start_time_min=2000-01-01T00:00:00Z&query.start_time_max=2999-01-01T00:00:00Z"
PAGE_REFUSAL = (
    "unauthorized: open the URL that agentdiag serve printed when it started (it carries the token once;"
    " this browser then keeps a cookie). API clients send Authorization: Bearer <token>.\n"
)
API_REFUSAL = "unauthorized: send the token of agentdiag serve as Authorization: Bearer <token>"


def paths(trace_id: str) -> list[str]:
    """A request to every route of the server (``test_the_paths_reach_every_route`` keeps it complete)."""
    return [
        "/",
        f"/runs/{trace_id}",
        f"/runs/{trace_id}?span=0123456789abcdef",
        "/conversations",
        "/ui/api/runs",
        f"/ui/api/runs/{trace_id}",
        "/ui/api/conversations",
        "/ui/static/index.html",
        "/ui/static/app.js",
        "/ui/static/app.css",
        "/ui/static/favicon.svg",
        "/api/services",
        f"/api/services/{SERVICE}/operations",
        f"/api/operations?service={SERVICE}",
        f"/api/traces?service={SERVICE}",
        f"/api/traces?traceID={trace_id}",
        f"/api/traces/{trace_id}",
        "/api/dependencies",
        "/api/v3/services",
        f"/api/v3/operations?service={SERVICE}",
        f"/api/v3/traces/{trace_id}",
        f"/api/v3/traces?query.service_name={SERVICE}&{V3_WINDOW}",
        f"/api/v3/trace-summaries?query.serviceName={SERVICE}"
        "&query.startTimeMin=2000-01-01T00:00:00Z&query.startTimeMax=2999-01-01T00:00:00Z&query.searchDepth=20",
        "/no-such-page",
        "/api/no-such-endpoint",
    ]


def refusal(path: str) -> Any:
    """The one answer a request without the token gets on ``path``: nothing of the store in it."""
    if path.startswith("/api/v3/"):
        return {"error": {"httpCode": 401, "message": API_REFUSAL}}
    if path.startswith("/api/"):
        return {"data": None, "total": 0, "limit": 0, "offset": 0, "errors": [{"code": 401, "msg": API_REFUSAL}]}
    if path.startswith("/ui/api/"):
        return {"error": API_REFUSAL}
    return PAGE_REFUSAL


def check_refused(path: str, status: int, content_type: str, body: bytes) -> None:
    assert status == 401, path
    expected = refusal(path)
    if isinstance(expected, str):
        assert content_type.startswith("text/plain"), path
        assert body.decode("utf-8") == expected, path
    else:
        assert content_type == "application/json", path
        assert json.loads(body) == expected, path


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo with content captured: what another user must never read."""
    return demo_store(tmp_path_factory.mktemp("demo"), capture_content=True)


@pytest.fixture(scope="module")
def trace_id(demo: Path) -> str:
    return only_trace_id(demo)


@pytest.fixture
def anonymous(demo: Path) -> Iterator[tuple[TestClient, ServeSettings]]:
    """The real app on its default loopback address, a loopback client with no credential."""
    settings = ServeSettings(store_path=demo)
    with TestClient(create_app(settings), base_url="http://127.0.0.1:16687", client=("127.0.0.1", 40000)) as http:
        yield http, settings


def test_the_paths_reach_every_route(demo: Path, trace_id: str) -> None:
    app = create_app(ServeSettings(store_path=demo))
    requested = [p.split("?", 1)[0] for p in paths(trace_id)]
    for route in app.routes:
        reached = [p for p in requested if route.matches({"type": "http", "path": p, "method": "GET"})[0] != Match.NONE]
        assert reached, f"no request in paths() reaches {route}"


def test_without_the_token_every_route_is_401_and_says_nothing(
    anonymous: tuple[TestClient, ServeSettings], trace_id: str
) -> None:
    http, _settings = anonymous
    for path in paths(trace_id):
        for method in ("GET", "HEAD"):
            response = http.request(method, path)
            if method == "HEAD":  # (Uvicorn sends no body on HEAD: see test_another_user_reads_nothing...)
                assert response.status_code == 401, path
                continue
            check_refused(path, response.status_code, response.headers["content-type"], response.content)
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.headers["cache-control"] == "no-store"
            assert "set-cookie" not in response.headers


@pytest.mark.parametrize(
    "how",
    [
        "bearer-wrong",
        "bearer-prefix",
        "bearer-suffix",
        "bearer-no-scheme",
        "basic",
        "cookie-wrong",
        "cookie-is-the-token",
        "cookie-of-another-port",
        "query-wrong",
        "query-one-wrong",
        "query-empty",
    ],
)
def test_a_wrong_credential_is_401(anonymous: tuple[TestClient, ServeSettings], trace_id: str, how: str) -> None:
    http, settings = anonymous
    token = settings.token
    assert token is not None
    right_cookie = cookie_value(token)
    headers: dict[str, str] = {}
    query = ""
    if how == "bearer-wrong":
        headers["authorization"] = "Bearer " + "x" * len(token)
    elif how == "bearer-prefix":
        headers["authorization"] = f"Bearer {token[:-1]}"
    elif how == "bearer-suffix":
        headers["authorization"] = f"Bearer {token}x"
    elif how == "bearer-no-scheme":
        headers["authorization"] = token
    elif how == "basic":
        headers["authorization"] = f"Basic {token}"
    elif how == "cookie-wrong":
        headers["cookie"] = f"{cookie_name(16687)}={'0' * len(right_cookie)}"
    elif how == "cookie-is-the-token":
        headers["cookie"] = f"{cookie_name(16687)}={token}"
    elif how == "cookie-of-another-port":
        headers["cookie"] = f"{cookie_name(16688)}={right_cookie}"
    elif how == "query-wrong":
        query = "?token=" + "y" * len(token)
    elif how == "query-one-wrong":  # the right token beside a wrong one is no credential either
        query = f"?token={token}&token=wrong"
    elif how == "query-empty":
        query = "?token="
    for path in (f"/ui/api/runs/{trace_id}", "/api/services", "/"):
        response = http.get(path + query, headers=headers, follow_redirects=False)
        check_refused(path, response.status_code, response.headers["content-type"], response.content)
        assert "set-cookie" not in response.headers


def test_every_route_answers_the_bearer_token_and_no_answer_holds_it(
    anonymous: tuple[TestClient, ServeSettings], trace_id: str
) -> None:
    http, settings = anonymous
    assert settings.token is not None
    for path in paths(trace_id):
        response = http.get(path, headers={"authorization": f"Bearer {settings.token}"})
        assert response.status_code == (404 if "no-such" in path else 200), path
        assert settings.token not in response.text, path
        assert settings.token not in str(response.headers), path


def test_the_url_token_becomes_a_cookie_and_leaves_the_url(
    anonymous: tuple[TestClient, ServeSettings], trace_id: str
) -> None:
    """What the owner's browser does with the printed URL: a 303 to the same URL without ``token`` (the other
    parameters as they were), the cookie ``HttpOnly; SameSite=Strict; Path=/``, holding no token; then the
    cookie alone opens every route."""
    http, settings = anonymous
    token = settings.token
    assert token is not None
    first = http.get(f"/runs/{trace_id}?span=00f067aa0ba902b7&token={token}&x=a%20b", follow_redirects=False)
    assert first.status_code == 303 and first.content == b""
    assert first.headers["location"] == f"/runs/{trace_id}?span=00f067aa0ba902b7&x=a%20b"
    assert first.headers["cache-control"] == "no-store"
    set_cookie = first.headers["set-cookie"]
    name_value, *attributes = [part.strip() for part in set_cookie.split(";")]
    assert name_value == f"{cookie_name(16687)}={cookie_value(token)}"
    assert sorted(attributes) == ["HttpOnly", "Path=/", "SameSite=Strict"]
    assert token not in set_cookie
    head = http.head(f"/?token={token}", follow_redirects=False)
    assert head.status_code == 303 and head.headers["location"] == "/"
    http.cookies.clear()  # the client kept the cookie: send it by hand, as a browser does
    cookie = {"cookie": f"{cookie_name(16687)}={cookie_value(token)}"}
    for path in paths(trace_id):
        assert http.get(path, headers=cookie).status_code == (404 if "no-such" in path else 200), path
    assert http.get("/api/services", headers=cookie).json()["data"] == [SERVICE]


def test_a_navigation_another_page_began_gets_a_page_that_moves_on(
    anonymous: tuple[TestClient, ServeSettings], trace_id: str
) -> None:
    """A browser does not send a ``SameSite=Strict`` cookie on a redirect of a navigation another site began
    (the ``file://`` page ``--open`` starts the browser with): that navigation gets the cookie and a page that
    moves on by a meta refresh from this site. The page never holds the token."""
    http, settings = anonymous
    token = settings.token
    assert token is not None
    answer = http.get(f"/runs/{trace_id}?token={token}", headers={"sec-fetch-site": "cross-site"})
    assert answer.status_code == 200 and answer.headers["content-type"] == "text/html; charset=utf-8"
    assert f'content="0; url=/runs/{trace_id}"' in answer.text
    assert token not in answer.text
    assert answer.headers["set-cookie"].startswith(f"{cookie_name(16687)}={cookie_value(token)};")
    assert "default-src 'self'" in answer.headers["content-security-policy"]


@pytest.mark.parametrize("path", ["//evil.example/x", "/\\evil.example/x", "///evil.example"])
def test_the_redirect_stays_on_this_server(anonymous: tuple[TestClient, ServeSettings], path: str) -> None:
    http, settings = anonymous
    url = http.base_url.copy_with(raw_path=f"{path}?token={settings.token}".encode())  # not a //host URL
    response = http.get(url, follow_redirects=False)
    location = response.headers["location"]
    assert response.status_code == 303 and location.startswith("/") and not location.startswith(("//", "/\\"))


def test_the_cookie_is_named_after_the_port(demo: Path) -> None:
    """Cookies are shared by every port of a host: each server names its own, so two servers on one machine do
    not overwrite each other's, and the other's cookie is no credential here."""
    one = ServeSettings(store_path=demo, port=16687)
    other = ServeSettings(store_path=demo, port=16690)
    assert cookie_name(one.port) != cookie_name(other.port)
    assert one.token != other.token  # a random token each time
    with TestClient(create_app(other), base_url="http://127.0.0.1:16690") as http:
        cookie = {"cookie": f"{cookie_name(16690)}={cookie_value(one.token or '')}"}
        assert http.get("/api/services", headers=cookie).status_code == 401


def test_settings_make_a_token_and_refuse_an_empty_one(demo: Path) -> None:
    settings = ServeSettings(store_path=demo)
    assert settings.token and len(settings.token) >= 40
    assert settings.token not in repr(settings)
    with pytest.raises(ValueError, match="token is required"):
        ServeSettings(store_path=demo, token="")
    with pytest.raises(ValueError, match="loopback host only"):
        ServeSettings(store_path=demo, host="192.0.2.10", allow_remote=True, insecure_no_token=True)
    assert ServeSettings(store_path=demo, token="t" * 20, insecure_no_token=True).token is None


def test_insecure_no_token_serves_everyone(demo: Path, trace_id: str) -> None:
    with client(demo, insecure_no_token=True) as http:
        assert http.token is None  # type: ignore[attr-defined]
        assert http.get("/api/services").json()["data"] == [SERVICE]
        assert http.get(f"/ui/api/runs/{trace_id}").status_code == 200
        assert http.get("/?token=anything", follow_redirects=False).status_code == 200  # nothing to exchange


def test_a_remote_server_takes_the_cookie_too_and_never_marks_content(demo: Path, trace_id: str) -> None:
    token = "a-remote-token-0123456789abcdef"
    settings = ServeSettings(store_path=demo, host="192.0.2.10", port=8080, allow_remote=True, token=token)
    with TestClient(create_app(settings), base_url="http://192.0.2.10:8080") as http:
        assert http.get("/ui/api/runs").status_code == 401
        assert http.get(f"/?token={token}", follow_redirects=False).status_code == 303
        http.cookies.clear()
        run = http.get(f"/ui/api/runs/{trace_id}", headers={"cookie": f"{cookie_name(8080)}={cookie_value(token)}"})
    assert run.status_code == 200 and "Lisbon" not in run.text


def test_grafana_s_data_source_sends_the_header_its_provisioning_names(demo: Path, trace_id: str) -> None:
    """The provisioned data source (collector-config/grafana) sends ``httpHeaderName1: httpHeaderValue1`` with
    ``${AGENTDIAG_SERVE_TOKEN}`` expanded: Grafana's calls (health check, pickers, search, trace by id) pass with
    it and are refused without it."""
    with DATASOURCES.open(encoding="utf-8") as handle:
        sources = {s["uid"]: s for s in yaml.safe_load(handle)["datasources"]}
    source = sources["agentdiag-serve"]
    name = source["jsonData"]["httpHeaderName1"]
    calls = [
        "/api/services",
        f"/api/services/{SERVICE}/operations",
        f"/api/traces?service={SERVICE}&operation=all&tags=%7B%7D&limit=20&start=0&end=9999999999999999",
        f"/api/traces/{trace_id}",
    ]
    settings = ServeSettings(store_path=demo)
    value = source["secureJsonData"]["httpHeaderValue1"].replace("${AGENTDIAG_SERVE_TOKEN}", settings.token)
    with TestClient(create_app(settings), base_url="http://127.0.0.1:16687") as grafana:
        for call in calls:
            assert grafana.get(call, headers={name: value}).status_code == 200, call
            assert grafana.get(call).status_code == 401, call


# --- a real `agentdiag serve` -------------------------------------------------------------------------------


def _request(port: int, method: str, path: str, headers: dict[str, str]) -> tuple[int, str, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        return response.status, response.getheader("content-type", ""), response.read()
    finally:
        connection.close()


def _as_nobody(port: int, requests: list[tuple[str, str, dict[str, str]]]) -> list[tuple[int, str, str]]:
    """Each request made by a child process that has dropped to uid/gid 65534 (another user of this machine):
    (status, content type, body as text)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: another user, over loopback, with no token
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            assert os.getuid() == os.geteuid() == NOBODY
            answers = []
            for method, path, headers in requests:
                status, content_type, body = _request(port, method, path, headers)
                answers.append([status, content_type, body.decode("utf-8", "replace")])
            with os.fdopen(write_end, "w", encoding="utf-8") as out:
                json.dump(answers, out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as pipe:
        text = pipe.read()
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child as uid 65534 failed"
    return [(int(s), str(c), str(b)) for s, c, b in json.loads(text)]


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.skipif(not hasattr(os, "fork") or os.geteuid() != 0, reason="needs root, to become another user")
def test_another_user_reads_nothing_from_a_loopback_server(demo: Path, trace_id: str) -> None:
    """The attack of issue 33: uid 65534 on the same machine asks the owner's loopback server for every route,
    with no token, with a made-up cookie and with made-up tokens. Every answer is the 401 refusal, with no
    service, trace, name or content in it; the owner with the token reads the run."""
    secrets = [SERVICE, trace_id, "trip-planner", "convert_currency", "Lisbon", "day trips"]
    with served(demo) as server:
        port = _port(server.url)
        made_up = {"cookie": f"{cookie_name(port)}={'a' * 64}", "authorization": "Bearer " + "b" * 43}
        requests: list[tuple[str, str, dict[str, str]]] = []
        for path in paths(trace_id):
            requests += [("GET", path, {}), ("HEAD", path, {}), ("GET", path, made_up)]
        requests.append(("GET", "/?token=" + "c" * 43, {}))
        answers = _as_nobody(port, requests)
        owner = _request(port, "GET", f"/ui/api/runs/{trace_id}", server.headers)
    assert len(answers) == len(requests)
    for (method, path, _headers), (status, content_type, body) in zip(requests, answers, strict=True):
        if method == "HEAD":
            assert status == 401 and body == "", path
        else:
            check_refused(path.split("?token=")[0], status, content_type, body.encode("utf-8"))
        for secret in secrets:
            assert secret not in body, (path, secret)
    assert owner[0] == 200 and "Lisbon" in owner[2].decode("utf-8")  # the owner's loopback view has content


def test_the_token_is_in_the_url_line_only(demo: Path, trace_id: str) -> None:
    """A real ``agentdiag serve``: its token shows once in what it writes (the URL line) and in no answer, after
    requests that carry it every way (a bearer header, the URL, the cookie), wrong tokens, a refused Host, a
    malformed request that holds it, and Ctrl-C."""
    with served(demo) as server:
        port, token = _port(server.url), server.token
        cookie = {"cookie": f"{cookie_name(port)}={cookie_value(token)}"}
        answers = [_request(port, "GET", path, server.headers) for path in paths(trace_id)]
        answers += [_request(port, "GET", path, cookie) for path in paths(trace_id)]
        answers += [_request(port, "GET", f"/runs/{trace_id}?token={token}", {})]
        answers += [_request(port, "GET", "/api/services", {"authorization": f"Bearer {token}x"})]
        answers += [_request(port, "GET", "/api/services", {**server.headers, "host": f"{token}.example"})]
        answers += [_request(port, "POST", f"/api/services?token={token}", server.headers)]
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(f"GET /?token={token} HTTP/1.1\r\nHost: \x00{token}\r\nX: {token}\r\n\r\n".encode())
            answers.append((0, "", raw.recv(65536)))
        assert answers[-5][0] == 303  # the URL's token, exchanged
    for _status, _type, body in answers:
        assert token.encode() not in body
    written = "".join(server.output)
    assert written.count(token) == 1, written
    (line,) = [line for line in written.splitlines() if token in line]
    assert line == server.line and line.startswith(f"agentdiag serve: {server.url}/?token={token} (store ")


def _one_error_line(*args: str) -> str:
    result = CliRunner().invoke(cli, ["serve", *args], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("agentdiag: error:"), result.stderr
    return line


def _token_file(folder: Path, token: str, mode: int = 0o600) -> Path:
    path = folder / "serve.token"
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def test_a_token_file_and_the_environment_set_the_loopback_token(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixed = "a-fixed-token-from-a-file-0123456789"
    with served(demo, "--token-file", str(_token_file(tmp_path, fixed))) as server:
        assert server.token == fixed
        assert _request(_port(server.url), "GET", "/api/services", server.headers)[0] == 200
        assert _request(_port(server.url), "GET", "/api/services", {})[0] == 401
    odd = "odd+token/with=signs&more#0123456789"  # printed URL-encoded: it must come back whole
    with served(demo, "--token-file", str(_token_file(tmp_path, odd))) as server:
        assert server.token == odd and "%2B" in server.line
        assert _request(_port(server.url), "GET", "/api/services", server.headers)[0] == 200
        status, _type, _body = _request(_port(server.url), "GET", server.line.split(" ")[2][len(server.url) :], {})
        assert status == 303
    environment = "a-fixed-token-from-the-environment-0123"
    monkeypatch.setenv("AGENTDIAG_SERVE_TOKEN", environment)
    with served(demo, "--token-file", str(_token_file(tmp_path, fixed))) as server:
        assert server.token == fixed  # the file wins over the environment
    assert "at least 16" in _one_error_line("--store", str(demo), "--token-file", str(_token_file(tmp_path, "short")))


def test_the_environment_token_reaches_a_loopback_server(demo: Path) -> None:
    """``served`` clears ``AGENTDIAG_*`` for its child: run this one by hand with the variable set."""
    import signal
    import subprocess

    token = "a-fixed-token-from-the-environment-0123"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["AGENTDIAG_SERVE_TOKEN"] = token
    command = [sys.executable, "-m", "otel_agentdiag", "serve", "--store", str(demo), "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert f"?token={token} " in line, line
            port = int(line.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
            assert _request(port, "GET", "/api/services", {"authorization": f"Bearer {token}"})[0] == 200
        finally:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=20)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_token_file_others_can_read_is_refused_on_loopback(demo: Path, tmp_path: Path, mode: int) -> None:
    token_file = _token_file(tmp_path, "a-long-enough-token-0123456789", mode)
    line = _one_error_line("--store", str(demo), "--token-file", str(token_file))
    assert "serve token file" in line and ("readable by group or others" in line or "writable" in line)


def test_a_token_file_that_is_a_link_or_not_a_file_is_refused(demo: Path, tmp_path: Path) -> None:
    target = _token_file(tmp_path, "a-long-enough-token-0123456789")
    link = tmp_path / "link.token"
    link.symlink_to(target)
    assert "symbolic link" in _one_error_line("--store", str(demo), "--token-file", str(link))
    fifo = tmp_path / "fifo.token"
    os.mkfifo(fifo, 0o600)
    assert "not a regular file" in _one_error_line("--store", str(demo), "--token-file", str(fifo))


def test_insecure_no_token_serves_everyone_and_says_so(demo: Path) -> None:
    with served(demo, "--insecure-no-token") as server:
        assert server.token is None and "?token=" not in server.line
        status, _type, body = _request(_port(server.url), "GET", "/api/services", {})
        assert status == 200 and json.loads(body)["data"] == [SERVICE]
    written = "".join(server.output)
    assert "--insecure-no-token: no token is checked; every user of this machine can read these traces" in written


def test_insecure_no_token_refuses_what_would_contradict_it(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTDIAG_SERVE_TOKEN", "a-long-enough-token-0123456789")
    line = _one_error_line("--store", str(demo), "--insecure-no-token", "--host", "192.0.2.10", "--allow-remote")
    assert "--insecure-no-token" in line and "remote server needs its token" in line
    token_file = _token_file(tmp_path, "a-long-enough-token-0123456789")
    assert "--token-file" in _one_error_line(
        "--store", str(demo), "--insecure-no-token", "--token-file", str(token_file)
    )


def test_open_starts_the_browser_with_a_private_page_never_with_the_token(demo: Path, tmp_path: Path) -> None:
    """``--open``: the browser's command line (which every user can read in /proc) holds a ``file://`` page,
    mode 0600 in a private folder, that leads to the URL with the token; the page is gone once serve stops.
    The browser here is a recorder named by ``$BROWSER`` (Python's webbrowser runs it)."""
    record = tmp_path / "record.json"
    recorder = tmp_path / "browser.py"
    recorder.write_text(
        textwrap.dedent(
            f"""
            import json, os, sys, urllib.parse
            page = urllib.parse.urlsplit(sys.argv[1]).path
            folder = os.path.dirname(page)
            json.dump({{"argv": sys.argv[1:], "page": page, "text": open(page).read(),
                       "mode": os.stat(page).st_mode, "folder_mode": os.stat(folder).st_mode}},
                      open({str(record)!r}, "w"))
            """
        )
    )
    import signal
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["BROWSER"] = f"{sys.executable} {recorder} %s"
    command = [sys.executable, "-m", "otel_agentdiag", "serve", "--store", str(demo), "--port", "0", "--open"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            url = line.split(" ")[2]
            token = url.split("?token=", 1)[1]
            # The recorder ran before the server serves (webbrowser waits for it): one request proves both.
            port = int(url.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
            assert _request(port, "GET", "/api/services", {"authorization": f"Bearer {token}"})[0] == 200
        finally:
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    seen = json.loads(record.read_text())
    assert all(token not in arg for arg in seen["argv"]) and seen["argv"][0].startswith("file://")
    assert stat.S_IMODE(seen["mode"]) == 0o600 and stat.S_IMODE(seen["folder_mode"]) == 0o700
    assert f'content="0; url={url}"' in seen["text"]
    assert not Path(seen["page"]).exists() and not Path(seen["page"]).parent.exists()
