"""``agentdiag push`` without a collector: arguments, exit codes, what is printed, and the push marks in a real store.

Delivery to a real collector is in ``tests/e2e/test_push.py`` (rotel). Here the endpoint is a port nothing
listens on, so every export fails for real: the SDK exporter's own connection error, not a fake.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.cli.push import display_endpoint, parse_since
from otel_agentdiag.demo import run_demo_agent
from otel_agentdiag.diagnostics.push import endpoint_key
from otel_agentdiag.storage import SpanRow, SpanStore

SECRET = "push-cli-secret-0123456789"


@pytest.fixture(autouse=True)
def _in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def demo_store(tmp_path: Path) -> Path:
    path = tmp_path / "t.db"
    with agentdiag.configure(service_name="push-cli", store=path, set_global=False) as diag:
        run_demo_agent()
        diag.force_flush()
    return path


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound, never listening, for the whole test."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def push(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["push", *(str(a) for a in args)], catch_exceptions=False, env=env)


def one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agentdiag: error: ")
    return lines[0]


# -- bad input: exit 2, one line, nothing echoed that could be a credential ---------------------------------------
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--protocol", "carrier-pigeon"], "--protocol must be one of http/protobuf, grpc"),
        (["--protocol", "http/json"], "'http/json' is not supported"),
        (["--since", "yesterday"], "--since: a value of 9 characters (letters only) is not an ISO-8601 time"),
        (["--since", "2025-01-31T12:00:00"], "a time without a timezone"),
        (["--since", "-5"], "--since"),
        (["--timeout", "0"], "--timeout must be a positive number"),
        (["--timeout", "nan"], "--timeout must be a positive number"),
    ],
)
def test_bad_arguments_exit_2_before_the_store_is_opened(args: list[str], expected: str) -> None:
    line = one_error_line(push("--endpoint", "http://127.0.0.1:4318", "--store", "missing.db", *args), 2)
    assert expected in line


def test_no_store_exits_2(tmp_path: Path) -> None:
    line = one_error_line(push("--endpoint", "http://127.0.0.1:4318", "--store", tmp_path / "none.db"), 2)
    assert "no trace store at" in line
    assert not (tmp_path / "none.db").exists()


def test_missing_endpoint_is_a_usage_error() -> None:
    line = one_error_line(push("--store", "t.db"), 2)
    assert "--endpoint" in line


@pytest.mark.parametrize(
    ("endpoint", "protocol", "expected"),
    [
        (f"http://127.0.0.1:4318/?token={SECRET}", "http/protobuf", "takes no query or fragment"),
        (f"http://127.0.0.1:4318/#{SECRET}", "http/protobuf", "takes no query or fragment"),
        (f"http://user:{SECRET}@127.0.0.1:4317", "grpc", "takes no user info"),
        (f"ftp://{SECRET}.example:21", "http/protobuf", "must be an http:// or https:// URL"),
        (f"http://{SECRET}.example:99999", "http/protobuf", "port is not a number from 0 to 65535"),
        (f"http://{SECRET}.example:{SECRET}/", "http/protobuf", "port is not a number from 0 to 65535"),
        (f"http://[{SECRET}]:4318", "http/protobuf", "not a URL the exporter can read"),
        ("http://:4318", "http/protobuf", "names no host"),
    ],
)
def test_unusable_endpoints_exit_2_without_repeating_them(endpoint: str, protocol: str, expected: str) -> None:
    result = push("--endpoint", endpoint, "--protocol", protocol, "--store", "t.db")
    line = one_error_line(result, 2)
    assert expected in line
    assert SECRET not in result.output


def test_unknown_session_exits_2(demo_store: Path) -> None:
    line = one_error_line(push("--endpoint", "http://127.0.0.1:4318", "--store", demo_store, "--session", "zzzz"), 2)
    assert "no session in" in line and "matches the --session value (a value of 4 characters" in line
    assert "zzzz" not in line


# -- a collector that is down: exit 1, one line, nothing marked -----------------------------------------------------
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_collector_down_exits_1_and_marks_nothing(demo_store: Path, closed_port: int, protocol: str) -> None:
    endpoint = (
        f"http://push-user:{SECRET}@127.0.0.1:{closed_port}" if protocol != "grpc" else f"127.0.0.1:{closed_port}"
    )
    env = {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"x-api-key={SECRET}"}
    result = push("--endpoint", endpoint, "--protocol", protocol, "--store", demo_store, "--timeout", "1", env=env)

    line = one_error_line(result, 1)
    shown = f"http://127.0.0.1:{closed_port}/v1/traces" if protocol != "grpc" else f"127.0.0.1:{closed_port}"
    assert line.startswith(f"agentdiag: error: push to {shown} ({protocol}) failed at batch 1: ")
    assert "the exporter gave up within its 1 s timeout" in line
    assert "nothing was pushed; 12 spans not marked (the next push sends them)" in line
    assert SECRET not in result.output and "push-user" not in result.output
    assert result.stdout == ""
    with SpanStore(demo_store, create=False) as store:
        key = endpoint_key(endpoint, protocol)
        assert store.pushed_span_ids(key) == set()
        assert store.push_backlog(key) == (12, 0)


def test_collector_down_in_json_still_reports_on_stdout(demo_store: Path, closed_port: int) -> None:
    result = push(
        "--endpoint", f"http://127.0.0.1:{closed_port}", "--store", demo_store, "--timeout", "1", "--format", "json"
    )
    one_error_line(result, 1)
    report = json.loads(result.stdout)
    assert (report["ok"], report["pushed"], report["failed_batch"], report["not_pushed"]) == (False, 0, 1, 12)
    assert report["endpoint"] == f"http://127.0.0.1:{closed_port}/v1/traces"


def test_a_store_without_its_hash_key_is_pushed_with_a_warning(demo_store: Path, closed_port: int) -> None:
    (demo_store.parent / "hash.key").unlink()
    result = push("--endpoint", f"http://127.0.0.1:{closed_port}", "--store", demo_store, "--timeout", "1")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0].startswith("agentdiag: warning: no hash key for this store")


# -- parsing and display -----------------------------------------------------------------------------------------
def test_since_reads_iso_8601_with_a_timezone_and_unix_seconds() -> None:
    assert parse_since("1970-01-01T00:00:01Z") == 1_000_000_000
    assert parse_since("1970-01-01T01:00:01+01:00") == 1_000_000_000
    assert parse_since("1738324800") == 1_738_324_800_000_000_000
    assert parse_since("1738324800.000000123") == 1_738_324_800_000_000_123
    assert parse_since(" 1.5 ") == 1_500_000_000
    for bad in ("", "1e9", "-1", "2h", "2025-01-31"):
        with pytest.raises(ValueError):
            parse_since(bad)


@pytest.mark.parametrize(
    ("endpoint", "protocol", "shown"),
    [
        (f"http://user:{SECRET}@Collector.example:4318", "http/protobuf", "http://collector.example:4318/v1/traces"),
        ("https://collector.example/otlp/", "http/protobuf", "https://collector.example/otlp/v1/traces"),
        ("http://collector.example:4318/v1/traces", "http/protobuf", "http://collector.example:4318/v1/traces"),
        ("collector.example:4317", "grpc", "collector.example:4317"),
        ("http://collector.example:4317/ignored/path", "grpc", "http://collector.example:4317"),
        ("[::1]:4317", "grpc", "[::1]:4317"),
        ("http://[::1]:4318", "http/protobuf", "http://[::1]:4318/v1/traces"),
    ],
)
def test_display_endpoint_hides_user_info(endpoint: str, protocol: str, shown: str) -> None:
    assert display_endpoint(endpoint, protocol) == shown


def test_endpoint_key_is_a_digest_of_the_normalised_endpoint() -> None:
    key = endpoint_key("http://collector.example:80", "http/protobuf")
    assert key.startswith("sha256:") and len(key) == 7 + 64
    same = [
        "http://collector.example",
        "HTTP://Collector.Example:80/",
        "http://collector.example/v1/traces",
        f"http://user:{SECRET}@collector.example",
        " http://collector.example:80 ",
    ]
    assert {endpoint_key(e, "http/protobuf") for e in same} == {key}
    different = [
        ("https://collector.example", "http/protobuf"),
        ("http://collector.example:4318", "http/protobuf"),
        ("http://collector.example/tenant-a", "http/protobuf"),
        ("http://other.example", "http/protobuf"),
        ("http://collector.example:80", "grpc"),
    ]
    keys = {endpoint_key(e, p) for e, p in different}
    assert len(keys) == len(different) and key not in keys
    # gRPC ignores the path and the scheme picks TLS or not to the same receiver.
    assert endpoint_key("collector.example:4317", "grpc") == endpoint_key("https://Collector.example:4317/x", "grpc")


# -- push marks in a real store ----------------------------------------------------------------------------------
def _rows(n: int, *, session: str | None, start: int) -> list[SpanRow]:
    return [
        SpanRow(
            trace_id=f"{i + 1:032x}",
            span_id=f"{start + i + 1:016x}",
            parent_span_id=None,
            name="agent.iteration",
            kind="iteration",
            span_kind="internal",
            start_ns=start + i,
            end_ns=start + i + 10,
            status="ok",
            session=session,
            attributes={"agentdiag.kind": "iteration"},
            events=[],
            links=[],
            resource={"service.name": "marks"},
            scope=None,
        )
        for i in range(n)
    ]


def test_marks_page_and_select_in_the_store(tmp_path: Path) -> None:
    key = endpoint_key("http://127.0.0.1:4318", "http/protobuf")
    other = endpoint_key("http://127.0.0.1:4319", "http/protobuf")
    t0 = time.time_ns()  # recent: retention keeps them
    with SpanStore(tmp_path / "m.db") as store:
        store.write_spans(_rows(7, session="s:a", start=t0) + _rows(4, session=None, start=t0 + 1_000))
        pages = list(store.unpushed_spans(key, batch_size=3))
        assert [len(p) for p in pages] == [3, 3, 3, 2]
        ordered = [s.start_ns for page in pages for s in page]
        assert ordered == sorted(ordered) and len(set(ordered)) == 11
        assert store.push_backlog(key) == (11, 0)

        first_page = [(s.trace_id, s.span_id) for s in pages[0]]
        assert store.mark_pushed(key, first_page) == 3
        assert store.mark_pushed(key, first_page) == 0  # idempotent
        assert store.pushed_span_ids(key) == set(first_page)
        assert store.pushed_span_ids(other) == set()
        assert store.push_backlog(key) == (8, 3)
        assert store.push_backlog(other) == (11, 0)
        assert sum(len(p) for p in store.unpushed_spans(key, batch_size=3)) == 8

        assert store.push_backlog(key, sessions=["s:a"]) == (4, 3)
        assert store.push_backlog(key, sessions=[]) == (0, 0)
        assert store.push_backlog(key, since_ns=t0 + 1_000) == (4, 0)
        assert [s.session for p in store.unpushed_spans(key, sessions=["s:a"]) for s in p] == ["s:a"] * 4
        late = [s.start_ns - t0 for p in store.unpushed_spans(key, since_ns=t0 + 1_002) for s in p]
        assert late == [1_002, 1_003]


def test_the_store_refuses_a_raw_url_as_a_mark_key(tmp_path: Path) -> None:
    with SpanStore(tmp_path / "m.db") as store:
        for bad in (f"http://user:{SECRET}@127.0.0.1:4318", "sha256:abc", "sha256:" + "G" * 64):
            with pytest.raises(ValueError, match="must be a digest"):
                store.mark_pushed(bad, [("1" * 32, "1" * 16)])
            with pytest.raises(ValueError, match="must be a digest"):
                store.push_backlog(bad)
        assert store._conn.execute("SELECT COUNT(*) FROM push_marks").fetchone() == (0,)


def test_a_second_push_after_a_failure_counts_nothing_as_pushed(demo_store: Path, closed_port: int) -> None:
    """Two failed pushes in a row: the backlog is intact both times (a failure never marks)."""
    for _ in range(2):
        started = time.monotonic()
        result = push("--endpoint", f"http://127.0.0.1:{closed_port}", "--store", demo_store, "--timeout", "1")
        assert result.exit_code == 1
        assert time.monotonic() - started < 10
        assert "12 spans not marked" in result.stderr
