"""The viewer in a real headless Chromium over a real uvicorn server and stores the real pipeline wrote."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import CHROMIUM_ARGS, Console, chromium_path, serving
from conftest import BIG_RUN_TOOLS
from make_store import HOSTILE

from otel_agentdiag.serve import ServeSettings
from otel_agentdiag.serve.server import running

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")
CHROMIUM = chromium_path()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (Debian's chromium; .ci/run installs it)")
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, Console]]:
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    console = Console()
    console.watch(page)
    yield page, console
    context.close()


def test_runs_list_run_tree_health_receipt_and_deep_link(
    demo_store: Path, page: tuple[Any, Console], tmp_path: Path
) -> None:
    tab, console = page
    with serving(demo_store, tab) as base:
        tab.goto(base + "/")
        row = tab.locator("#runs tbody tr").first
        sync_api.expect(row).to_contain_text("trip-planner")
        sync_api.expect(row).to_contain_text("valid")
        row.click()
        sync_api.expect(tab).to_have_url(re.compile(r"/runs/[0-9a-f]{32}$"))
        sync_api.expect(tab.locator(".wf-row")).to_have_count(12)
        failed = tab.locator(".wf-row.err")
        sync_api.expect(failed).to_have_count(1)
        sync_api.expect(failed).to_contain_text("execute_tool convert_currency")
        sync_api.expect(failed.locator(".wf-mark")).to_have_text("✗")
        sync_api.expect(tab.locator("#health")).to_contain_text("finished")
        sync_api.expect(tab.locator("#health")).to_contain_text("1 recovered")
        sync_api.expect(tab.locator("#receipt")).to_contain_text("valid")
        sync_api.expect(tab.locator("#receipt")).to_contain_text("observed 12 = accepted 12")
        failed.click()
        details = tab.locator("#span-details")
        sync_api.expect(details.locator(".error-type")).to_have_text("ValueError")
        span_id = details.get_attribute("data-span")
        assert span_id and tab.url.endswith(f"?span={span_id}")
        shot = tmp_path / "viewer-run.png"
        tab.screenshot(path=str(shot), full_page=True)
        print(f"viewer screenshot: {shot}")
        # A deep link opens that span, in a fresh page load.
        tab.goto(tab.url)
        sync_api.expect(tab.locator("#span-details")).to_have_attribute("data-span", span_id)
        sync_api.expect(tab.locator(f'.wf-row.selected[data-span="{span_id}"]')).to_have_count(1)
        # Keyboard: j moves to the next span, Esc goes back to the runs.
        tab.locator("body").press("j")
        sync_api.expect(tab.locator("#span-details")).not_to_have_attribute("data-span", span_id)
        tab.keyboard.press("Escape")
        sync_api.expect(tab.locator("#runs tbody tr")).to_have_count(1)
        tab.keyboard.press("/")
        assert tab.evaluate("document.activeElement.dataset.filter !== undefined")
        tab.keyboard.type("nobody")
        tab.keyboard.press("Enter")
        sync_api.expect(tab).to_have_url(re.compile(r"/\?agent=nobody$"))
        sync_api.expect(tab.locator("#runs tbody")).to_contain_text("No runs match.")
        tab.locator("select[name=status]").select_option("unset")
        tab.locator("input[name=agent]").fill("trip-planner")
        tab.locator("input[name=agent]").press("Enter")
        sync_api.expect(tab.locator("#runs tbody tr")).to_have_count(1)
        sync_api.expect(tab.locator("#runs tbody tr")).to_contain_text("trip-planner")
        tab.goto(base + "/conversations")
        sync_api.expect(tab.locator("#conversations tbody tr")).to_have_count(1)
    assert console.errors == []


def test_cost_and_the_budget_mark_in_the_runs_list_and_on_the_run_page(
    cost_store: Path, page: tuple[Any, Console]
) -> None:
    tab, console = page
    with serving(cost_store, tab) as base:
        tab.goto(base + "/")
        over = tab.locator("#runs tbody tr", has_text="budget-agent")
        sync_api.expect(over.locator("td.cost")).to_contain_text("$0.2542")
        sync_api.expect(over.locator("td.cost .badge")).to_have_text("budget exceeded")
        free = tab.locator("#runs tbody tr", has_text="free-agent")
        sync_api.expect(free.locator("td.cost")).to_have_text("\u2013")  # unknown: a dash, never $0
        over.click()
        sync_api.expect(tab.locator(".run-cost")).to_have_text("cost $0.2542")
        sync_api.expect(tab.locator(".run-head")).to_contain_text("budget exceeded: cost_usd")
        sync_api.expect(tab.locator("#health")).to_contain_text("$0.2542")
        tab.locator(".wf-row", has_text="chat unpriced-model-1").click()
        sync_api.expect(tab.locator("#span-details")).to_contain_text("$0.0042")
        tab.locator(".wf-row", has_text="invoke_agent budget-agent").click()
        sync_api.expect(tab.locator("#span-details")).to_contain_text("Σ $0.2542 (roll-up)")
        sync_api.expect(tab.locator("#span-details")).to_contain_text("cost_usd over $0.25")
        tab.goto(base + "/conversations")
        sync_api.expect(tab.locator("#conversations td.cost", has_text="$0.2542")).to_have_count(1)
    assert console.errors == []


def test_content_shows_only_when_captured_and_hostile_text_stays_text(
    demo_store: Path, content_store: Path, page: tuple[Any, Console]
) -> None:
    tab, console = page
    with serving(demo_store, tab) as base:
        tab.goto(base + "/")
        tab.locator("#runs tbody tr").first.click()
        sync_api.expect(tab.locator(".wf-row")).to_have_count(12)
        for index in range(12):
            tab.locator(".wf-row").nth(index).click()
            sync_api.expect(tab.locator("#span-details pre.content")).to_have_count(0)
    with serving(content_store, tab) as base:
        tab.goto(base + "/?agent=trip-planner")
        tab.locator("#runs tbody tr").first.click()
        sync_api.expect(tab.locator(".wf-row")).to_have_count(12)
        tab.locator(".wf-row").first.click()
        sync_api.expect(tab.locator("#span-details")).to_contain_text("Captured content")
        sync_api.expect(tab.locator("#span-details pre.content").first).to_contain_text("Lisbon")
        tab.goto(base + "/?agent=hostile-agent")
        tab.locator("#runs tbody tr").first.click()
        tool = tab.locator(".wf-row", has_text="execute_tool lookup")
        tool.click()
        sync_api.expect(tab.locator("#span-details pre.content")).to_have_count(2)
        sync_api.expect(tab.locator("#span-details pre.content").last).to_have_text(HOSTILE)
        assert tab.locator("img").count() == 0
        assert tab.title() != "pwned"
    assert console.errors == []


def test_a_10k_span_run_is_virtualised_and_scrolls_to_its_last_span(big_store: Path, page: tuple[Any, Console]) -> None:
    tab, console = page
    with serving(big_store, tab) as base:
        tab.goto(base + "/")
        tab.locator("#runs tbody tr").first.click()
        sync_api.expect(tab.locator("#details .card")).to_have_count(1)
        rows = tab.locator(".wf-row").count()
        assert 0 < rows < 200 < BIG_RUN_TOOLS
        tab.locator("#waterfall").evaluate("el => { el.scrollTop = el.scrollHeight; }")
        last = tab.locator(".wf-row").last
        sync_api.expect(last).to_contain_text("execute_tool step")
        assert tab.locator(".wf-row").count() < 200
        last_id = tab.evaluate(
            "async () => { const r = await fetch(location.pathname.replace('/runs/', '/ui/api/runs/'));"
            " const b = await r.json(); return b.spans[b.spans.length - 1].span_id; }"
        )
        sync_api.expect(tab.locator(f'.wf-row[data-span="{last_id}"]')).to_have_count(1)
        # The keyboard walks from the end of a long list without losing the selection.
        tab.locator(f'.wf-row[data-span="{last_id}"]').click()
        tab.locator("body").press("k")
        sync_api.expect(tab.locator(".wf-row.selected")).to_have_count(1)
        sync_api.expect(tab.locator(f'.wf-row.selected[data-span="{last_id}"]')).to_have_count(0)
    assert console.errors == []


def test_the_owner_opens_the_printed_url_and_the_token_leaves_it(
    demo_store: Path, browser: Any, page: tuple[Any, Console]
) -> None:
    """The owner's flow: the URL ``agentdiag serve`` prints (``?token=``) opens the viewer at the same address
    without the token (not in the address bar, nor back in the history), with the ``HttpOnly; SameSite=Strict``
    cookie (holding no token, out of the page's reach); pages and their API calls then work on the cookie alone.
    Another browser profile (another user) gets the 401 page and nothing of the store."""
    tab, console = page
    settings = ServeSettings(store_path=demo_store, port=0)
    token = settings.token
    assert token is not None
    with running(settings) as base:
        port = int(base.rsplit(":", 1)[1])
        tab.goto(f"{base}/conversations?token={token}")
        assert tab.url == f"{base}/conversations"
        sync_api.expect(tab.locator("#conversations tbody tr")).to_have_count(1)
        (cookie,) = tab.context.cookies()
        assert (cookie["name"], cookie["path"], cookie["httpOnly"], cookie["sameSite"]) == (
            f"agentdiag_serve_{port}",
            "/",
            True,
            "Strict",
        )
        assert token not in cookie["value"]
        assert tab.evaluate("document.cookie") == ""  # HttpOnly: no script reads it
        tab.goto(base + "/")
        row = tab.locator("#runs tbody tr").first
        sync_api.expect(row).to_contain_text("trip-planner")
        row.click()
        sync_api.expect(tab.locator(".wf-row")).to_have_count(12)
        status = tab.evaluate("async () => (await fetch('/api/services')).status")
        assert status == 200  # the page's own API calls carry the cookie
        visited = [tab.url]
        for _ in range(int(tab.evaluate("history.length"))):  # back through the whole history
            tab.go_back()  # (None for the viewer's own pushState entries: the URL is what counts)
            visited.append(tab.url)
        assert visited and all(token not in url for url in visited)
        assert f"{base}/conversations" in visited
        stranger = browser.new_context()
        try:
            other = stranger.new_page()
            response = other.goto(base + "/")
            assert response is not None and response.status == 401
            assert "open the URL that agentdiag serve printed" in other.content()
            assert "trip-planner" not in other.content()
            api = other.goto(base + "/ui/api/runs")
            assert api is not None and api.status == 401 and "trip-planner" not in api.text()
            wrong = other.goto(base + "/?token=" + "x" * len(token))
            assert wrong is not None and wrong.status == 401 and stranger.cookies() == []
        finally:
            stranger.close()
    assert console.errors == []


def test_the_page_open_starts_the_browser_with_leads_to_the_viewer(demo_store: Path, page: tuple[Any, Console]) -> None:
    """``agentdiag serve --open`` starts the browser with a private ``file://`` page (never the token on its
    command line) that leads to the printed URL: a navigation another page began, on which a browser sends no
    ``SameSite=Strict`` cookie after a redirect; the server's answer moves on from its own site, and the viewer
    opens with the cookie set and no token in the address bar."""
    from otel_agentdiag.cli.serve import _opener, _url

    tab, console = page
    settings = ServeSettings(store_path=demo_store, port=0)
    with running(settings) as base:
        port = int(base.rsplit(":", 1)[1])
        with _opener(_url("127.0.0.1", port, settings.token)) as opener:
            tab.goto(opener)
            sync_api.expect(tab).to_have_url(f"{base}/")
            sync_api.expect(tab.locator("#runs tbody tr").first).to_contain_text("trip-planner")
        assert [c["name"] for c in tab.context.cookies()] == [f"agentdiag_serve_{port}"]
    assert console.errors == []


# -- issue 34: a viewer that tells the truth ---------------------------------------------------------------------
def _open_run(tab: Any, base: str, agent: str) -> None:
    tab.goto(f"{base}/?agent={agent}")
    tab.locator("#runs tbody tr").first.click()
    sync_api.expect(tab).to_have_url(re.compile(r"/runs/[0-9a-f]{32}$"))


def test_a_runs_tokens_row_never_prints_its_cost_as_a_token_count(demo_store: Path, page: tuple[Any, Console]) -> None:
    """The run's roll-up row shows its tokens only; its cost roll-up is the cost row, as money."""
    tab, console = page
    with serving(demo_store, tab) as base:
        _open_run(tab, base, "trip-planner")
        for name in ("invoke_agent trip-planner", "agent.iteration"):
            tab.locator(".wf-row", has_text=name).first.click()
            rollup = tab.locator("#span-details dd .rollup").first
            sync_api.expect(rollup).to_have_text(re.compile(r"^Σ input [\d,]+ · output [\d,]+ \(roll-up\)$"))
            sync_api.expect(tab.locator("#span-details dd .rollup").nth(1)).to_have_text(
                re.compile(r"^Σ \$0\.\d{1,4} \(roll-up\)$")
            )
            details = tab.locator("#span-details dl.kv").inner_text()
            assert "cost.usd" not in details and "cost" not in details.split("tokens", 1)[1].split("\n")[1]
        tab.locator(".wf-row", has_text="invoke_agent trip-planner").click()
        sync_api.expect(tab.locator("#span-details dd .rollup").first).to_have_text(
            "Σ input 568 · output 101 (roll-up)"
        )
    assert console.errors == []


