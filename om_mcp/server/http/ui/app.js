// The om-mcp status page: plain DOM and inline SVG, no library, nothing loaded from elsewhere.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const hash = new URLSearchParams(location.hash.slice(1));
if (hash.get("token")) sessionStorage.setItem("om-token", hash.get("token"));
const token = sessionStorage.getItem("om-token");
const state = { info: null, threads: {}, current: null, lastEvent: null, events: [], poll: null, view: null };
const KIND_LABEL = { observation: "observation", buffering: "buffering", activation: "activation", reflection: "reflection" };

async function api(path, options = {}) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    options = { ...options, body: JSON.stringify(options.json) };
    delete options.json;
  }
  const response = await fetch(`api/${path}`, { ...options, headers });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined) continue;
    if (key === "text") node.textContent = value;
    else if (key === "onclick") node.addEventListener("click", value);
    else if (key === "onchange") node.addEventListener("change", value);
    else if (key === "onsubmit") node.addEventListener("submit", value);
    else if (key === "onkeydown") node.addEventListener("keydown", value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const fmt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
const when = (iso) => (iso ? new Date(iso).toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short" }) : "–");
const clock = (iso) => new Date(iso).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit" });
const ids = (id) => encodeURIComponent(id);

function showError(error) {
  const box = document.getElementById("error");
  box.textContent = String(error.message || error);
  box.hidden = false;
  document.body.dataset.state = "error";
}

async function start() {
  try {
    state.info = await api("info");
    const i = state.info;
    document.getElementById("info").textContent =
      [`${i.name} ${i.version}`, i.database, `scope ${i.scope}`].filter(Boolean).join(" · ");
    renderReadiness(i);
    await renderSidebar();
    await renderGrants();
    const wanted = hash.get("thread");
    if (wanted) await openThread(wanted, hash.get("view"));
    else document.body.dataset.state = "ready";
  } catch (error) { showError(error); }
}

// One calm line: what happens now and, when observation cannot run, the fix (`code` as code).
function renderReadiness(i) {
  const line = document.getElementById("readiness");
  const text = [i.readiness, i.readiness_fix].filter(Boolean).join(" ");
  line.replaceChildren(el("span", { class: "dot" }), ...withCode(text));
  line.dataset.ready = i.model_ready ? "yes" : "no";
  line.title = i.model_reason || i.readiness;
  line.hidden = !text;
}

function withCode(text) {
  return text.split(/`([^`]+)`/).map((piece, n) => (n % 2 ? el("code", { text: piece }) : piece));
}

async function renderSidebar() {
  const nav = document.getElementById("sidebar");
  const resources = await api("resources");
  const blocks = await Promise.all(resources.map(async (r) => {
    const threads = await api(`resources/${ids(r.id)}/threads`);
    threads.forEach((t) => { state.threads[t.id] = t; });
    return [
      el("h2", { title: r.id }, el("span", { class: "resource", text: r.id }),
        el("small", { text: `${r.threads} thread${r.threads === 1 ? "" : "s"} · ${fmt(r.messages)} messages` })),
      threads.map((t) => el("a", { href: `#thread=${ids(t.id)}`, "data-thread": t.id,
        class: t.id === state.current ? "current" : null,
        onclick: (e) => { e.preventDefault(); openThread(t.id); } },
        el("span", { class: "title", text: t.title || t.id }),
        el("small", { text: `${fmt(t.messages)} messages · ${t.generation ? `generation ${t.generation} · ` : ""}${when(t.updated_at)}` }))),
    ];
  }));
  nav.replaceChildren(...blocks.flat(2));
  if (!resources.length) nav.append(el("p", { class: "empty", text: "No memory yet." }));
}

