"""OTLP wiring: which exporter, endpoint and protocol each combination of arguments and variables gives.

Exporters are constructed, never used: nothing is sent. Their resolved settings are read back from the SDK
exporters' own fields, which is where their environment handling puts them.
"""

from __future__ import annotations

import logging
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExporter

import otel_agentdiag as agentdiag
from otel_agentdiag.config import AgentDiag
from otel_agentdiag.destinations import OTLP_DESTINATION
from otel_agentdiag.exporters import otlp

HASH_KEY = "de0f00dfd6922992ab29ef9d0c6f6e6862e0c800fecb1acb78e2a60ee3b1e80e"
GENERIC = "OTEL_EXPORTER_OTLP_PROTOCOL"
TRACES = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"


@pytest.fixture
def handles() -> Iterator[list[AgentDiag]]:
    """Shut down every pipeline a test configured (closes the exporters' sessions and channels)."""
    made: list[AgentDiag] = []
    yield made
    for handle in made:
        handle.shutdown()


def configured(handles: list[AgentDiag], tmp_path: Path, **kwargs: Any) -> AgentDiag:
    handle = agentdiag.configure(store=tmp_path / "t.db", hash_key=HASH_KEY, set_global=False, **kwargs)
    handles.append(handle)
    return handle


def otlp_exporter(handle: AgentDiag) -> SpanExporter:
    names = [d.name for d in handle.destinations]
    assert OTLP_DESTINATION in names, names
    return handle.batch_processors[names.index(OTLP_DESTINATION)].exporter


def export_budget(handle: AgentDiag) -> float | None:
    """How long the OTLP branch keeps retrying a batch: the export timeout, retries included."""
    names = [d.name for d in handle.destinations]
    return handle.batch_processors[names.index(OTLP_DESTINATION)].retry_budget_s


def http_endpoint(exporter: SpanExporter) -> str:
    assert isinstance(exporter, HttpSpanExporter)
    return str(exporter._endpoint)


def grpc_target(exporter: SpanExporter) -> tuple[str, bool]:
    """The gRPC channel target (``host:port``) and whether the channel is plaintext."""
    assert isinstance(exporter, GrpcSpanExporter)
    return str(exporter._endpoint), bool(exporter._insecure)


def http_headers(exporter: HttpSpanExporter) -> dict[str, str]:
    client = getattr(exporter, "_client", exporter)  # 1.45 keeps them on its HTTP client
    return dict(client._headers)


def http_timeout(exporter: HttpSpanExporter) -> float:
    client = getattr(exporter, "_client", exporter)
    return float(client._timeout)


# -- protocol precedence ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argument", "traces_var", "generic_var", "expected", "source"),
    [
        (None, None, None, "http/protobuf", "default"),
        (None, None, "grpc", "grpc", GENERIC),
        (None, "grpc", None, "grpc", TRACES),
        (None, "grpc", "http/protobuf", "grpc", TRACES),
        (None, "http/protobuf", "grpc", "http/protobuf", TRACES),
        ("http/protobuf", "grpc", "grpc", "http/protobuf", "argument"),
        ("grpc", "http/protobuf", "http/protobuf", "grpc", "argument"),
        (" GRPC ", None, None, "grpc", "argument"),
        (None, "", "grpc", "grpc", GENERIC),  # an empty variable counts as unset
        (None, " Grpc\n", None, "grpc", TRACES),
    ],
)
def test_protocol_precedence(
    monkeypatch: pytest.MonkeyPatch,
    argument: str | None,
    traces_var: str | None,
    generic_var: str | None,
    expected: str,
    source: str,
) -> None:
    if traces_var is not None:
        monkeypatch.setenv(TRACES, traces_var)
    if generic_var is not None:
        monkeypatch.setenv(GENERIC, generic_var)

    assert otlp.resolve_protocol(argument) == (expected, source)


