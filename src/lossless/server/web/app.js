// The lossless web page: pick a conversation, see its summary DAG, expand it down to the
// original messages, search it, and see what assemble would send under a budget.
// Plain JS against the REST API (/v1/lossless/...); no build step.
// Everything stored is untrusted text: the DOM is built with text nodes only, never HTML
// (the server's Content-Security-Policy enforces it with Trusted Types).
"use strict";

const API = "/v1/lossless";
const KEY_ITEM = "lossless.key";
const EXPAND_TOKENS = 20000; // one request's worth: a leaf's messages, or a slice of one large message
const state = { conversation: null, dag: null, byId: new Map(), selected: null, key: "", listed: 0 };
const $ = (id) => document.getElementById(id);
const TIER_COLORS = { pinned: "#7a4fd6", fresh_tail: "#2f6fdf", summary: "#1f9d55", root: "#0b7a75",
                      recall: "#c77700", memory: "#b3261e", omitted: "#6b7385" };

function depthColor(depth, maxDepth) {
  const hue = 150 - (maxDepth > 0 ? (depth / maxDepth) * 120 : 0);
  return `hsl(${hue}, 55%, ${42 - Math.min(depth, 4) * 2}%)`;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "style") node.style.cssText = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

// Stored text may hold bidi controls (U+202E turns what follows it around): where it is
// joined into one line with the page's own words, isolate it (FSI … PDI, or <bdi>).
const iso = (text) => `\u2068${text}\u2069`;
const bdi = (text, cls) => el("bdi", cls ? { class: cls } : {}, text);

// -- the API key ----------------------------------------------------------------------
// Typed into the field, or given by a link's #key=… (read once, then taken out of the
// address bar). Kept for this tab only (sessionStorage), never in localStorage, which
// stays on disk after the browser closes.

function takeKey() {
  const legacy = localStorage.getItem(KEY_ITEM); // written by earlier versions of this page
  if (legacy !== null) {
    localStorage.removeItem(KEY_ITEM);
    if (legacy && !sessionStorage.getItem(KEY_ITEM)) sessionStorage.setItem(KEY_ITEM, legacy);
  }
  const params = new URLSearchParams(location.hash.slice(1));
  if (params.has("key")) {
    const given = params.get("key").trim();
    params.delete("key");
    const rest = params.toString();
    history.replaceState(history.state, "", `${location.pathname}${location.search}${rest ? `#${rest}` : ""}`);
    keepKey(given);
  }
  state.key = sessionStorage.getItem(KEY_ITEM) || "";
  $("key").value = state.key;
}

// Another key: the conversation open under the previous one (another tenant's, maybe) is
// no longer asked for; one a link named that no key could open yet still is.
function keyChanged() {
  if (state.conversation) {
    const url = new URL(location.href);
    url.searchParams.delete("conversation");
    history.replaceState(history.state, "", url);
  }
  return loadConversations();
}

function keepKey(value) {
  if (value) sessionStorage.setItem(KEY_ITEM, value);
  else sessionStorage.removeItem(KEY_ITEM);
  state.key = value;
}

// -- talking to the server --------------------------------------------------------------

async function api(path, body) {
  const headers = { "content-type": "application/json" };
  if (state.key) {
    if (!/^[\x21-\x7e]+$/.test(state.key)) {
      throw keyError("the API key field holds a space or a character no key has: paste the key (lsk_…) again");
    }
    headers.authorization = `Bearer ${state.key}`;
  }
  let res;
  try {
    res = await fetch(API + path, body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) });
  } catch {
    throw new Error(`the server at ${location.origin} did not answer: is lossless serve still running?`);
  }
  const data = await res.json().catch(() => null);
  if (res.ok && data !== null) return data;
  const said = data?.error?.message || `HTTP ${res.status} ${res.statusText}`.trim();
  if (res.status === 401) {
    throw keyError(state.key ? `the API key was refused (${said}): check it in the API key field`
                             : "this server needs an API key: paste yours (lsk_…) in the API key field");
  }
  throw new Error(data?.error ? `${data.error.type}: ${said}` : said);
}

function keyError(message) {
  const err = new Error(message);
  err.key = true;
  return err;
}

function status(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "status error" : "status";
}

function guard(fn) {
  return (...args) => Promise.resolve(fn(...args)).catch((err) => {
    status(String(err.message || err), true);
    if (err.key) { $("key").setAttribute("aria-invalid", "true"); $("key").focus(); }
  });
}

function current() {
  if (!state.conversation) {
    throw new Error(state.listed ? "no conversation is open: pick one first" : "there is no conversation to search or assemble yet");
  }
  return enc(state.conversation);
}

// -- words for numbers and times ----------------------------------------------------------