MONEY = [0, 0.00005, 0.0001, 0.0000928, 0.000368, 0.0042, 0.25, 0.2542, 0.03125, 0.15625, 0.99996, 1, 1.125, 2.675,
         1234567.891, 9_007_199.254740992, 1e22]  # fmt: skip
"""Costs whose display must match the CLI's to the character: exact ties (0.03125, 1.125: Python keeps the even
digit, JavaScript's toFixed rounds up), the edges of each band, and thousands separators."""


def test_numbers_are_rounded_for_display_and_money_reads_as_the_cli_prints_it(
    noise_store: Path, page: tuple[Any, Console]
) -> None:
    """Money is one format, the CLI's (``format_usd``), everywhere in the viewer; other numbers show no float
    noise (``0.00009279999999999999``, ``0.30000000000000004``), the stored value on hover."""
    from make_store import NOISY_COST, NOISY_TEMPERATURE

    from otel_agentdiag._internal.money import format_usd

    tab, console = page
    with serving(noise_store, tab) as base:
        tab.goto(base + "/")
        shown = tab.evaluate("values => values.map((v) => money(v))", MONEY)
        assert shown == [format_usd(v) for v in MONEY]
        assert tab.evaluate("[money(null), money(-1), money(NaN), money(true)]") == ["\u2013"] * 4
        sync_api.expect(tab.locator("#runs tbody tr td.cost")).to_have_text(format_usd(NOISY_COST))
        _open_run(tab, base, "noisy-agent")
        sync_api.expect(tab.locator(".run-cost")).to_have_text(f"cost {format_usd(NOISY_COST)}")
        for name in ("invoke_agent noisy-agent", "agent.iteration", "chat unpriced-model"):
            tab.locator(".wf-row", has_text=name).click()
            sync_api.expect(tab.locator("#span-details")).to_contain_text(format_usd(NOISY_COST))
            text = tab.locator("#span-details").inner_text()
            assert repr(NOISY_COST)[:8] not in text and "0.0000927999" not in text and "00000000000" not in text
        temperature = tab.locator("#span-details table.attrs tr", has_text="temperature").locator("td").nth(1)
        sync_api.expect(temperature).to_have_text("0.3")
        assert temperature.locator("span").get_attribute("title") == repr(NOISY_TEMPERATURE)
        cost = tab.locator("#span-details table.attrs tr", has_text="agentdiag.cost.usd").locator("td").nth(1)
        sync_api.expect(cost).to_have_text(format_usd(NOISY_COST))
    assert console.errors == []


