// agentdiag viewer: runs, one run (waterfall, details, health, receipt), conversations.
// Every stored string is hostile input: text goes in with textContent, never as HTML.
"use strict";

const ROW = 22; // px, the waterfall's row height (keep in step with --row in app.css)
const OVERSCAN = 10;
const main = document.getElementById("main");
const state = { view: null, keys: null };

// -- helpers -------------------------------------------------------------------------------------------------
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key === "style") Object.assign(node.style, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function duration(ns) {
  if (ns === null || ns === undefined) return "unfinished";
  if (ns < 1e3) return `${ns} ns`;
  if (ns < 1e6) return `${(ns / 1e3).toFixed(ns < 1e4 ? 1 : 0)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(ns < 1e7 ? 2 : 1)} ms`;
  if (ns < 60e9) return `${(ns / 1e9).toFixed(2)} s`;
  return `${Math.floor(ns / 60e9)} m ${Math.round((ns % 60e9) / 1e9)} s`;
}

function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

function num(value) {
  return value === null || value === undefined ? "" : Number(value).toLocaleString();
}

function fixed(v, digits) {
  // v (finite, >= 0) with `digits` decimals, rounded as Python's format() rounds: to the nearest, an exact tie to
  // the even digit (toFixed breaks a tie upwards: 0.03125 would read $0.0313 here and $0.0312 in the CLI).
  if (v >= 1e21) return `${BigInt(v)}.${"0".repeat(digits)}`; // toFixed turns to exponents; such a double is whole
  const up = v.toFixed(digits);
  const exact = v.toFixed(digits + 60); // toFixed is exact: a tie shows as 5 and zeros after the cut
  const cut = exact.length - 60;
  if (!/^50*$/.test(exact.slice(cut))) return up;
  const down = exact.slice(0, cut);
  return Number(down[down.length - 1]) % 2 === 0 ? down : up;
}

function money(v) {
  // One format for a cost, the CLI's (format_usd): $1.23, $0.0042 / $0.25, <$0.0001, $0; unknown is a dash,
  // never $0.
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) return "–";
  if (v === 0) return "$0";
  if (v < 0.0001) return "<$0.0001";
  if (v < 1) {
    const text = fixed(v, 4);
    return `$${text.endsWith("0") ? text.slice(0, -2) + text.slice(-2).replace(/0+$/, "") : text}`;
  }
  const [whole, cents] = fixed(v, 2).split(".");
  return `$${whole.replace(/\B(?=(\d{3})+$)/g, ",")}.${cents}`;
}

function plain(v) {
  // A number for display: whole numbers as they are; others to 12 significant digits, so a sum's float noise
  // (0.00009279999999999999) reads as the figure it is (0.0000928).
  if (typeof v !== "number" || !Number.isFinite(v) || Number.isInteger(v)) return String(v);
  return String(Number(v.toPrecision(12)));
}

function budgetBadge(limits) {
  return badge(`budget exceeded${limits && limits.length ? ": " + limits.join(", ") : ""}`, "error budget");
}

const DIGEST = /^(hmac-sha256|sha256):/;

function digest(value) {
  // A digest shortened; the full value on hover and a copy button.
  const text = String(value);
  const short = text.length > 30 ? `${text.slice(0, 28)}…` : text;
  return el("span", { class: "mono digest", title: text }, short,
    el("button", { class: "copy", type: "button", title: "copy", text: "copy", onclick: (e) => {
      e.stopPropagation(); copy(text, e.currentTarget);
    } }));
}

function copy(text, button) {
  const done = () => { button.textContent = "copied"; setTimeout(() => { button.textContent = "copy"; }, 1200); };
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, () => {});
  else {
    const area = el("textarea", { style: { position: "fixed", opacity: "0" } });
    area.value = text; document.body.append(area); area.select();
    try { document.execCommand("copy"); done(); } catch (_) { /* nothing to copy into */ }
    area.remove();
  }
}

const COST_KEYS = new Set(["agentdiag.cost.usd", "agentdiag.usage.cost.usd"]);