const enc = encodeURIComponent;
const span = (n) => (n.first_seq === n.last_seq ? `#${n.first_seq}` : `#${n.first_seq}–#${n.last_seq}`);
const pad = (n) => String(n).padStart(2, "0");

// A stored time in the reader's own time zone, which it names (UTC+8); the exact stored
// value is the tooltip.
function when(value) {
  const t = new Date(value);
  if (!value || Number.isNaN(t.getTime())) return String(value ?? "—");
  const offset = -t.getTimezoneOffset();
  const zone = offset === 0 ? "UTC" : `UTC${offset < 0 ? "-" : "+"}${Math.floor(Math.abs(offset) / 60)}${offset % 60 ? `:${pad(Math.abs(offset) % 60)}` : ""}`;
  return `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ${pad(t.getHours())}:${pad(t.getMinutes())} ${zone}`;
}

const time = (value) => el("time", { datetime: String(value ?? ""), title: String(value ?? "") }, when(value));

function timeSpan(first, last) {
  return !last || when(first) === when(last) ? time(first) : el("span", {}, time(first), " → ", time(last));
}

// -- conversations ------------------------------------------------------------------------

function clearView() {
  state.conversation = null;
  state.dag = null;
  state.byId = new Map();
  delete document.body.dataset.loaded;
  for (const id of ["overview", "tree", "search-results", "tiers", "assembled", "conv-info"]) $(id).replaceChildren();
  $("detail").replaceChildren(el("p", { class: "muted" }, "Pick a summary."));
}

async function loadConversations() {
  clearView();
  $("conversation").replaceChildren(); // another key's list must not stay on screen
  state.listed = 0;
  status("loading conversations…");
  const data = await api("/conversations?limit=1000");
  $("key").removeAttribute("aria-invalid");
  state.listed = data.data.length;
  const select = $("conversation");
  const none = el("option", { value: "" }, data.data.length ? "— pick a conversation —" : "no conversations yet");
  const options = data.data.map((c) => el("option", { value: c.id }, `${iso(c.id)} (${c.messages} msgs)`));
  select.replaceChildren(none, ...options);
  const wanted = new URLSearchParams(location.search).get("conversation");
  if (!data.data.length && wanted === null) {
    $("tree").replaceChildren(el("p", { class: "empty" }, "No conversations yet. Store messages with ",
      el("code", {}, "POST /v1/lossless/conversations/{id}/messages"), ", through the context proxy, or with ",
      el("code", {}, "lossless import"), ", then reload this page."));
    status("no conversations yet");
    return;
  }
  const pick = wanted ?? data.data[0].id;
  if (data.data.some((c) => c.id === pick)) {
    select.value = pick;
    await loadConversation(pick);
    return;
  }
  // not in the list (older than its first 1000, or not there at all: then the server says so)
  const extra = el("option", { value: pick }, iso(pick));
  none.after(extra);
  select.value = pick;
  try {
    await loadConversation(pick);
  } catch (err) {
    extra.remove();
    select.value = "";
    throw err;
  }
}

async function loadConversation(id) {
  clearView();
  status(`loading ${iso(id)}…`);
  const dag = await api(`/conversations/${enc(id)}/dag`);
  state.conversation = id;
  state.dag = dag;
  state.byId = new Map(dag.summaries.map((s) => [s.id, s]));
  $("conv-info").textContent = `${dag.messages} messages · ${dag.summaries.length} summaries · ${dag.max_depth + 1} levels`;
  renderOverview(dag);
  renderTree(dag);
  const url = new URL(location.href);
  url.searchParams.set("conversation", id); // a reload, or the address sent to a colleague, opens it again
  history.replaceState(history.state, "", url);
  status(`${iso(id)}: ${dag.frontier.length} frontier summaries, raw tail ${dag.tail.count} messages`);
  document.body.dataset.loaded = id;
}

function renderOverview(dag) {
  const total = Math.max(dag.messages, 1);
  const rows = [];
  for (let depth = dag.max_depth; depth >= 0; depth--) {
    const lane = el("div", { class: "lane" });
    // of the whole-conversation roots, only the current one (the older ones it replaced stay stored)
    for (const s of dag.summaries.filter((x) => x.depth === depth && (x.type !== "root" || x.id === dag.root))) {
      const left = ((s.first_seq - 1) / total) * 100;
      const width = Math.max(((s.last_seq - s.first_seq + 1) / total) * 100, 0.6);
      lane.append(el("div", { class: "block", "data-id": s.id, title: `${s.id} ${span(s)}`,
        style: `left:${left}%;width:${width}%;background:${depthColor(depth, dag.max_depth)}`,
        onclick: guard(() => select(s.id)) }, span(s)));
    }
    if (depth === 0 && dag.tail.count > 0) {
      const left = ((dag.tail.first_seq - 1) / total) * 100;
      lane.append(el("div", { class: "block tail", title: `raw tail ${span(dag.tail)}`,
        style: `left:${left}%;width:${100 - left}%` }, "raw"));
    }
    rows.push(el("div", { class: "depth-row" }, el("span", { class: "label" }, `depth ${depth}`), lane));
  }
  $("overview").replaceChildren(...rows);
}

