"""Hostile input to every endpoint's parameters and paths: any text gets a short answer (200, 400 naming the
parameter, 404), never a 500 or a traceback, and never the input repeated back (an error message that echoes
what was typed would carry a prompt or a credential pasted into a search box to the screen and the logs)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serve_helpers import client, demo_store
from starlette.testclient import TestClient

MARK = "HOSTILE-9f3e"
"""In every generated value, so an answer that repeats the input is found."""

V1 = {
    "/api/traces": ("service", "operation", "tags", "tag", "minDuration", "maxDuration", "limit", "start", "end",
                    "lookback", "spanKind", "traceID"),
    "/api/operations": ("service", "spanKind"),
    "/api/dependencies": ("endTs", "lookback"),
    "/api/v3/traces": ("query.service_name", "query.operation_name", "query.start_time_min", "query.start_time_max",
                       "query.duration_min", "query.duration_max", "query.search_depth", "query.attributes"),
    "/api/v3/operations": ("service", "span_kind"),
    "/ui/api/runs": ("agent", "service", "status", "since", "until", "before", "limit"),
    "/ui/api/conversations": ("since", "before", "limit"),
}  # fmt: skip
PATHS = ("/api/traces/{}", "/api/v3/traces/{}", "/api/services/{}/operations", "/ui/api/runs/{}", "/runs/{}")

hostile = st.one_of(
    st.text(min_size=0, max_size=40),
    st.sampled_from(
        [
            '{"a":',
            "[]",
            "1e999",
            "-1",
            "9" * 40,
            "\x00",
            "%00",
            "../../etc/passwd",
            "<script>",
            "{}",
            "x" * 20_000,
            '{"k":' * 500,
            "tag:" * 300,
            "2026-02-30T25:61:00Z",
            "P1Y",
            "1h1h1h",
            "NaNs",
        ]
    ),
).map(lambda text: f"{text}{MARK}")


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with client(demo_store(tmp_path_factory.mktemp("hostile"))) as test_client:
        yield test_client


def _check(http: TestClient, url: str, params: dict[str, str] | None = None) -> None:
    response = http.get(url, params=params)
    assert response.status_code in (200, 400, 404), (url, params, response.status_code, response.text[:300])
    assert "Traceback" not in response.text
    if response.status_code != 200:
        assert len(response.content) < 400
        assert MARK not in response.text, (url, params, response.text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(endpoint=st.sampled_from(sorted(V1)), data=st.data())
def test_any_parameter_value_gets_a_short_answer_that_does_not_repeat_it(
    http: TestClient, endpoint: str, data: st.DataObject
) -> None:
    names = data.draw(st.lists(st.sampled_from(V1[endpoint]), min_size=1, max_size=3, unique=True))
    _check(http, endpoint, {name: data.draw(hostile) for name in names})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(PATHS), value=hostile)
def test_any_path_segment_gets_a_short_answer_that_does_not_repeat_it(http: TestClient, path: str, value: str) -> None:
    response = http.get(path.format(quote(value, safe="")))
    assert response.status_code in (200, 400, 404), (path, value, response.status_code, response.text[:300])
    assert "Traceback" not in response.text
    if response.status_code != 200 and not path.startswith("/runs/"):
        assert MARK not in response.text, (path, response.text)


def test_an_unknown_parameter_on_the_viewer_api_is_refused_by_name_only(http: TestClient) -> None:
    response = http.get("/ui/api/runs", params={f"x{MARK}": "1"})
    assert response.status_code == 400 and MARK not in response.text