function value(v, key) {
  // An attribute's value: digests shortened, money as money, numbers rounded for display (as stored on hover).
  if (typeof v === "string" && DIGEST.test(v)) return digest(v);
  if (typeof v === "string") return el("span", { text: v });
  if (typeof v === "number") {
    const text = COST_KEYS.has(key) ? money(v) : plain(v);
    return el("span", { class: "mono num", title: text === String(v) ? undefined : String(v), text });
  }
  if (Array.isArray(v) && v.some((x) => typeof x === "number" && !Number.isInteger(x))) {
    const text = `[${v.map((x) => (typeof x === "number" ? plain(x) : JSON.stringify(x))).join(",")}]`;
    return el("span", { class: "mono", title: JSON.stringify(v), text });
  }
  return el("span", { class: "mono", text: JSON.stringify(v) });
}

function keyName(key) {
  // An attribute key that wraps only between its parts (after a dot or an underscore), never inside a word.
  const node = el("span", { class: "key" });
  String(key).split(/(?<=[._])/).forEach((part, i) => { if (i) node.append(el("wbr")); node.append(part); });
  return node;
}

function badge(text, cls) {
  return el("span", { class: `badge ${cls || text || ""}`, text: text === null || text === undefined ? "—" : text });
}

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) throw new Error((body && body.error) || `${response.status} ${response.statusText}`);
  return body;
}

function fail(error) {
  main.replaceChildren(el("p", { class: "error-box", text: error.message || String(error) }));
}

// -- routing -------------------------------------------------------------------------------------------------
function go(url, replace) {
  if (replace) history.replaceState(null, "", url); else history.pushState(null, "", url);
  route();
}

function route() {
  const path = location.pathname;
  const params = new URLSearchParams(location.search);
  for (const link of document.querySelectorAll("[data-nav]")) {
    const active = link.dataset.nav === (path.startsWith("/conversations") ? "conversations" : "runs");
    link.classList.toggle("active", active);
  }
  const run = path.match(/^\/runs\/([0-9a-f]{32})$/);
  if (run) runPage(run[1], params.get("span"));
  else if (path === "/conversations") conversationsPage();
  else runsPage(params);
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[href^='/']");
  if (!link || event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  go(link.getAttribute("href"));
});
window.addEventListener("popstate", route);
document.addEventListener("keydown", (event) => {
  const typing = event.target.matches && event.target.matches("input, select, textarea");
  if (event.key === "/" && !typing) {
    const filter = document.querySelector("[data-filter]");
    if (filter) { event.preventDefault(); filter.focus(); filter.select(); }
    return;
  }
  if (typing) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  if (state.keys) state.keys(event);
});

// -- a list with a keyboard selection --------------------------------------------------------------------------
function keyedRows(rows, open) {
  let selected = -1;
  const select = (index) => {
    if (!rows.length) return;
    if (selected >= 0 && rows[selected]) rows[selected].classList.remove("selected");
    selected = Math.max(0, Math.min(rows.length - 1, index));
    rows[selected].classList.add("selected");
    rows[selected].scrollIntoView({ block: "nearest" });
  };
  state.keys = (event) => {
    if (event.key === "j" || event.key === "ArrowDown") { event.preventDefault(); select(selected + 1); }
    else if (event.key === "k" || event.key === "ArrowUp") { event.preventDefault(); select(selected - 1); }
    else if (event.key === "Enter" && selected >= 0) open(selected);
  };
}

// -- runs ----------------------------------------------------------------------------------------------------
const RUN_FILTERS = [["agent", "agent"], ["service", "service"], ["since", "since (ISO time)"], ["until", "until (ISO time)"]];