def test_the_status_filter_has_errors_lists_a_run_whose_tool_failed(
    demo_store: Path, page: tuple[Any, Console]
) -> None:
    """The demo run's root is unset and one of its tools failed: "has errors" lists it."""
    tab, console = page
    with serving(demo_store, tab) as base:
        tab.goto(base + "/")
        status = tab.locator("select[name=status]")
        sync_api.expect(status.locator("option[value=error]")).to_have_text("has errors")
        status.select_option(label="has errors")
        tab.locator("form.filters button[type=submit]").click()
        sync_api.expect(tab).to_have_url(re.compile(r"/\?status=error$"))
        rows = tab.locator("#runs tbody tr")
        sync_api.expect(rows).to_have_count(1)
        sync_api.expect(rows.first).to_contain_text("trip-planner")
        sync_api.expect(rows.first).to_contain_text("unset (1 err)")
        sync_api.expect(tab.locator("select[name=status]")).to_have_value("error")
    assert console.errors == []


def test_iteration_rows_show_their_index(demo_store: Path, page: tuple[Any, Console]) -> None:
    tab, console = page
    with serving(demo_store, tab) as base:
        _open_run(tab, base, "trip-planner")
        iterations = tab.locator(".wf-row", has_text="agent.iteration")
        sync_api.expect(iterations).to_have_count(4)
        names = [iterations.nth(i).locator(".wf-name").inner_text().strip() for i in range(4)]
        assert names == [f"agent.iteration #{i}" for i in range(4)]  # 0-based, as recorded
        iterations.nth(2).click()
        field = tab.locator("#span-details dl.kv dt", has_text=re.compile("^iteration$"))
        sync_api.expect(field.locator("xpath=following-sibling::dd[1]")).to_have_text("#2")
    assert console.errors == []