@pytest.mark.parametrize("value", ["http/json", "HTTP/JSON", "http", "thrift", "grpc/protobuf"])
@pytest.mark.parametrize("variable", [TRACES, GENERIC])
def test_an_unusable_protocol_variable_warns_and_selects_http_protobuf(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    if variable == GENERIC:
        monkeypatch.setenv(TRACES, "")

    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        protocol, source = otlp.resolve_protocol()

    assert protocol == "http/protobuf"
    assert source.startswith(variable) and "unusable" in source
    (record,) = [r for r in caplog.records if r.name.startswith("otel_agentdiag")]
    assert record.levelno == logging.WARNING
    assert variable in record.getMessage()
    if value.lower() == "http/json":
        assert "not supported by the OpenTelemetry Python SDK" in record.getMessage()


def test_an_unusable_traces_variable_is_not_rescued_by_the_generic_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first variable that is set decides, as for every other OTLP setting; its bad value falls to the default.
    monkeypatch.setenv(TRACES, "http/json")
    monkeypatch.setenv(GENERIC, "grpc")

    assert otlp.resolve_protocol()[0] == "http/protobuf"


@pytest.mark.parametrize("argument", ["http/json", "http", "", "udp", 4317])
def test_a_bad_protocol_argument_raises_before_anything_is_installed(
    tmp_path: Path, handles: list[AgentDiag], argument: Any
) -> None:
    with pytest.raises(ValueError, match="otlp_protocol"):
        configured(handles, tmp_path, otlp_endpoint="http://127.0.0.1:4318", otlp_protocol=argument)
    assert handles == []
    assert not (tmp_path / "t.db").exists()


def test_without_an_otlp_branch_the_protocol_variables_are_not_read(
    tmp_path: Path, handles: list[AgentDiag], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(GENERIC, "http/json")

    with caplog.at_level(logging.DEBUG):
        handle = configured(handles, tmp_path)

    assert handle.options.otlp_protocol is None
    assert [d.name for d in handle.destinations] == ["local"]
    assert not [r for r in caplog.records if "http/json" in r.getMessage()]


# -- exporter class and endpoint ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("env", "kwargs", "expected"),
    [
        pytest.param({}, {"otlp_endpoint": "http://h:4318"}, "http://h:4318/v1/traces", id="argument-base"),
        pytest.param({}, {"otlp_endpoint": "http://h:4318/"}, "http://h:4318/v1/traces", id="argument-slash"),
        pytest.param({}, {"otlp_endpoint": "https://h/v1/traces"}, "https://h/v1/traces", id="argument-full"),
        pytest.param({ENDPOINT: "http://g:4318"}, {}, "http://g:4318/v1/traces", id="generic-var-gets-path"),
        pytest.param({ENDPOINT: "http://g:4318/base"}, {}, "http://g:4318/base/v1/traces", id="generic-var-prefix"),
        pytest.param({TRACES_ENDPOINT: "http://t:9/custom"}, {}, "http://t:9/custom", id="traces-var-as-is"),
        pytest.param(
            {TRACES_ENDPOINT: "http://t:9/custom", ENDPOINT: "http://g:4318"}, {}, "http://t:9/custom", id="traces-wins"
        ),
        pytest.param(
            {TRACES_ENDPOINT: "http://t:9/custom"},
            {"otlp_endpoint": "http://a:1"},
            "http://a:1/v1/traces",
            id="arg-wins",
        ),
        pytest.param(
            {ENDPOINT: "http://g:4318", GENERIC: "http/protobuf"}, {}, "http://g:4318/v1/traces", id="explicit-protocol"
        ),
    ],
)
def test_http_protobuf_endpoints(
    tmp_path: Path,
    handles: list[AgentDiag],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    kwargs: dict[str, Any],
    expected: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    handle = configured(handles, tmp_path, **kwargs)

    exporter = otlp_exporter(handle)
    assert type(exporter) is HttpSpanExporter
    assert http_endpoint(exporter) == expected
    assert handle.options.otlp_protocol == "http/protobuf"


@pytest.mark.parametrize(
    ("env", "kwargs", "target", "insecure"),
    [
        pytest.param({}, {"otlp_endpoint": "http://h:4317"}, "h:4317", True, id="argument-http-plaintext"),
        pytest.param({}, {"otlp_endpoint": "https://h:4317"}, "h:4317", False, id="argument-https-tls"),
        pytest.param({}, {"otlp_endpoint": "http://h:4317/v1/traces"}, "h:4317", True, id="argument-path-ignored"),
        pytest.param({}, {"otlp_endpoint": "h:4317"}, "h:4317", False, id="argument-bare-is-tls"),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_INSECURE": "true"}, {"otlp_endpoint": "h:4317"}, "h:4317", True, id="bare-insecure"
        ),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true"},
            {"otlp_endpoint": "h:4317"},
            "h:4317",
            True,
            id="bare-traces-insecure",
        ),
        pytest.param({ENDPOINT: "http://g:4317"}, {}, "g:4317", True, id="generic-var-no-path-appended"),
        pytest.param(
            {TRACES_ENDPOINT: "http://t:4317", ENDPOINT: "http://g:4317"}, {}, "t:4317", True, id="traces-var-wins"
        ),
        pytest.param(
            {TRACES_ENDPOINT: "http://t:4317"}, {"otlp_endpoint": "http://a:1"}, "a:1", True, id="argument-wins"
        ),
    ],
)
@pytest.mark.parametrize("chosen_by", ["argument", TRACES, GENERIC])
def test_grpc_endpoints(
    tmp_path: Path,
    handles: list[AgentDiag],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    kwargs: dict[str, Any],
    target: str,
    insecure: bool,
    chosen_by: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if chosen_by == "argument":
        kwargs = {**kwargs, "otlp_protocol": "grpc"}
    else:
        monkeypatch.setenv(chosen_by, "grpc")

    handle = configured(handles, tmp_path, **kwargs)

    exporter = otlp_exporter(handle)
    assert type(exporter) is GrpcSpanExporter
    assert grpc_target(exporter) == (target, insecure)
    assert (handle.options.otlp_protocol, handle.options.otlp_protocol_source) == ("grpc", chosen_by)


def test_protocol_from_the_environment_follows_an_explicit_endpoint(
    tmp_path: Path, handles: list[AgentDiag], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GENERIC, "grpc")

    handle = configured(handles, tmp_path, otlp_endpoint="http://h:4317")

    assert type(otlp_exporter(handle)) is GrpcSpanExporter


def test_the_factory_directly() -> None:
    http = otlp.otlp_span_exporter("http://h:4318")
    grpc = otlp.otlp_span_exporter("http://h:4317", "grpc")
    try:
        assert http_endpoint(http) == "http://h:4318/v1/traces"
        assert grpc_target(grpc) == ("h:4317", True)
    finally:
        http.shutdown()
        grpc.shutdown()
    with pytest.raises(ValueError, match="protocol"):
        otlp.otlp_span_exporter("http://h:4318", "http/json")


# -- everything else comes from the standard variables --------------------------------------------------------
def test_http_headers_timeout_and_compression_come_from_the_environment(
    tmp_path: Path, handles: list[AgentDiag], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-generic=1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-api-key=traces-secret,x-team=agents")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(tmp_path / "ca.pem"))

    handle = configured(handles, tmp_path, otlp_endpoint="https://h:4318")
    exporter = otlp_exporter(handle)

    assert isinstance(exporter, HttpSpanExporter)
    headers = http_headers(exporter)
    # The traces variable replaces the generic one (it is not merged), as the SDK reads them.
    assert headers["x-api-key"] == "traces-secret" and headers["x-team"] == "agents"
    assert "x-generic" not in headers
    # The timeout bounds a batch's export, retries included; each SDK call gets one attempt's worth of it.
    assert export_budget(handle) == 3.0
    assert http_timeout(exporter) == otlp.ONE_ATTEMPT_S
    assert str(getattr(exporter._compression, "value", exporter._compression)).lower() == "gzip"


def test_grpc_headers_timeout_compression_and_tls_come_from_the_environment(
    tmp_path: Path, handles: list[AgentDiag], monkeypatch: pytest.MonkeyPatch
) -> None:
    from grpc import Compression

    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"")  # read at construction; an empty bundle is enough to build credentials
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Bearer traces-secret")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2.5")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", str(ca))

    handle = configured(handles, tmp_path, otlp_endpoint="https://h:4317", otlp_protocol="grpc")
    exporter = otlp_exporter(handle)

    assert isinstance(exporter, GrpcSpanExporter)
    assert dict(exporter._headers) == {"authorization": "Bearer traces-secret"}
    assert export_budget(handle) == 2.5
    assert exporter._timeout == otlp.ONE_ATTEMPT_S
    assert exporter._compression == Compression.Gzip
    assert exporter._insecure is False
    assert exporter._credentials is not None


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_header_values_are_never_logged(
    tmp_path: Path,
    handles: list[AgentDiag],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    protocol: str,
) -> None:
    secret = f"SENTINEL-HEADER-{uuid.uuid4().hex}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer {secret}")
    monkeypatch.setenv(ENDPOINT, "http://127.0.0.1:4318")
    monkeypatch.setenv(GENERIC, protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")  # a warning path that logs too

    with caplog.at_level(logging.DEBUG):
        handle = configured(handles, tmp_path)
        handle.shutdown()

    assert caplog.records, "expected at least the http/json warning"
    for record in caplog.records:
        assert secret not in record.getMessage()
        assert secret not in repr(record.args)


# -- the OTLP branch's policy and key are its own ------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_the_otlp_branch_keeps_the_strict_policy_and_its_own_key(
    tmp_path: Path, handles: list[AgentDiag], protocol: str
) -> None:
    handle = configured(
        handles,
        tmp_path,
        otlp_endpoint="http://127.0.0.1:4318",
        otlp_protocol=protocol,
        otlp_hash_key="4d03c7a4ba3eba997fa74d033c68950c574313f19efaae34d079aea1b0fc9021",
    )

    local, remote = handle.destinations
    assert (local.name, local.policy.name) == ("local", "local")
    assert (remote.name, remote.policy.name, remote.policy_source) == ("otlp", "strict", "default")
    assert remote.key_source == "argument"
    assert handle.key_ids["otlp"] != handle.key_ids["local"]