// Remote clients' OAuth grants (an admin's view): who may use which resources, and a way to end it.
async function renderGrants() {
  let grants;
  try { grants = await api("grants"); } catch (error) { return; }  // a tenant's token: not its to see
  if (!grants.length) return;
  const nav = document.getElementById("sidebar");
  nav.append(el("h2", { class: "grants" }, el("span", { text: "Connected clients" }),
    el("small", { text: "OAuth grants (om-mcp token list)" })));
  for (const g of grants) {
    const row = el("div", { class: "grant", "data-grant": g.id, "data-state": g.state },
      el("span", { class: "title", text: g.client }),
      el("small", { text: `${g.resources.join(", ")} · ${g.state} · ${g.last_used_at ? `used ${when(g.last_used_at)}` : `since ${when(g.created_at)}`}` }));
    if (g.state !== "revoked") {
      row.append(el("button", { type: "button", text: "Revoke", onclick: async () => {
        if (!confirm(`Revoke ${g.client}'s access to ${g.resources.join(", ")}? Its tokens stop working now.`)) return;
        try { await api(`grants/${ids(g.id)}`, { method: "DELETE" }); row.dataset.state = "revoked"; row.querySelector("button").remove(); }
        catch (error) { showError(error); }
      } }));
    }
    nav.append(row);
  }
}

async function openThread(id, view = null) {
  clearInterval(state.poll);
  state.current = id; state.events = []; state.lastEvent = null; state.view = view;
  document.querySelectorAll("#sidebar a").forEach((a) => a.classList.toggle("current", a.dataset.thread === id));
  document.body.dataset.state = "loading";
  try {
    const [detail, series] = await Promise.all([api(`threads/${ids(id)}`), api(`threads/${ids(id)}/series`)]);
    // A thread with nothing observed yet (no model, or not enough to observe) opens on its messages.
    state.view = view === "messages" || view === "memory" ? view : detail.generations.length ? "memory" : "messages";
    renderThread(detail, series);
    await loadMessages({});
    await pollEvents();
    state.poll = setInterval(() => pollEvents().catch(showError), 5000);
    document.body.dataset.state = "ready";
  } catch (error) { showError(error); }
}

const TITLE_FROM = { "first-prompt": "named after its first prompt", observer: "named by the Observer", set: "named by you or your client" };

function renderThread(d, series) {
  const t = d.thread;
  const main = document.getElementById("main");
  const tab = (view, label) => el("button", { role: "tab", class: "tab", "data-view": view,
    "aria-selected": String(state.view === view), onclick: () => showView(view) }, label);
  main.replaceChildren(
    el("div", { class: "thread-head" },
      el("div", { class: "heading" }, titleBlock(t),
        el("div", { class: "meta" }, el("code", { text: t.id }),
          ` · ${d.record_key} · ${fmt(t.messages)} messages · created ${when(t.created_at)} · updated ${when(t.updated_at)}`)),
      el("button", { class: "danger", id: "forget", onclick: () => askForget(d) }, "Forget thread…")),
    el("div", { id: "confirm-slot" }),
    el("div", { class: "tabs", role: "tablist" }, tab("messages", `Messages · ${fmt(t.messages)}`),
      tab("memory", d.generations.length ? `Memory · generation ${t.generation}` : "Memory · nothing observed yet")),
    messagesView(t),
    el("div", { id: "memory-view", "data-view": "memory", hidden: state.view !== "memory" ? "" : null },
    el("section", {}, el("h3", { text: "The two windows" }), el("div", { class: "grid2" },
      gauge("msg", "Unobserved messages", d.messages_window, "observe at"),
      gauge("obs", "Observation log", d.observations_window, "reflect at")),
      el("div", { class: "meta", text: `Buffered ahead: ${d.buffered.chunks} chunks (${fmt(d.buffered.message_tokens)} message tokens → ${fmt(d.buffered.observation_tokens)} observation tokens)${d.buffered.reflection_ready ? " · a reflection is ready" : ""}` }),
      spendLine(d.spend), privacyLine(d.redactions)),
    el("section", {}, el("h3", { text: "Over time" }), el("div", { class: "charts" },
      tokenChart("Unobserved message tokens", "s-msg", series.points, "unobserved_tokens", "message_threshold"),
      tokenChart("Observation log tokens", "s-obs", series.points, "observation_tokens", "observation_threshold"),
      cycleChart("Model latency per cycle", series.cycles, (c) => c.duration_ms === null ? null : c.duration_ms / 1000,
        (v) => `${v.toFixed(1)} s`, (v) => `${+v.toPrecision(3)} s`),
      cycleChart("Cost per cycle (USD)", series.cycles, (c) => c.cost, (v) => `$${v.toFixed(4)}`,
        (v) => `$${+v.toPrecision(2)}`))),
    el("section", {}, el("h3", { text: "Where the agent was" }), el("dl", { class: "kv" },
      el("dt", { text: "Current task" }), el("dd", { text: d.hints.current_task || "–" }),
      el("dt", { text: "Suggested response" }), el("dd", { text: d.hints.suggested_response || "–" }),
      el("dt", { text: `Working memory${d.working_memory_scope ? ` (${d.working_memory_scope})` : ""}` }),
      el("dd", {}, el("pre", { id: "working-memory", text: d.working_memory || "–" })))),
    logSection(d.generations, d.thread.id),
    el("section", {}, el("h3", { text: "Events" }), el("ul", { class: "events", id: "events" }))),
  );
  history.replaceState(null, "", `#thread=${ids(t.id)}&view=${state.view}`);
}