function nodeRow(s) {
  const children = el("div", { class: "children", hidden: "" });
  const toggle = el("span", { class: "toggle" }, "▸");
  return el("div", { class: "node", "data-id": s.id },
    el("div", { class: "row", onclick: guard(() => Promise.all([select(s.id), expand(s, children, toggle)])) },
      toggle, el("span", { class: "sid" }, s.id),
      el("span", { class: "span" }, `${s.type === "root" ? "root " : ""}d${s.depth} ${span(s)} · ${s.tokens} tok`),
      el("span", { class: "preview" }, s.preview)),
    children);
}

function renderTree(dag) {
  const roots = [...(dag.root ? [dag.root] : []), ...dag.frontier].map((id) => state.byId.get(id)).filter(Boolean);
  $("tree").replaceChildren(...roots.map(nodeRow), tailRow(dag.tail));
}

// The newest messages, not summarized yet: they open like a leaf, a page at a time.
function tailRow(tail) {
  const children = el("div", { class: "children", hidden: "" });
  const toggle = el("span", { class: "toggle" }, tail.count ? "▸" : "·");
  const open = tail.count ? { onclick: guard(() => opened(children, toggle, () => tailMessages(children, tail.first_seq - 1))) } : {};
  return el("div", { class: "node tail" }, el("div", { class: "row", ...open }, toggle,
    el("span", { class: "span" }, `raw tail ${tail.count ? span(tail) : "(empty)"} · ${tail.count} messages`)), children);
}

// -- original messages --------------------------------------------------------------------

const more = (label, load) => el("button", { type: "button", class: "more", onclick: guard(async (ev) => {
  ev.stopPropagation();
  ev.currentTarget.disabled = true;
  await load(ev.currentTarget);
}) }, label);

// A message's text; when only its first slice came (a very large message), a button reads
// the rest, a slice at a time.
function messageText(item) {
  const text = typeof item.content === "string" ? item.content : JSON.stringify(item.content);
  const box = el("div", { class: "text" }, text);
  if (item.tool_calls?.length) box.append(el("div", { class: "calls" }, JSON.stringify(item.tool_calls)));
  if (item.next_offset == null) return box;
  const shown = () => `${box.firstChild.length.toLocaleString("en")} of ${item.total_chars.toLocaleString("en")} characters shown`;
  const count = el("span", {}, shown());
  const readFrom = (offset) => more("show more", async (button) => {
    const out = await api(`/conversations/${current()}/tools/lcm_expand`, { id: item.id, offset, max_tokens: EXPAND_TOKENS });
    box.firstChild.appendData(out.content);
    count.textContent = shown();
    button.replaceWith(...(out.next_offset == null ? [] : [readFrom(out.next_offset)]));
  });
  return el("div", {}, box, el("div", { class: "partial muted" }, count, " ", readFrom(item.next_offset)));
}

function messageBox(m) {
  return el("div", { class: `msg role-${m.role}`, "data-id": m.id },
    el("div", { class: "head" }, `#${m.seq} `, time(m.created_at), ` ${m.role} `, m.name ? bdi(m.name, "name") : null,
      m.name ? " " : null, el("span", { class: "mid" }, m.id)),
    messageText(m));
}

// Open or close a row's box; the first time it opens, fill() fills it.
async function opened(box, toggle, fill) {
  if (!box.hidden) { box.hidden = true; toggle.textContent = "▸"; return; }
  box.hidden = false;
  toggle.textContent = "▾";
  if (box.dataset.filled) return;
  box.dataset.filled = "1";
  await fill();
}

function expand(s, box, toggle) {
  return opened(box, toggle, async () => {
    if (s.child_kind === "summary") box.replaceChildren(...s.children.map((id) => state.byId.get(id)).filter(Boolean).map(nodeRow));
    else await messagesOf(s, box);
  });
}

async function tailMessages(box, after) {
  const out = await api(`/conversations/${current()}/messages?after=${after}&limit=100`);
  box.append(...out.data.map(messageBox));
  if (out.next_after != null) {
    box.append(more(`show the messages after #${out.next_after}`, async (button) => {
      button.remove();
      await tailMessages(box, out.next_after);
    }));
  }
}