function runsPage(params) {
  document.title = "Runs · agentdiag";
  const form = el("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const query = new URLSearchParams();
    for (const [name, v] of new FormData(form)) if (v) query.set(name, String(v));
    go(`/${query.toString() ? "?" + query : ""}`);
  } });
  RUN_FILTERS.forEach(([name, label], i) => form.append(el("input", {
    name, placeholder: label, value: params.get(name) || "", "aria-label": label, "data-filter": i === 0 || undefined,
  })));
  // "error" lists the runs with at least one failed span (a tool that failed and a run that went on included).
  const status = el("select", { name: "status", "aria-label": "status" },
    ...[["", "any status"], ["ok", "ok"], ["error", "has errors"], ["unset", "unset"]]
      .map(([s, label]) => el("option", { value: s, text: label, selected: (params.get("status") || "") === s })));
  const conversation = params.get("conversation");
  form.append(status, el("button", { type: "submit", text: "Filter" }), el("a", { href: "/", text: "clear" }));
  if (conversation) {
    form.append(el("input", { type: "hidden", name: "conversation", value: conversation }),
      el("span", { class: "chip", id: "conversation-filter" }, "conversation ", digest(conversation)));
  }
  const body = el("tbody");
  const table = el("table", { class: "list", id: "runs" }, el("thead", {}, el("tr", {},
    ...["start", "agent", "service", "duration", "status", "stop", "iter.", "LLM", "tools", "tokens in", "tokens out", "cost", "receipt"]
      .map((h, i) => el("th", { class: i >= 6 && i <= 11 ? "num" : undefined, text: h })))), body);
  const more = el("button", { class: "more", type: "button", text: "More", hidden: true });
  main.replaceChildren(form, el("div", { class: "table-wrap" }, table), more);
  const rows = [];
  const open = (i) => go(`/runs/${rows[i].dataset.trace}`);
  keyedRows(rows, open);
  const query = new URLSearchParams();
  for (const name of ["agent", "service", "status", "conversation", "since", "until"]) if (params.get(name)) query.set(name, params.get(name));
  const load = (before) => {
    if (before) query.set("before", before);
    getJSON(`/ui/api/runs?${query}`).then((page) => {
      for (const run of page.runs) {
        const row = el("tr", { "data-trace": run.trace_id, onclick: () => go(`/runs/${run.trace_id}`) },
          el("td", { title: run.start_time, text: when(run.start_time) }),
          el("td", {}, el("a", { href: `/runs/${run.trace_id}`, text: run.agent || run.name })),
          el("td", { text: run.service || "" }),
          el("td", { class: "num", text: duration(run.duration_ns) }),
          el("td", {}, badge(run.error_count && run.status !== "error" ? `${run.status} (${run.error_count} err)` : run.status,
            run.status === "error" ? "error" : run.status)),
          el("td", { text: run.stop_reason || "" }),
          el("td", { class: "num", text: num(run.iterations) }),
          el("td", { class: "num", text: num(run.llm_calls) }),
          el("td", { class: "num", text: num(run.tool_calls) }),
          el("td", { class: "num", text: num(run.input_tokens) }),
          el("td", { class: "num", text: num(run.output_tokens) }),
          el("td", { class: "num cost" }, money(run.cost_usd), run.budget_exceeded ? budgetBadge() : null),
          el("td", { title: run.receipt ? undefined : "judged on the run's page" }, badge(run.receipt)));
        rows.push(row); body.append(row);
      }
      if (!rows.length) body.append(el("tr", {}, el("td", { colspan: 13, class: "muted", text: "No runs match." })));
      more.hidden = !page.next;
      more.onclick = () => load(page.next);
    }, fail);
  };
  load(null);
}

// -- conversations -------------------------------------------------------------------------------------------
function conversationsPage() {
  document.title = "Conversations · agentdiag";
  const body = el("tbody");
  const more = el("button", { class: "more", type: "button", text: "More", hidden: true });
  main.replaceChildren(el("div", { class: "table-wrap" }, el("table", { class: "list", id: "conversations" },
    el("thead", {}, el("tr", {}, ...["conversation", "first", "last activity", "runs", "failed runs", "errors", "LLM", "tools", "tokens in", "tokens out", "cost"]
      .map((h, i) => el("th", { class: i >= 3 ? "num" : undefined, text: h })))), body)), more);
  // Each conversation opens its runs (the runs list filtered to it).
  const runsOf = (c) => `/?conversation=${encodeURIComponent(c)}`;
  const rows = [];
  keyedRows(rows, (i) => go(runsOf(rows[i].dataset.conversation)));
  const load = (before) => {
    getJSON(`/ui/api/conversations${before ? "?before=" + encodeURIComponent(before) : ""}`).then((page) => {
      for (const c of page.conversations) {
        const row = el("tr", { "data-conversation": c.conversation, onclick: (e) => { if (!e.target.closest("a, button")) go(runsOf(c.conversation)); } },
          el("td", {}, digest(c.conversation)),
          el("td", { text: when(c.first_start_time) }), el("td", { text: when(c.last_activity_time) }),
          el("td", { class: "num" },
            el("a", { class: "runs-link", href: runsOf(c.conversation), title: "this conversation's runs", text: num(c.run_count) })),
          ...[c.failed_runs, c.error_count, c.llm_calls, c.tool_calls, c.input_tokens, c.output_tokens]
            .map((n) => el("td", { class: "num", text: num(n) })),
          el("td", { class: "num cost", title: c.budget_exceeded_runs ? `${c.budget_exceeded_runs} run(s) over budget` : undefined },
            money(c.cost_usd), c.budget_exceeded_runs ? budgetBadge() : null));
        rows.push(row); body.append(row);
      }
      if (!body.children.length) body.append(el("tr", {}, el("td", { colspan: 11, class: "muted", text: "No conversations." })));
      more.hidden = !page.next;
      more.onclick = () => load(page.next);
    }, fail);
  };
  load(null);
}