def test_a_conversation_links_to_its_runs(content_store: Path, page: tuple[Any, Console]) -> None:
    """Two conversations: each row opens the runs list of that conversation, and only those runs."""
    tab, console = page
    with serving(content_store, tab) as base:
        tab.goto(base + "/conversations")
        rows = tab.locator("#conversations tbody tr")
        sync_api.expect(rows).to_have_count(2)
        seen = []
        for index in range(2):
            tab.goto(base + "/conversations")
            row = tab.locator("#conversations tbody tr").nth(index)
            digest = row.get_attribute("data-conversation")
            assert digest and digest.startswith("hmac-sha256:")
            link = row.locator("a.runs-link")
            sync_api.expect(link).to_have_text("1")
            link.click()
            sync_api.expect(tab).to_have_url(re.compile(r"/\?conversation=hmac-sha256"))
            runs = tab.locator("#runs tbody tr")
            sync_api.expect(runs).to_have_count(1)
            sync_api.expect(tab.locator("#conversation-filter .digest")).to_have_attribute("title", digest)
            seen.append(runs.first.locator("td").nth(1).inner_text())
        assert sorted(seen) == ["hostile-agent", "trip-planner"]
        # A click on the row (not the link) and Enter on a selected row go the same way.
        tab.goto(base + "/conversations")
        tab.locator("#conversations tbody tr").first.locator("td").nth(1).click()
        sync_api.expect(tab).to_have_url(re.compile(r"/\?conversation=hmac-sha256"))
        sync_api.expect(tab.locator("#runs tbody tr")).to_have_count(1)
        tab.go_back()
        sync_api.expect(tab.locator("#conversations tbody tr")).to_have_count(2)
        tab.locator("body").press("j")
        tab.locator("body").press("Enter")
        sync_api.expect(tab).to_have_url(re.compile(r"/\?conversation=hmac-sha256"))
        sync_api.expect(tab.locator("#runs tbody tr")).to_have_count(1)
    assert console.errors == []


