"""The viewer's JSON (``/ui/api/...``) over stores the real pipeline wrote: runs, one run, conversations, errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from make_store import COST_LEAVES, COST_THRESHOLD, HOSTILE
from starlette.testclient import TestClient

from otel_agentdiag.serve import ServeSettings, create_app
from otel_agentdiag.serve.settings import DEFAULT_PORT

BASE = f"http://127.0.0.1:{DEFAULT_PORT}"
LOOPBACK = ("127.0.0.1", 50000)
REMOTE = ("testclient", 50000)  # not a loopback address: the server treats it as another machine


def _client(store: Path, client: tuple[str, int]) -> Iterator[TestClient]:
    settings = ServeSettings(store_path=store)
    headers = {"authorization": f"Bearer {settings.token}"}
    with TestClient(create_app(settings), base_url=BASE, client=client, headers=headers) as c:
        yield c


@pytest.fixture
def local(demo_store: Path) -> Iterator[TestClient]:
    yield from _client(demo_store, LOOPBACK)


@pytest.fixture
def remote(demo_store: Path) -> Iterator[TestClient]:
    yield from _client(demo_store, REMOTE)


def _only_run(client: TestClient) -> dict:
    body = client.get("/ui/api/runs").json()
    assert len(body["runs"]) == 1
    return body["runs"][0]


def test_runs_lists_the_demo_run_with_its_counts_and_receipt(local: TestClient) -> None:
    response = local.get("/ui/api/runs")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["next"] is None
    (run,) = body["runs"]
    assert run["agent"] == "trip-planner"
    assert run["service"] == "agentdiag-demo"
    assert len(run["trace_id"]) == 32
    assert (run["iterations"], run["llm_calls"], run["tool_calls"]) == (4, 4, 3)
    assert (run["input_tokens"], run["output_tokens"]) == (568, 101)
    assert run["error_count"] == 1 and run["span_count"] == 12
    assert run["duration_ns"] > 0 and run["start_time"].endswith("Z")
    assert run["receipt"] == "valid"


def test_runs_filters(local: TestClient) -> None:
    run = _only_run(local)
    assert local.get("/ui/api/runs", params={"agent": "trip-planner"}).json()["runs"][0]["trace_id"] == run["trace_id"]
    assert local.get("/ui/api/runs", params={"agent": "someone-else"}).json()["runs"] == []
    assert local.get("/ui/api/runs", params={"service": "agentdiag-demo"}).json()["runs"] != []
    assert local.get("/ui/api/runs", params={"status": run["status"]}).json()["runs"] != []
    assert local.get("/ui/api/runs", params={"since": "2100-01-01T00:00:00Z"}).json()["runs"] == []
    assert local.get("/ui/api/runs", params={"until": "1971-01-01T00:00:00"}).json()["runs"] == []
    assert local.get("/ui/api/runs", params={"since": "1971-01-01T00:00:00+02:00"}).json()["runs"] != []


def test_runs_pages_with_the_next_cursor(content_store: Path) -> None:
    for client in _client(content_store, LOOPBACK):
        first = client.get("/ui/api/runs", params={"limit": 1}).json()
        assert len(first["runs"]) == 1 and first["next"]
        second = client.get("/ui/api/runs", params={"limit": 1, "before": first["next"]}).json()
        assert len(second["runs"]) == 1
        assert second["runs"][0]["trace_id"] != first["runs"][0]["trace_id"]
        assert second["runs"][0]["start_time"] <= first["runs"][0]["start_time"]
        both = client.get("/ui/api/runs", params={"limit": 2}).json()["runs"]
        assert [r["trace_id"] for r in both] == [first["runs"][0]["trace_id"], second["runs"][0]["trace_id"]]
        last = client.get("/ui/api/runs", params={"limit": 1, "before": second["next"]}).json()
        assert last == {"runs": [], "next": None}


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"status": "maybe"}, "status"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2025-13-01"}, "until"),
        ({"before": "nonsense"}, "before"),
        ({"agnet": "x"}, "unknown parameter"),
        ({"agent": "x" * 600}, "too long"),
    ],
)
def test_bad_parameters_are_a_short_400(local: TestClient, query: dict[str, str], words: str) -> None:
    response = local.get("/ui/api/runs", params=query)
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"error"} and words in body["error"]
    assert len(body["error"]) < 120
    assert "x" * 20 not in body["error"]  # the value is never echoed


def test_unknown_run_is_404_and_a_malformed_id_400(local: TestClient) -> None:
    response = local.get("/ui/api/runs/" + "0" * 32)
    assert response.status_code == 404 and set(response.json()) == {"error"}
    for bad in ("abc", "Z" * 32, "0" * 33):
        assert local.get("/ui/api/runs/" + bad).status_code == 400
    assert local.get("/ui/api/runs/" + "0" * 32, params={"span": "1"}).status_code == 400


def test_a_run_is_its_tree_with_the_tool_error_health_and_receipt(local: TestClient) -> None:
    run = _only_run(local)
    body = local.get(f"/ui/api/runs/{run['trace_id']}").json()
    assert body["view"] == "stored" and body["has_content"] is False
    spans = body["spans"]
    assert len(spans) == 12
    assert [s["depth"] for s in spans] == [0, 1, 2, 2, 1, 2, 2, 1, 2, 2, 1, 2]
    assert [s["kind"] for s in spans[:4]] == ["run", "iteration", "llm", "tool"]
    ids = {s["span_id"] for s in spans}
    assert all(s["parent_span_id"] in ids for s in spans[1:]) and spans[0]["parent_span_id"] is None
    assert spans[0]["offset_ns"] == 0 and all(s["offset_ns"] >= 0 for s in spans)
    (failed,) = [s for s in spans if s["status"] == "error"]
    assert failed["kind"] == "tool" and failed["error_type"] == "ValueError"
    assert failed["name"] == "execute_tool convert_currency"
    assert [e["name"] for e in failed["events"]] == ["exception"]
    llm = spans[2]
    assert llm["model"] == "demo-model-1"
    assert llm["tokens"]["own"] == {"input_tokens": 100, "output_tokens": 21}
    assert llm["attributes"]["gen_ai.provider.name"] == "demo"
    assert all("content" not in s for s in spans)
    assert body["receipt"]["status"] == "valid" and body["receipt"]["counts"]["spans"] == 12
    health = body["health"]
    assert health["stage"] == "finished"
    assert health["recovery"] == {"errors": 1, "recovered": 1, "unrecovered": 0}
    assert health["repetition"]["suspected"] is False and health["stall"]["suspected"] is False


def test_a_remote_client_gets_the_strict_projection(local: TestClient, remote: TestClient) -> None:
    trace_id = _only_run(local)["trace_id"]
    stored = local.get(f"/ui/api/runs/{trace_id}").json()
    strict = remote.get(f"/ui/api/runs/{trace_id}").json()
    assert strict["view"] == "strict_projection" and strict["omitted_spans"] == 0
    assert [s["span_id"] for s in strict["spans"]] == [s["span_id"] for s in stored["spans"]]
    for mine, theirs in zip(stored["spans"], strict["spans"], strict=True):
        assert set(theirs["attributes"]) <= set(mine["attributes"])
    # Digests pass through unchanged (the store's own key), and the error stays visible.
    root = strict["spans"][0]["attributes"]
    assert root["gen_ai.conversation.id"] == stored["spans"][0]["attributes"]["gen_ai.conversation.id"]
    assert [s["error_type"] for s in strict["spans"] if s["status"] == "error"] == ["ValueError"]


def _run_of(client: TestClient, agent: str) -> dict:
    (run,) = client.get("/ui/api/runs", params={"agent": agent}).json()["runs"]
    return client.get(f"/ui/api/runs/{run['trace_id']}").json()


def test_content_only_when_captured_and_only_for_a_loopback_client(content_store: Path) -> None:
    for client in _client(content_store, LOOPBACK):
        body = _run_of(client, "trip-planner")
        assert body["has_content"] is True
        roles = {c["role"] for s in body["spans"] for c in s.get("content", [])}
        assert {"gen_ai.input.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} <= roles
        hostile = _run_of(client, "hostile-agent")
        values = [c["value"] for s in hostile["spans"] for c in s.get("content", [])]
        assert HOSTILE in values and {"q": HOSTILE} in values
    for client in _client(content_store, REMOTE):
        for agent in ("trip-planner", "hostile-agent"):
            response = client.get(f"/ui/api/runs/{_run_of(client, agent)['trace_id']}")
            assert response.json()["has_content"] is False
            assert "content" not in response.text.replace('"has_content"', "")
            assert "onerror" not in response.text


def test_conversations_group_runs_with_totals(content_store: Path) -> None:
    for client in _client(content_store, LOOPBACK):
        body = client.get("/ui/api/conversations").json()
        assert body["next"] is None
        rows = body["conversations"]
        assert len(rows) == 2
        assert all(r["conversation"].startswith("hmac-sha256:") for r in rows)
        demo = next(r for r in rows if r["llm_calls"] == 4)
        assert (demo["run_count"], demo["tool_calls"], demo["error_count"], demo["input_tokens"]) == (1, 3, 1, 568)
        page = client.get("/ui/api/conversations", params={"limit": 1}).json()
        rest = client.get("/ui/api/conversations", params={"limit": 1, "before": page["next"]}).json()
        assert [page["conversations"][0]["conversation"], rest["conversations"][0]["conversation"]] == [
            r["conversation"] for r in rows
        ]
        assert client.get("/ui/api/conversations", params={"limit": "x"}).status_code == 400


def test_pages_and_assets_are_served_with_their_types(local: TestClient) -> None:
    trace_id = _only_run(local)["trace_id"]
    for path in ("/", f"/runs/{trace_id}", "/conversations"):
        response = local.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        assert "/ui/static/app.js" in response.text
    assert local.get("/ui/static/app.js").headers["content-type"].startswith("text/javascript")
    assert local.get("/ui/static/app.css").headers["content-type"].startswith("text/css")
    assert local.get("/ui/static/nothing.js").status_code == 404


def test_a_big_run_reads_whole(big_store: Path) -> None:
    for client in _client(big_store, LOOPBACK):
        (run,) = client.get("/ui/api/runs").json()["runs"]
        assert run["span_count"] == 10_101 and run["tool_calls"] == 10_000
        body = client.get(f"/ui/api/runs/{run['trace_id']}").json()
        assert len(body["spans"]) == 10_101
        assert body["spans"][-1]["depth"] == 2 and body["spans"][-1]["kind"] == "tool"


def test_a_session_only_its_rows_can_judge(imported_store: Path) -> None:
    """The list shows no verdict it would have to read spans for; the run page judges the session from its rows."""
    for client in _client(imported_store, LOOPBACK):
        (run,) = client.get("/ui/api/runs").json()["runs"]
        assert run["session"].startswith("imported:") and run["receipt"] is None
        body = client.get(f"/ui/api/runs/{run['trace_id']}").json()
        assert body["receipt"]["status"] == "imported" and body["receipt"]["counts"]["spans"] == 12
        assert all(s.get("imported") is True for s in body["spans"])
        assert [s["error_type"] for s in body["spans"] if s["status"] == "error"] == ["ValueError"]


def test_cost_and_budget_in_the_runs_list_the_run_and_its_spans(cost_store: Path) -> None:
    for client in (LOOPBACK, REMOTE):  # the strict projection keeps the cost and budget keys
        for c in _client(cost_store, client):
            runs = {r["agent"]: r for r in c.get("/ui/api/runs").json()["runs"]}
            assert (runs["budget-agent"]["cost_usd"], runs["budget-agent"]["budget_exceeded"]) == (0.2542, True)
            assert (runs["free-agent"]["cost_usd"], runs["free-agent"]["budget_exceeded"]) == (None, False)
            body = _run_of(c, "budget-agent")
            assert (body["cost_usd"], body["budget_exceeded"], body["budget_limits"]) == (0.2542, True, ["cost_usd"])
            run, step, *leaves = body["spans"]
            assert run["budget"] == {
                "exceeded": True,
                "limits": ["cost_usd"],
                "thresholds": {"cost_usd": COST_THRESHOLD},
            }
            assert run["cost"] == {"own": None, "rollup": 0.2542} and step["cost"] == {"own": None, "rollup": 0.2542}
            assert "budget" not in step
            assert [leaf["cost"]["own"] for leaf in leaves] == list(COST_LEAVES)
            health = body["health"]
            assert (health["cost_usd"], health["budget_exceeded"], health["signals"]) == (
                0.2542,
                True,
                ["budget_exceeded"],
            )
            free = _run_of(c, "free-agent")
            assert (free["cost_usd"], free["budget_exceeded"], free["spans"][0]["budget"]["exceeded"]) == (
                None,
                False,
                False,
            )
            conversations = c.get("/ui/api/conversations").json()["conversations"]
            assert sorted((x["cost_usd"], x["budget_exceeded_runs"]) for x in conversations if x["cost_usd"]) == [
                (0.2542, 1)
            ]


def test_a_span_says_why_its_name_reads_other(tmp_path: Path) -> None:
    """A tool name no code declared is exported as `_OTHER`; the span's `name_note` says why (never the name)."""
    import secrets

    import otel_agentdiag as agentdiag
    from otel_agentdiag._internal.why_other import OTHER_UNDECLARED

    store = tmp_path / "traces.db"
    invented = f"invented_{secrets.token_hex(4)}"
    diag = agentdiag.configure(service_name="why", store=store, hash_key=secrets.token_bytes(32), set_global=False)
    try:
        with agentdiag.agent_run("why-agent"):
            with agentdiag.tool_call(invented):
                pass
    finally:
        diag.shutdown()
    for client in _client(store, LOOPBACK):
        spans = client.get(f"/ui/api/runs/{_only_run(client)['trace_id']}").json()["spans"]
        notes = {s["name"]: s["name_note"] for s in spans}
        assert notes == {"invoke_agent why-agent": None, "execute_tool _OTHER": OTHER_UNDECLARED}
        assert invented not in str(spans)