// -- one run -------------------------------------------------------------------------------------------------
function runPage(traceId, spanId) {
  document.title = "Run · agentdiag";
  main.replaceChildren(el("p", { class: "muted", text: "Loading run…" }));
  state.keys = null;
  getJSON(`/ui/api/runs/${traceId}`).then((run) => showRun(run, spanId), fail);
}

function showRun(run, spanId) {
  const spans = run.spans;
  const root = spans[0];
  document.title = `${root.name} · agentdiag`;
  const total = Math.max(run.duration_ns, 1);
  let shown = spans;
  let selected = Math.max(0, spanId ? spans.findIndex((s) => s.span_id === spanId) : 0);
  if (spanId && spans[selected].span_id !== spanId) selected = 0;

  const filter = el("input", { "data-filter": true, placeholder: "filter spans (/)", "aria-label": "filter spans" });
  const head = el("div", { class: "run-head" },
    el("a", { href: "/", text: "← runs" }),
    el("h1", { text: root.name }),
    badge(root.status, root.status === "error" ? "error" : root.status),
    el("span", { class: "muted" }, `${spans.length} spans · ${duration(run.duration_ns)} · started ${when(run.start_time)}`),
    el("span", { class: "run-cost", title: "the LLM calls' cost, summed", text: `cost ${money(run.cost_usd)}` }),
    run.budget_exceeded ? budgetBadge(run.budget_limits) : null,
    el("span", { class: "muted" }, "trace ", digest(run.trace_id)),
    run.view === "strict_projection" ? el("span", { class: "badge degraded", text: "strict projection (remote view)" }) : null,
    run.omitted_spans ? el("span", { class: "badge error", text: `${run.omitted_spans} spans omitted` }) : null,
    el("span", { class: "filters" }, filter));

  const ticks = el("div", { class: "ticks" },
    ...[0, 0.25, 0.5, 0.75, 1].map((f) => el("span", { class: "tick", style: { left: `${f * 100}%` }, text: duration(Math.round(total * f)) })));
  const spacer = el("div", { class: "wf-spacer" });
  const scroller = el("div", { class: "wf-scroll", tabindex: 0, id: "waterfall" }, spacer);
  const waterfall = el("div", { class: "waterfall" }, el("div", { class: "wf-head" }, el("div", { text: "span" }), ticks), scroller);
  const side = el("div", { class: "side", id: "side" });
  const details = el("div", { id: "details" });
  side.append(details, healthCard(run.health), receiptCard(run.receipt));
  main.replaceChildren(head, el("div", { class: "run-body" }, waterfall, side));

  const render = () => {
    spacer.style.height = `${shown.length * ROW}px`;
    const first = Math.max(0, Math.floor(scroller.scrollTop / ROW) - OVERSCAN);
    const last = Math.min(shown.length, Math.ceil((scroller.scrollTop + scroller.clientHeight) / ROW) + OVERSCAN);
    const rows = [];
    for (let i = first; i < last; i++) rows.push(spanRow(shown[i], i, total, shown[i] === spans[selected], () => choose(spans.indexOf(shown[i]))));
    spacer.replaceChildren(...rows);
  };
  let pending = false;
  scroller.addEventListener("scroll", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  });
  new ResizeObserver(() => render()).observe(scroller);

  const choose = (index, scroll, record = true) => {
    if (index < 0 || index >= spans.length) return;
    selected = index;
    const span = spans[index];
    const url = `/runs/${run.trace_id}?span=${span.span_id}`;
    if (record && location.pathname + location.search !== url) history.replaceState(null, "", url);
    details.replaceChildren(spanCard(span));
    const at = shown.indexOf(span);
    if (scroll && at >= 0) {
      const top = at * ROW;
      if (top < scroller.scrollTop) scroller.scrollTop = top;
      else if (top + ROW > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = top + ROW - scroller.clientHeight;
    }
    render();
  };
  const move = (step) => {
    const at = shown.indexOf(spans[selected]);
    const next = shown[Math.max(0, Math.min(shown.length - 1, (at < 0 ? 0 : at + step)))];
    if (next) choose(spans.indexOf(next), true);
  };
  filter.addEventListener("input", () => {
    const text = filter.value.trim().toLowerCase();
    shown = !text ? spans : spans.filter((s) =>
      s.name.toLowerCase().includes(text) || s.kind.includes(text) || String(s.error_type || "").toLowerCase().includes(text));
    if (selected >= 0 && !shown.includes(spans[selected])) {
      // The filter hid the selected span: its details close too (and the address no longer names it).
      selected = -1;
      details.replaceChildren();
      history.replaceState(null, "", `/runs/${run.trace_id}`);
    }
    scroller.scrollTop = 0;
    render();
  });
  state.keys = (event) => {
    if (event.key === "j" || event.key === "ArrowDown") { event.preventDefault(); move(1); }
    else if (event.key === "k" || event.key === "ArrowUp") { event.preventDefault(); move(-1); }
    else if (event.key === "Enter") { details.scrollIntoView({ block: "start" }); }
    else if (event.key === "Escape") { go("/"); }
  };
  choose(selected, false, Boolean(spanId));
  // A deep link: bring the span into the middle of the waterfall.
  if (spanId) scroller.scrollTop = Math.max(0, selected * ROW - scroller.clientHeight / 2);
  render();
}