_LINE_BREAKS = """(cell) => {
  // Where the key's text moves to a new line: the character before each break, and the number of lines.
  const chars = [];
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.data.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (rect) chars.push([node.data[i], rect.top]);
    }
  }
  const before = [];
  let lines = 1;
  for (let i = 1; i < chars.length; i++) {
    if (chars[i][1] > chars[i - 1][1] + 2) { before.push(chars[i - 1][0]); lines++; }
  }
  return { text: chars.map((c) => c[0]).join(""), before, lines };
}"""


def test_attribute_keys_wrap_only_between_their_parts(demo_store: Path, page: tuple[Any, Console]) -> None:
    """A long key (``gen_ai.response.finish_reasons``) in the narrow details pane breaks after a dot or an
    underscore, never inside a word."""
    tab, console = page
    with serving(demo_store, tab) as base:
        _open_run(tab, base, "trip-planner")
        tab.locator(".wf-row", has_text="chat demo-model-1").first.click()
        keys = tab.locator("#span-details table.attrs tr > td:first-child")
        sync_api.expect(keys.first).to_be_visible()
        found = [keys.nth(i).evaluate(_LINE_BREAKS) for i in range(keys.count())]
        assert any(f["text"] == "gen_ai.response.finish_reasons" for f in found)
        assert any(f["lines"] > 1 for f in found), "no key wraps at this width: the test checks nothing"
        assert all(set(f["before"]) <= {".", "_"} for f in found), [f for f in found if f["before"]]
    assert console.errors == []


def test_the_span_filter_that_hides_the_selected_span_closes_its_details(
    demo_store: Path, page: tuple[Any, Console]
) -> None:
    tab, console = page
    with serving(demo_store, tab) as base:
        _open_run(tab, base, "trip-planner")
        tab.locator(".wf-row.err").click()
        sync_api.expect(tab.locator("#span-details")).to_have_count(1)
        assert "?span=" in tab.url
        tab.locator("[data-filter]").fill("chat")
        sync_api.expect(tab.locator(".wf-row")).to_have_count(4)
        sync_api.expect(tab.locator("#span-details")).to_have_count(0)
        sync_api.expect(tab).to_have_url(re.compile(r"/runs/[0-9a-f]{32}$"))
        # A filter that keeps the selected span keeps its details.
        tab.locator(".wf-row").nth(1).click()
        span_id = tab.locator("#span-details").get_attribute("data-span")
        tab.locator("[data-filter]").fill("demo-model")
        sync_api.expect(tab.locator("#span-details")).to_have_attribute("data-span", span_id or "")
        # Moving on from a closed selection starts at the first span shown.
        tab.locator("[data-filter]").fill("execute_tool")
        sync_api.expect(tab.locator("#span-details")).to_have_count(0)
        tab.locator("[data-filter]").press("Escape")
        tab.locator("body").press("j")
        sync_api.expect(tab.locator("#span-details h2").first).to_contain_text("execute_tool get_weather")
    assert console.errors == []
