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

V3_QUERY = (
    "query.serviceName", "query.operationName", "query.startTimeMin", "query.startTimeMax", "query.durationMin",
    "query.durationMax", "query.searchDepth", "query.rawTraces", "query.attributes",
    "query.service_name", "query.operation_name", "query.start_time_min", "query.start_time_max",
    "query.duration_min", "query.duration_max", "query.search_depth", "query.raw_traces", "query.num_traces",
)  # fmt: skip
"""Jaeger v3's search parameters: the canonical (camelCase) names and the snake_case aliases kept."""

V1 = {
    "/api/traces": ("service", "operation", "tags", "tag", "minDuration", "maxDuration", "limit", "start", "end",
                    "lookback", "spanKind", "traceID"),
    "/api/operations": ("service", "spanKind"),
    "/api/dependencies": ("endTs", "lookback"),
    "/api/v3/traces": V3_QUERY,
    "/api/v3/trace-summaries": V3_QUERY,
    "/api/v3/operations": ("service", "spanKind", "span_kind"),
    "/ui/api/runs": ("agent", "service", "status", "conversation", "since", "until", "before", "limit"),
    "/ui/api/conversations": ("since", "before", "limit"),
    "/api/traces/0123456789abcdef0123456789abcdef": ("start", "end"),
    "/api/v3/traces/0123456789abcdef0123456789abcdef": ("startTime", "endTime", "rawTraces", "start_time", "end_time",
                                                        "raw_traces"),
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


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(endpoint=st.sampled_from(["/api/v3/traces", "/api/v3/trace-summaries"]), data=st.data())
def test_a_v3_search_with_a_valid_window_and_any_other_value_gets_a_short_answer(
    http: TestClient, endpoint: str, data: st.DataObject
) -> None:
    """The window is required: without it every value above is refused before it is read. Here it is given (in
    either naming), so each other parameter's own parser meets the hostile value."""
    window = data.draw(
        st.sampled_from(
            [
                {"query.startTimeMin": "2000-01-01T00:00:00Z", "query.startTimeMax": "2200-01-01T00:00:00Z"},
                {"query.start_time_min": "2000-01-01T00:00:00Z", "query.start_time_max": "2200-01-01T00:00:00Z"},
            ]
        )
    )
    others = [name for name in V3_QUERY if "start" not in name.lower()]
    names = data.draw(st.lists(st.sampled_from(others), min_size=1, max_size=3, unique=True))
    _check(http, endpoint, {**window, **{name: data.draw(hostile) for name in names}})


numberish = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**600).map(str),
    st.text(alphabet="0123456789²³¹٣߂\u09e6໒᠑\U0001d7d8+-.:eE", min_size=1, max_size=30),
    st.builds(
        lambda n, unit: f"{n}{unit}",
        st.one_of(st.integers(min_value=0, max_value=10**400), st.floats(min_value=0, allow_nan=False)),
        st.sampled_from(["ns", "us", "µs", "ms", "s", "m", "h", "d", "w", ""]),
    ),
    st.builds(
        lambda year, month, zone: f"{year:04d}-{month:02d}-28T23:59:59.999999999{zone}",
        st.integers(min_value=1, max_value=9999),
        st.integers(min_value=1, max_value=12),
        st.sampled_from(["Z", "+14:00", "-23:59", "+00:00", ""]),
    ),
    st.builds(lambda depth: '{"k":' * depth + "1" + "}" * depth, st.integers(min_value=1, max_value=1200)),
    st.builds(lambda depth: '{"k":' + "[" * depth + "]" * depth + "}", st.integers(min_value=1, max_value=4000)),
    st.builds(lambda n: f"{n}:key", st.integers(min_value=0, max_value=10**400)),
)
"""Values shaped like what the parameters expect, at and beyond their ends: Unicode digits that ``str.isdigit``
takes, integers past SQLite's 64 bits, durations and times past the year 2262, JSON nested past Python's stack."""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(endpoint=st.sampled_from(sorted(V1)), data=st.data())
def test_a_value_shaped_like_the_parameter_but_out_of_range_is_a_400_never_a_500(
    http: TestClient, endpoint: str, data: st.DataObject
) -> None:
    names = data.draw(st.lists(st.sampled_from(V1[endpoint]), min_size=1, max_size=3, unique=True))
    params = {name: data.draw(numberish) for name in names}
    response = http.get(endpoint, params=params)
    assert response.status_code in (200, 400, 404), (endpoint, params, response.status_code, response.text[:300])
    assert "Traceback" not in response.text


@pytest.mark.parametrize(
    ("endpoint", "params", "named"),
    [
        ("/ui/api/runs", {"limit": "²"}, "limit"),
        ("/ui/api/runs", {"since": "9" * 500}, "since"),
        ("/ui/api/runs", {"until": "9999-12-31T23:59:59Z"}, None),
        ("/ui/api/runs", {"before": "9" * 500 + ":k"}, "before"),
        ("/ui/api/conversations", {"limit": "٣"}, "limit"),
        ("/api/traces", {"service": "demo", "limit": "9" * 500}, "limit"),
        ("/api/traces", {"service": "demo", "end": "9" * 18}, None),
        ("/api/traces", {"service": "demo", "end": "9" * 19}, "end"),
        ("/api/traces", {"service": "demo", "minDuration": "9" * 400 + "h"}, None),
        ("/api/traces", {"service": "demo", "tags": '{"k":' + "[" * 3000 + "]" * 3000 + "}"}, "tags"),
        ("/api/traces", {"service": "demo", "lookback": "9" * 19 + "w"}, None),
        ("/api/traces", {"service": "demo", "lookback": "9" * 40 + "w"}, "lookback"),
        ("/api/v3/traces", {"query.service_name": "demo", "query.start_time_min": "0001-01-01T00:00:00Z",
                            "query.start_time_max": "9999-12-31T23:59:59Z", "query.search_depth": "²"},
         "query.search_depth"),
        ("/api/v3/trace-summaries", {"query.startTimeMin": "0001-01-01T00:00:00Z",
                                     "query.startTimeMax": "9999-12-31T23:59:59Z", "query.searchDepth": "²"},
         "query.searchDepth"),
        ("/api/v3/trace-summaries", {"query.startTimeMin": "0001-01-01T00:00:00Z",
                                     "query.startTimeMax": "9999-12-31T23:59:59Z",
                                     "query.durationMin": "9" * 400 + "h"}, None),
        ("/api/v3/trace-summaries", {"query.startTimeMin": "9999-01-01T00:00:00Z",
                                     "query.startTimeMax": "9999-12-31T23:59:59Z"}, None),
        ("/api/dependencies", {"endTs": "9" * 500}, "endTs"),
    ],
)  # fmt: skip
def test_the_known_out_of_range_values_get_a_clear_answer(
    http: TestClient, endpoint: str, params: dict[str, str], named: str | None
) -> None:
    response = http.get(endpoint, params=params)
    if named is None:  # in range once capped: a search with no bound there
        assert response.status_code == 200, response.text[:300]
    else:
        assert response.status_code == 400, response.text[:300]
        assert named in response.text