def test_status_error_lists_every_run_with_a_failed_span(local: TestClient) -> None:
    """The demo run's root is ``unset`` and one of its tools failed (it recovered): ``status=error`` ("has
    errors" in the viewer) lists it; ``status`` in the row stays the root's, and ``has_errors`` says why."""
    run = _only_run(local)
    assert (run["status"], run["error_count"], run["has_errors"]) == ("unset", 1, True)
    (found,) = local.get("/ui/api/runs", params={"status": "error"}).json()["runs"]
    assert found["trace_id"] == run["trace_id"]
    for combined in ({"agent": "trip-planner"}, {"service": "agentdiag-demo"}, {"conversation": run["session"]}):
        (again,) = local.get("/ui/api/runs", params={"status": "error", **combined}).json()["runs"]
        assert again["trace_id"] == run["trace_id"]
    assert local.get("/ui/api/runs", params={"status": "ok"}).json()["runs"] == []


def test_a_run_without_errors_is_not_listed_as_having_them(cost_store: Path) -> None:
    for client in _client(cost_store, LOOPBACK):
        runs = client.get("/ui/api/runs").json()["runs"]
        assert len(runs) == 2 and all(r["has_errors"] is False and r["error_count"] == 0 for r in runs)
        assert client.get("/ui/api/runs", params={"status": "error"}).json()["runs"] == []