function spanRow(span, index, total, isSelected, onclick) {
  const error = span.status === "error";
  const left = (span.offset_ns / total) * 100;
  const width = span.duration_ns === null ? 100 - left : (span.duration_ns / total) * 100;
  const labelLeft = left + width > 80 ? { right: `${100 - left + 0.5}%` } : { left: `calc(${left + width}% + 4px)` };
  return el("div", {
    class: `wf-row${error ? " err" : ""}${isSelected ? " selected" : ""}`, style: { top: `${index * ROW}px` },
    "data-span": span.span_id, onclick, title: span.name,
  },
  el("div", { class: "wf-name", style: { paddingLeft: `${6 + span.depth * 14}px` } },
    el("span", { class: "wf-mark", text: error ? "✗" : "" }),
    el("span", { class: `wf-kind k-${span.kind}` }),
    el("span", { class: "wf-label-name", text: span.name }),
    span.iteration === null || span.iteration === undefined ? null : el("span", { class: "wf-index", text: ` #${span.iteration}` })),
  el("div", { class: "wf-track" },
    el("div", { class: `wf-bar k-${span.kind}`, style: { left: `${left}%`, width: `${Math.max(width, 0.15)}%` } }),
    el("span", { class: "wf-label", style: labelLeft, text: duration(span.duration_ns) })));
}

function tokens(span) {
  const parts = [];
  const own = span.tokens.own;
  const rollup = span.tokens.rollup;
  if (Object.keys(own).length) {
    parts.push(el("div", { class: "own", title: "reported by this call (a leaf)" },
      Object.entries(own).map(([k, v]) => `${k.replace(/_tokens$/, "")} ${num(v)}`).join(" · ")));
  }
  if (Object.keys(rollup).length) {
    parts.push(el("div", { class: "rollup", title: "rolled up from the LLM calls below (not counted again)" },
      "Σ " + Object.entries(rollup).map(([k, v]) => `${k.replace(/_tokens$/, "")} ${num(v)}`).join(" · ") + " (roll-up)"));
  }
  return parts.length ? parts : null;
}

function cost(span) {
  const parts = [];
  if (span.cost.own !== null) parts.push(el("div", { class: "own", title: "this call's cost (a leaf)", text: money(span.cost.own) }));
  if (span.cost.rollup !== null) {
    parts.push(el("div", { class: "rollup", title: "rolled up from the LLM calls below (not counted again)", text: `Σ ${money(span.cost.rollup)} (roll-up)` }));
  }
  if (span.budget && span.budget.exceeded) {
    const passed = span.budget.limits.map((l) => l in span.budget.thresholds
      ? `${l} over ${l === "cost_usd" ? money(span.budget.thresholds[l]) : num(span.budget.thresholds[l])}` : l);
    parts.push(el("div", {}, budgetBadge(), passed.length ? ` ${passed.join(", ")}` : ""));
  }
  return parts.length ? parts : null;
}