function showView(view) {
  state.view = view;
  document.querySelectorAll(".tab").forEach((b) => b.setAttribute("aria-selected", String(b.dataset.view === view)));
  document.getElementById("messages-view").hidden = view !== "messages";
  document.getElementById("memory-view").hidden = view !== "memory";
  history.replaceState(null, "", `#thread=${ids(state.current)}&view=${view}`);
}

// -- the title: the stored one, the Observer's, or the first prompt; renamed here ---------------

function titleBlock(t) {
  const holder = el("div", { class: "title-row", id: "title-row" });
  const show = () => holder.replaceChildren(
    el("h2", { id: "thread-title", text: t.title || t.id }),
    el("button", { class: "rename", id: "rename", title: "Give this thread a name of your own", onclick: edit }, "Rename"),
    t.title_from ? el("span", { class: "meta title-from", text: TITLE_FROM[t.title_from] || "" }) : null);
  const edit = () => {
    const input = el("input", { type: "text", id: "title-input", value: t.title || "", maxlength: "500",
      "aria-label": "thread title", onkeydown: (e) => { if (e.key === "Escape") show(); } });
    holder.replaceChildren(el("form", { class: "title-editor", onsubmit: (e) => { e.preventDefault(); save(input.value); } },
      input, " ", el("button", { class: "solid", id: "title-save", type: "submit" }, "Save"), " ",
      el("button", { type: "button", onclick: show }, "Cancel")));
    input.focus(); input.select();
  };
  const save = async (title) => {
    try {
      const saved = await api(`threads/${ids(t.id)}/title`, { method: "PUT", json: { title } });
      Object.assign(t, saved);
      state.threads[t.id] = saved;
      show();
      await renderSidebar();
    } catch (error) { showError(error); }
  };
  show();
  return holder;
}

// -- messages: newest first, paged; or the search's best matches -------------------------------

function messagesView(t) {
  const input = el("input", { type: "search", id: "message-search", placeholder: "Search this thread's messages",
    "aria-label": "search this thread's messages" });
  return el("div", { id: "messages-view", "data-view": "messages", hidden: state.view !== "messages" ? "" : null },
    el("section", { class: "messages" },
      el("form", { class: "search", role: "search", onsubmit: (e) => { e.preventDefault(); loadMessages({ q: input.value.trim() || null }); } },
        input, " ", el("button", { type: "submit" }, "Search"), " ",
        el("button", { type: "button", id: "search-clear", hidden: "", onclick: () => { input.value = ""; loadMessages({}); } }, "Clear")),
      el("p", { class: "meta", id: "messages-status" }),
      el("ol", { class: "message-list", id: "messages" }),
      el("p", { class: "more" }, el("button", { id: "messages-more", hidden: "" }, "Older messages"))));
}