def test_cost_is_its_own_field_never_among_the_token_counts(local: TestClient) -> None:
    """A run's and an iteration's roll-up: ``tokens.rollup`` holds token counts only; the cost roll-up
    (``agentdiag.usage.cost.usd``) is ``cost.rollup``."""
    body = local.get(f"/ui/api/runs/{_only_run(local)['trace_id']}").json()
    run, iteration = body["spans"][0], body["spans"][1]
    assert run["tokens"]["rollup"] == {"input_tokens": 568, "output_tokens": 101}
    assert run["cost"]["rollup"] == body["cost_usd"] and body["cost_usd"] > 0
    assert iteration["tokens"]["rollup"] == {"input_tokens": 100, "output_tokens": 21}
    assert iteration["cost"]["rollup"] == iteration["attributes"]["agentdiag.usage.cost.usd"]
    for span in body["spans"]:
        assert not any("cost" in key for part in span["tokens"].values() for key in part), span["name"]


def test_iterations_carry_their_index(local: TestClient) -> None:
    spans = local.get(f"/ui/api/runs/{_only_run(local)['trace_id']}").json()["spans"]
    assert [s["iteration"] for s in spans if s["kind"] == "iteration"] == [0, 1, 2, 3]
    assert all(s["iteration"] is None for s in spans if s["kind"] != "iteration")


def test_a_conversation_lists_its_runs(content_store: Path) -> None:
    """``conversation=<digest>`` (as ``/ui/api/conversations`` gives it): that conversation's runs, only."""
    for client in _client(content_store, LOOPBACK):
        conversations = client.get("/ui/api/conversations").json()["conversations"]
        assert len(conversations) == 2
        listed = set()
        for conversation in conversations:
            runs = client.get("/ui/api/runs", params={"conversation": conversation["conversation"]}).json()["runs"]
            assert len(runs) == conversation["run_count"] == 1
            assert all(r["session"] == conversation["conversation"] for r in runs)
            listed.update(r["trace_id"] for r in runs)
        assert listed == {r["trace_id"] for r in client.get("/ui/api/runs").json()["runs"]}
        assert client.get("/ui/api/runs", params={"conversation": "hmac-sha256:none"}).json()["runs"] == []