function kv(pairs) {
  const list = el("dl", { class: "kv" });
  for (const [key, val] of pairs) if (val !== null && val !== undefined && val !== "") list.append(el("dt", { text: key }), el("dd", {}, val));
  return list;
}

function spanCard(span) {
  const error = span.status === "error";
  const card = el("div", { class: `card${error ? " err" : ""}`, id: "span-details", "data-span": span.span_id },
    el("h2", {}, el("span", { class: `wf-kind k-${span.kind}` }), el("span", { text: span.name }), badge(span.status, error ? "error" : span.status)),
    kv([
      ["kind", `${span.kind} (${span.span_kind})`],
      ["duration", duration(span.duration_ns)],
      ["starts at", `+${duration(span.offset_ns)}`],
      ["error type", span.error_type ? el("span", { class: "error-type", text: span.error_type }) : null],
      ["_OTHER", span.name_note],
      ["iteration", span.iteration === null || span.iteration === undefined ? null : `#${span.iteration}`],
      ["model", span.model],
      ["tokens", tokens(span)],
      ["cost", cost(span)],
      ["stream end", span.stream_end],
      ["span id", digest(span.span_id)],
      ["corrupt", span.corrupt ? "a stored column could not be read" : null],
      ["imported", span.imported ? "yes (agentdiag ingest)" : null],
    ]));
  if (span.http_attempts.length) {
    card.append(el("h2", { text: `HTTP attempts (${span.http_attempts.length})` }), events(span.http_attempts));
  }
  if (span.events.length) card.append(el("h2", { text: "Events" }), events(span.events));
  const attrs = el("table", { class: "attrs" });
  for (const [key, val] of Object.entries(span.attributes).sort(([a], [b]) => a.localeCompare(b))) {
    attrs.append(el("tr", {}, el("td", {}, keyName(key)), el("td", {}, value(val, key))));
  }
  card.append(el("h2", { text: "Attributes" }), attrs);
  if (span.content) {
    card.append(el("h2", { text: "Captured content (local only)" }));
    for (const item of span.content) {
      card.append(el("div", { class: "muted", text: item.role }),
        el("pre", { class: "content", text: typeof item.value === "string" ? item.value : JSON.stringify(item.value, null, 2) }));
    }
  }
  return card;
}

function events(list) {
  const table = el("table", { class: "attrs" });
  for (const event of list) {
    table.append(el("tr", {}, el("td", { text: `${event.name} +${duration(event.offset_ns)}` }),
      el("td", {}, ...Object.entries(event.attributes).map(([k, v]) => el("div", {}, keyName(k), ": ", value(v, k))))));
  }
  return table;
}

function healthCard(health) {
  return el("div", { class: "card", id: "health" },
    el("h2", {}, "Health", badge(health.stage, health.stage === "errored" ? "error" : health.stage === "finished" ? "ok" : "degraded")),
    kv([
      ["signals", health.signals.length ? el("span", { class: "signals" }, health.signals.map((s) => badge(s, "error"))) : "none"],
      ["stall", health.stall.suspected ? `suspected: silent ${plain(health.stall.silent_seconds)} s` : "no"],
      ["repetition", health.repetition.tool ? `${health.repetition.tool} ×${health.repetition.longest_run}${health.repetition.suspected ? " (suspected)" : ""}` : "none"],
      ["recovery", `${health.recovery.errors} errors, ${health.recovery.recovered} recovered, ${health.recovery.unrecovered} not`],
      ["counts", Object.entries(health.counts).map(([k, v]) => `${k} ${num(v)}`).join(" · ")],
      ["cost", money(health.cost_usd)],
      ["budget", health.budget_exceeded ? budgetBadge(health.budget_limits) : null],
    ]));
}

function receiptCard(receipt) {
  const c = receipt.counts;
  return el("div", { class: "card", id: "receipt" },
    el("h2", {}, "Integrity receipt", badge(receipt.status)),
    kv([
      ["reasons", receipt.reasons.length ? receipt.reasons.join(", ") : "none"],
      ["accounting", `observed ${num(c.observed)} = accepted ${num(c.accepted)} + rejected ${num(c.rejected)} + dropped ${num(c.dropped)}`],
      ["stored", num(c.stored)],
      ["sequence gaps", num(c.sequence_gaps)],
      ["unfinished", num(c.unfinished_spans)],
      ["provenance", receipt.provenance],
      ["session", receipt.session ? digest(receipt.session) : "none"],
    ]));
}

route();