# -- the extra is missing -----------------------------------------------------------------------------------
GRPC_MODULE = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"


def test_grpc_without_the_extra(
    tmp_path: Path, handles: list[AgentDiag], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, GRPC_MODULE, None)  # makes the import fail as if grpcio were absent

    with pytest.raises(ImportError, match=r"pip install -e '\.\[otlp\]'"):
        # No store: the OTLP branch is the only one, so nothing was started when the import fails.
        agentdiag.configure(
            store=False, hash_key=HASH_KEY, set_global=False, otlp_endpoint="http://h:4317", otlp_protocol="grpc"
        )

    # From the environment alone the application must still start: a warning and no OTLP branch.
    monkeypatch.setenv(ENDPOINT, "http://h:4317")
    monkeypatch.setenv(GENERIC, "grpc")
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        handle = configured(handles, tmp_path / "b")
    assert [d.name for d in handle.destinations] == ["local"]
    assert any("'otlp' extra is missing" in r.getMessage() for r in caplog.records)


def test_missing_extra_with_a_store_starts_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, GRPC_MODULE, None)
    threads = {t.ident for t in threading.enumerate()}
    store = tmp_path / "traces.db"

    with pytest.raises(ImportError, match=r"pip install -e '\.\[otlp\]'"):
        agentdiag.configure(
            store=store, hash_key=HASH_KEY, set_global=False, otlp_endpoint="http://h:4317", otlp_protocol="grpc"
        )

    # The OTLP exporter is built first: no store was opened and no batching thread started before it failed.
    assert not store.exists()
    assert {t.ident for t in threading.enumerate()} <= threads