async function messagesOf(s, box, fromSeq) {
  const args = { id: s.id, max_tokens: EXPAND_TOKENS, ...(fromSeq ? { from_seq: fromSeq } : {}) };
  const out = await api(`/conversations/${current()}/tools/lcm_expand`, args);
  box.append(...out.items.map(messageBox));
  if (out.next_from_seq != null) {
    box.append(more(`show #${out.next_from_seq}–#${out.last_seq}`, async (button) => {
      button.remove();
      await messagesOf(s, box, out.next_from_seq);
    }));
  }
}

// -- the detail card ----------------------------------------------------------------------

function facts(rows) {
  return el("dl", {}, ...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v instanceof Node ? v : String(v))]));
}

async function select(id) {
  const conv = current();
  state.selected = id;
  document.querySelectorAll(".block.selected").forEach((b) => b.classList.remove("selected"));
  document.querySelectorAll(`.block[data-id="${CSS.escape(id)}"]`).forEach((b) => b.classList.add("selected"));
  const d = await api(`/conversations/${conv}/nodes/${enc(id)}`);
  if (d.kind === "message") {
    const text = await api(`/conversations/${conv}/tools/lcm_expand`, { id, max_tokens: EXPAND_TOKENS });
    $("detail").replaceChildren(el("h2", {}, `Message #${d.seq}`),
      facts([["id", d.id], ["role", d.role], ["name", d.name ? bdi(d.name) : "—"], ["time", time(d.created_at)],
             ["tokens", d.tokens], ["summarized in", d.summarized_in ?? "— (raw tail)"]]),
      el("div", { id: "detail-content", class: "msg" }, messageText({ ...text, id })));
  } else {
    const children = (d.children || []).map((c) => el("li", {}, `${c.id} ${c.kind === "summary" ? `d${c.depth} ${span(c)}` : `#${c.seq} ${c.role}`}`));
    $("detail").replaceChildren(el("h2", {}, `Selected ${d.id}`),
      facts([["id", d.id], ["depth", d.depth], ["covers", span(d)], ["time", timeSpan(d.earliest_at, d.latest_at)],
             ["tokens", `${d.tokens} (sources ${d.source_tokens ?? "—"})`], ["summarizer", d.summarizer ?? "—"],
             ["parent", d.parent ?? "—"]]),
      el("pre", { id: "detail-content" }, d.content ?? d.preview ?? ""),
      el("p", { class: "muted" }, `${(d.children || []).length} direct sources`), el("ol", { id: "detail-children" }, ...children));
  }
  document.body.dataset.selected = id;
}

// -- search and assemble --------------------------------------------------------------------

async function search(ev) {
  ev.preventDefault();
  const conv = current();
  const out = await api(`/conversations/${conv}/search`,
    { query: $("search-query").value, mode: $("search-mode").value, limit: 20 });
  const hits = out.hits.map((h) => el("li", { "data-id": h.id },
    el("a", { href: "#", onclick: guard((e) => { e.preventDefault(); return select(h.id); }) }, h.id),
    ` ${h.kind} ${span(h)} · `, time(h.created_at), " ", bdi(h.snippet, "snippet")));
  $("search-results").replaceChildren(...(hits.length ? hits
    : [el("li", { class: "empty muted" }, `No matches for “${iso(out.query)}”.`)]));
  status(`${out.count} hits for “${iso(out.query)}”`);
}

async function assemble(ev) {
  ev.preventDefault();
  const conv = current();
  const body = { budget_tokens: Number($("budget").value) };
  if ($("assemble-query").value.trim()) body.query = $("assemble-query").value.trim();
  const out = await api(`/conversations/${conv}/assemble`, body);
  const tiers = Object.entries(out.tiers);
  $("tiers").replaceChildren(...tiers.map(([tier, n]) => el("div", {
    style: `flex:${n};background:${TIER_COLORS[tier] || "#555"}`, title: `${tier}: ${n} tokens` }, `${tier} ${n}`)));
  $("assembled").replaceChildren(...out.messages.map((m) => el("li", {},
    el("span", { class: "role" }, `${m.role}: `), bdi(typeof m.content === "string" ? m.content : JSON.stringify(m.content)))));
  status(`assembled ${out.tokens} / ${out.budget_tokens} tokens in ${out.messages.length} messages`);
  document.body.dataset.assembled = String(out.tokens);
}

$("conversation").addEventListener("change", guard((e) => (e.target.value ? loadConversation(e.target.value) : null)));
$("search-form").addEventListener("submit", guard(search));
$("assemble-form").addEventListener("submit", guard(assemble));
$("key").addEventListener("change", guard((e) => { keepKey(e.target.value.trim()); return keyChanged(); }));
window.addEventListener("hashchange", guard(() => {
  if (!new URLSearchParams(location.hash.slice(1)).has("key")) return null;
  takeKey();
  return keyChanged();
}));
takeKey();
guard(loadConversations)();