async function loadMessages({ q = null, before = null, offset = 0 }) {
  const id = state.current;
  const list = document.getElementById("messages");
  const params = new URLSearchParams({ limit: "20" });
  if (q) { params.set("q", q); if (offset) params.set("offset", String(offset)); } else if (before) params.set("before", before);
  let page;
  try {
    page = await api(`threads/${ids(id)}/messages?${params}`);
  } catch (error) {  // a query with no searchable words, say: said where the results go
    if (id !== state.current) return;
    list.replaceChildren();
    document.getElementById("messages-status").textContent = String(error.message || error);
    document.getElementById("messages-more").hidden = true;
    return;
  }
  if (id !== state.current) return;
  const first = !before && !offset;
  if (first) list.replaceChildren();
  list.append(...page.messages.map((m) => messageItem(m, page.words)));
  const shown = list.children.length;
  document.getElementById("messages-status").textContent = q
    ? (shown ? `${fmt(shown)} message${shown === 1 ? "" : "s"} match “${q}”, best match first${page.more ? " (more below)" : ""}` : `No message matches “${q}”.`)
    : (page.total ? `${fmt(page.total)} messages, newest first · showing ${fmt(shown)}` : "No messages yet.");
  document.getElementById("search-clear").hidden = !q;
  const more = document.getElementById("messages-more");
  more.hidden = !page.more;
  more.textContent = q ? "More matches" : "Older messages";
  more.onclick = () => loadMessages(q ? { q, offset: page.next_offset } : { before: page.next_before });
}

function messageItem(m, words) {
  const item = el("li", { class: `message role-${m.role}`, "data-message": m.id },
    el("div", { class: "message-head" }, el("span", { class: `role ${m.role}`, text: m.role }),
      el("time", { datetime: m.created_at, text: when(m.created_at) }),
      el("code", { class: "id", text: m.id }), el("span", { class: "meta", text: `${fmt(m.tokens)} tokens` })),
    m.parts.map((p) => partBlock(p, words)));
  if (words && words.length && !item.querySelector("mark")) {
    // The search scores a message with the two before it (a reply is found by its question's words).
    item.querySelector(".message-head").append(el("span", { class: "near", text: "found by the messages before it" }));
  }
  if (m.parts.some((p) => p.chars > p.text.length)) {
    item.append(el("button", { class: "whole", onclick: async () => {
      try {
        const page = await api(`threads/${ids(state.current)}/messages?id=${ids(m.id)}`);
        item.replaceWith(messageItem(page.messages[0], words));
      } catch (error) { showError(error); }
    } }, "Show the whole message"));
  }
  return item;
}

function partBlock(p, words) {
  const tool = p.type === "tool-call" ? `${p.tool_name} call` : p.type === "tool-result" ? `${p.tool_name} ${p.is_error ? "error" : "result"}` : null;
  const label = tool || (p.type === "text" ? null : p.type);
  const cut = p.chars > p.text.length ? ` … (${fmt(p.chars - p.text.length)} more characters)` : "";
  return el("div", { class: `part ${p.type}${p.is_error ? " failed" : ""}` },
    label ? el("span", { class: "part-label", text: label }) : null,
    el("pre", {}, ...marked(p.text, words), cut));
}

// The search's words marked where a word starts with one (the index matches word forms too).
function marked(text, words) {
  if (!words || !words.length) return [text];
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`\\b(?:${escaped.join("|")})[\\p{L}\\p{N}]*`, "giu");
  const out = [];
  let last = 0;
  for (const found of text.matchAll(pattern)) {
    out.push(text.slice(last, found.index), el("mark", { text: found[0] }));
    last = found.index + found[0].length;
  }
  out.push(text.slice(last));
  return out;
}

function gauge(cls, label, w, verb) {
  const share = w.threshold ? Math.min(w.tokens / w.threshold, 1) : 0;
  const fill = el("div");
  fill.style.width = `${(share * 100).toFixed(1)}%`;
  return el("div", { class: `gauge ${cls}` },
    el("div", { text: `${label}: ${fmt(w.tokens)} tokens (${Math.round(share * 100)}% · ${verb} ${fmt(w.threshold)})` }),
    el("div", { class: "bar" }, fill));
}

// -- charts ------------------------------------------------------------------------------

const W = 520, H = 190, M = { l: 52, r: 10, t: 8, b: 24 };

function niceStep(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v)), n = v / p;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 2.5 ? 2.5 : n <= 5 ? 5 : 10) * p;
}

function frame(xs, maxY, yLabel) {
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1000);
  const step = niceStep((maxY * 1.05) / 4), top = step * 4;
  const sx = (x) => M.l + ((x - x0) / (x1 - x0)) * (W - M.l - M.r);
  const sy = (y) => H - M.b - (y / top) * (H - M.t - M.b);
  const svg = el("svg:svg", { class: "plot", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  const grid = el("svg:g", { class: "grid" });
  for (let i = 0; i <= 4; i++) {
    const y = sy(step * i);
    grid.append(el("svg:line", { x1: M.l, x2: W - M.r, y1: y, y2: y }),
      el("svg:text", { x: M.l - 6, y: y + 3, "text-anchor": "end", text: yLabel(step * i) }));
  }
  const span = x1 - x0;
  for (let i = 0; i <= 3; i++) {
    const x = x0 + (span * i) / 3, d = new Date(x);
    const label = span > 2 * 86400e3 ? d.toLocaleDateString("en-GB", { day: "numeric", month: "short" })
      : d.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit" });
    grid.append(el("svg:text", { x: sx(x), y: H - 6, "text-anchor": i === 0 ? "start" : i === 3 ? "end" : "middle", text: label }));
  }
  svg.append(grid, el("svg:line", { class: "axis", x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b, stroke: "#bbb" }));
  return { svg, sx, sy };
}

function pathOf(points, sx, sy, step) {
  let d = "";
  points.forEach(([x, y], i) => {
    if (i === 0) d = `M${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
    else if (step) d += `H${sx(x).toFixed(1)}V${sy(y).toFixed(1)}`;
    else d += `L${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
  });
  return d;
}

function tokenChart(title, cls, points, key, thresholdKey) {
  const box = el("div", { class: "chart", "data-chart": key });
  box.append(el("h4", { text: title }), el("div", { class: "legend" },
    el("span", {}, el("i", { class: cls }), "tokens"), el("span", {}, el("i", { class: cls }), "threshold (dashed)")));
  if (!points.length) { box.append(el("p", { class: "empty", text: "No data yet." })); return box; }
  const xs = points.map((p) => Date.parse(p.at));
  const values = points.map((p, i) => [xs[i], p[key]]);
  const limits = points.map((p, i) => [xs[i], p[thresholdKey]]);
  const { svg, sx, sy } = frame(xs, Math.max(...values.map((v) => v[1]), ...limits.map((v) => v[1])), fmt);
  svg.append(
    el("svg:path", { class: `threshold ${cls}`, d: pathOf(limits, sx, sy, true), "data-points": limits.length }),
    el("svg:path", { class: `series ${cls}`, d: pathOf(values, sx, sy, true), "data-points": values.length },
      el("svg:title", { text: `${title}: ${fmt(values.at(-1)[1])} now` })));
  box.append(svg);
  return box;
}

function cycleChart(title, cycles, value, label, tick) {
  const box = el("div", { class: "chart", "data-chart": title });
  const shown = cycles.filter((c) => value(c) !== null && value(c) !== undefined);
  const kinds = [...new Set(shown.map((c) => c.kind))];
  const total = shown.reduce((s, c) => s + value(c), 0);
  box.append(el("h4", { text: `${title}${title.includes("Cost") ? ` · total ${label(total)}` : ""}` }),
    el("div", { class: "legend" }, kinds.map((k) => el("span", {}, el("i", { class: `k-${k}` }), KIND_LABEL[k] || k))));
  if (!shown.length) {
    // cycles that called a model, whose price nobody knows: said, not taken for no calls at all
    const called = cycles.filter((c) => c.kind !== "activation" && (c.tokens_in || c.duration_ms));
    const text = called.length ? `${fmt(called.length)} model calls, none with a known price (no cost map entry for ${[...new Set(called.map((c) => c.model).filter(Boolean))].join(", ") || "the model"}).` : "No model calls yet.";
    box.append(el("p", { class: "empty", text })); return box;
  }
  const xs = shown.map((c) => Date.parse(c.at));
  const { svg, sx, sy } = frame(xs, Math.max(...shown.map(value)), tick);
  const width = Math.max(2, Math.min(10, (W - M.l - M.r) / shown.length - 1));
  shown.forEach((c, i) => {
    const y = sy(value(c));
    svg.append(el("svg:rect", { class: `bar k-${c.kind}${c.ok ? "" : " failed"}`, x: (sx(xs[i]) - width / 2).toFixed(1),
      y: y.toFixed(1), width: width.toFixed(1), height: Math.max(0.5, H - M.b - y).toFixed(1) },
      el("svg:title", { text: `${c.kind}${c.ok ? "" : " (failed)"} at ${clock(c.at)}: ${label(value(c))}${c.model ? ` · ${c.model}` : ""}` })));
  });
  box.append(svg);
  return box;
}

function spendLine(s) {
  if (!s) return null;
  const money = (v) => `$${v >= 0.01 || v === 0 ? v.toFixed(2) : v.toFixed(4)}`;
  const period = (p) => `${money(p.usd)} and ${fmt(p.tokens)} tokens in ${fmt(p.calls)} calls`;
  const caps = Object.entries(s.caps).map(([k, v]) => `${k.replace("_", " ")} ${k.endsWith("usd") ? money(v) : fmt(v)}`);
  // a token bound to some resources is shown the caps, not what the whole server spent
  const spent = s.today ? `Model spend today ${period(s.today)}; this month ${period(s.this_month)}` : "Model spend";
  return el("div", { class: `meta spend${s.reason ? " paused" : ""}`, id: "spend" },
    `${spent}${caps.length ? ` · caps: ${caps.join(", ")}` : " · no caps"}`,
    s.reason ? el("strong", { text: ` · paused: ${s.reason}` }) : null);
}

function privacyLine(r) {
  const rules = Object.entries(r || {});
  if (!rules.length) return null;
  const total = rules.reduce((n, [, c]) => n + c, 0);
  return el("div", { class: "meta", id: "redactions",
    text: `Kept out of stored messages: ${fmt(total)} (${rules.map(([k, c]) => `${k} ${fmt(c)}`).join(", ")})` });
}

// -- the observation log ----------------------------------------------------------------

function logSection(generations, threadId) {
  const section = el("section", { id: "log" }, el("h3", { text: `Observation log · ${generations.length} generation${generations.length === 1 ? "" : "s"}` }));
  if (!generations.length) { section.append(el("p", { class: "empty", text: "Nothing observed yet." })); return section; }
  const last = generations.length - 1;
  const columns = el("div", { class: "compare" });
  const column = (initial) => {
    const holder = el("div", { class: "generation-column" });
    const select = el("select", { "aria-label": "generation", onchange: () => fill(Number(select.value)) },
      generations.map((g, i) => el("option", { value: i, text: `Generation ${g.generation}${g.current ? " (current)" : ""} · ${fmt(g.tokens)} tokens · ${g.groups.length} groups` })));
    const body = el("div");
    const restore = el("button", { class: "restore" }, "Restore this generation");
    const fill = (i) => {
      select.value = String(i);
      const g0 = generations[i];
      restore.hidden = g0.current;
      restore.onclick = () => restoreGeneration(threadId, g0.generation);
      restore.dataset.generation = g0.generation;
      body.replaceChildren(...g0.groups.map((g) => el("div", { class: `group ${g.kind}`, "data-generation": g0.generation },
        el("header", { text: `#${g.position} ${g.kind} · ${fmt(g.tokens)} tokens${g.first_message_id ? ` · ${g.first_message_id}…${g.last_message_id}` : ""}${g.observed_at ? ` · ${when(g.observed_at)}` : ""}` }),
        el("div", { class: "lines" }, g.lines.map((line) => lineRow(threadId, line, g0.current))))));
    };
    fill(initial);
    holder.append(el("div", { class: "column-head" }, select, restore), body);
    return holder;
  };
  columns.append(column(Math.max(0, last - 1)));
  if (last > 0) columns.append(column(last));
  section.append(el("p", { class: "meta", text: last > 0 ? "Side by side: what the Reflector condensed (left) into the next generation (right)." : "One generation so far: no reflection yet." }), columns);
  return section;
}

// One line of the log: in the current generation it can be forgotten (after asking) or corrected.
const PRIORITY_TITLE = { high: "high priority", medium: "medium priority", low: "low priority", done: "done" };

function lineRow(threadId, line, current) {
  // The priority as a word and a colour: the emoji marker needs a font many machines lack.
  const words = line.priority || line.time
    ? [" ".repeat(line.indent),
      line.priority ? el("span", { class: `priority ${line.priority}`, title: PRIORITY_TITLE[line.priority], text: line.priority }) : null,
      line.time ? el("span", { class: "time", text: line.time }) : null, line.body]
    : [line.text || " "];
  const row = el("div", {
    class: line.user_stated ? "line user-stated" : "line", "data-line": line.id, "data-priority": line.priority,
    title: line.user_stated ? "stated by the user: kept word for word" : null,
  }, el("pre", {}, ...words));
  if (!current || !line.id) return row;
  const actions = el("span", { class: "actions" },
    el("button", { class: "edit", onclick: () => editLine(threadId, line, row) }, "Edit"),
    el("button", { class: "danger forget-line", onclick: () => askForgetLine(threadId, line, row) }, "Forget…"));
  row.append(actions);
  return row;
}

function askForgetLine(threadId, line, row) {
  row.querySelector(".confirm")?.remove();
  row.append(el("div", { class: "confirm" },
    el("p", { text: "Forget this line? It leaves this log and every earlier generation that holds it; it cannot be undone." }),
    el("button", { onclick: (e) => e.target.closest(".confirm").remove() }, "Cancel"), " ",
    el("button", { class: "danger solid forget-line-confirm", onclick: () => changeLine(threadId, line.id, { method: "DELETE" }) }, "Forget this line")));
}

function editLine(threadId, line, row) {
  row.querySelector(".editor")?.remove();
  // Only the words: a correction keeps the line's bullet, priority and time (`corrected` in the engine).
  const input = el("input", { type: "text", class: "line-text", value: (line.body || line.text).trim(), "aria-label": "corrected line" });
  row.append(el("div", { class: "editor" }, input, " ",
    el("button", { onclick: (e) => e.target.closest(".editor").remove() }, "Cancel"), " ",
    el("button", { class: "solid save-line", onclick: () => changeLine(threadId, line.id, { method: "PUT", json: { text: input.value } }) }, "Save")));
  input.focus();
}

async function changeLine(threadId, lineId, options) {
  try {
    await api(`threads/${ids(threadId)}/observations/${ids(lineId)}`, options);
    await openThread(threadId, "memory");
    document.getElementById("main").prepend(el("p", { class: "notice", id: "changed",
      text: options.method === "DELETE" ? "Forgotten." : "Corrected: kept as stated by the user." }));
  } catch (error) { showError(error); }
}

async function restoreGeneration(threadId, generation) {
  try {
    const done = await api(`threads/${ids(threadId)}/restore`, { method: "POST", json: { generation } });
    await openThread(threadId, "memory");
    document.getElementById("main").prepend(el("p", { class: "notice", id: "changed",
      text: `Generation ${done.restored} is the active log again, as generation ${done.generation}. Nothing was deleted.` }));
  } catch (error) { showError(error); }
}

// -- events -----------------------------------------------------------------------------

function summary(e) {
  const p = e.payload, secs = p.duration_ms ? ` in ${(p.duration_ms / 1000).toFixed(1)} s` : "";
  const what = p.operation_type === "reflection" ? "reflected" : null;
  switch (e.type) {
    case "data-om-buffering-end": return `${what || "buffered"} ${fmt(p.tokens_buffered)} → ${fmt(p.buffered_tokens)} tokens${secs}`;
    case "data-om-observation-end": return `${what || "observed"} ${fmt(p.tokens_observed)} → ${fmt(p.observation_tokens)} tokens${secs}`;
    case "data-om-activation": return `activated ${fmt(p.tokens_activated)} message tokens as ${fmt(p.observation_tokens)} observation tokens (${p.triggered_by || "threshold"})`;
    case "data-om-thread-update": return `title: ${p.old_title ? `${p.old_title} → ` : ""}${p.new_title}`;
    case "data-om-forget": return `forgot (${p.selector}): ${fmt(p.messages || 0)} messages, ${fmt(p.lines || 0)} lines${p.earlier_lines ? `, ${fmt(p.earlier_lines)} earlier copies` : ""}`;
    case "data-om-edit": return "corrected a line (kept as stated by the user)";
    case "data-om-restore": return p.restored_lines ? `brought back ${fmt(p.restored_lines)} retired line(s)` : `restored generation ${p.restored_generation} as generation ${p.generation_count}`;
    case "data-om-remember": return "remembered a line word for word (stated by the user)";
    case "data-om-redaction": return `kept ${fmt(p.total)} secrets out: ${Object.entries(p.redactions || {}).map(([k, n]) => `${k} ${n}`).join(", ")}`;
    default:
      if (e.type.endsWith("-failed")) return `failed${secs}: ${p.error || "unknown error"}`;
      if (e.type.endsWith("-skipped")) return `skipped${secs}, its result not kept: ${p.discarded}`;
      if (e.type.endsWith("-start")) return `started on ${fmt(p.tokens_to_observe ?? p.tokens_to_buffer)} tokens`;
      return "";
  }
}

async function pollEvents() {
  const id = state.current;
  const page = await api(`threads/${ids(id)}/events?limit=500${state.lastEvent !== null ? `&after=${state.lastEvent}` : ""}`);
  if (id !== state.current) return;
  state.lastEvent = page.next_after;
  const fresh = page.events;
  if (!fresh.length) return;
  const list = document.getElementById("events");
  for (const e of fresh) {
    const kind = e.payload.operation_type === "reflection" ? "reflection" : e.type.includes("buffering") ? "buffering"
      : e.type.includes("activation") ? "activation" : "observation";
    const failed = e.type.endsWith("-failed");
    list.prepend(el("li", { "data-event": e.id }, el("time", { datetime: e.at, text: when(e.at) }),
      el("span", { class: `badge k-${kind}${failed ? " failed" : ""}`, text: e.type.replace("data-om-", "") }),
      el("span", { text: summary(e) })));
  }
  if (state.events.length) {  // new cycles since the page drew: redraw the numbers
    const [detail, series] = await Promise.all([api(`threads/${ids(id)}`), api(`threads/${ids(id)}/series`)]);
    const events = document.getElementById("events"), messages = document.getElementById("messages-view");
    renderThread(detail, series);
    document.getElementById("events").replaceWith(events);
    document.getElementById("messages-view").replaceWith(messages);
  }
  state.events.push(...fresh);
}

// -- forgetting -------------------------------------------------------------------------

function askForget(d) {
  const slot = document.getElementById("confirm-slot");
  const t = d.thread;
  slot.replaceChildren(el("div", { class: "confirm", id: "confirm-forget" },
    el("p", { text: `Forget “${t.title || t.id}”? This deletes its ${fmt(t.messages)} messages, its observation log and its events. It cannot be undone.` }),
    el("button", { onclick: () => slot.replaceChildren() }, "Cancel"), " ",
    el("button", { class: "danger solid", id: "forget-confirm", onclick: () => forget(t) }, "Forget this thread")));
}

async function forget(t) {
  try {
    const done = await api(`threads/${ids(t.id)}`, { method: "DELETE" });
    clearInterval(state.poll);
    state.current = null;
    history.replaceState(null, "", "#");
    await renderSidebar();
    document.getElementById("main").replaceChildren(el("p", { class: "notice", id: "forgotten",
      text: `Forgot “${t.title || t.id}”: ${fmt(done.messages)} messages deleted.` }));
  } catch (error) { showError(error); }
}

start();
