// The lossless web page: pick a conversation, see its summary DAG, expand it down to the
// original messages, search it, and see what assemble would send under a budget.
// Plain JS against the REST API (/v1/lossless/...); no build step.
"use strict";

const API = "/v1/lossless";
const state = { conversation: null, dag: null, byId: new Map(), selected: null };
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

function key() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("key");
  if (fromHash) localStorage.setItem("lossless.key", fromHash);
  return localStorage.getItem("lossless.key") || "";
}

async function api(path, body) {
  const headers = { "content-type": "application/json" };
  const k = key();
  if (k) headers.authorization = `Bearer ${k}`;
  const res = await fetch(API + path, body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error ? `${data.error.type}: ${data.error.message}` : `HTTP ${res.status}`);
  return data;
}

function status(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "status error" : "status";
}

const enc = encodeURIComponent;
const span = (n) => (n.first_seq === n.last_seq ? `#${n.first_seq}` : `#${n.first_seq}–#${n.last_seq}`);

async function loadConversations() {
  const data = await api("/conversations?limit=1000");
  const select = $("conversation");
  select.replaceChildren(...data.data.map((c) => el("option", { value: c.id }, `${c.id} (${c.messages} msgs)`)));
  const wanted = new URLSearchParams(location.search).get("conversation");
  const pick = data.data.find((c) => c.id === wanted) || data.data[0];
  if (!pick) { status("no conversations yet"); return; }
  select.value = pick.id;
  await loadConversation(pick.id);
}

async function loadConversation(id) {
  state.conversation = id;
  status(`loading ${id}…`);
  const dag = await api(`/conversations/${enc(id)}/dag`);
  state.dag = dag;
  state.byId = new Map(dag.summaries.map((s) => [s.id, s]));
  $("conv-info").textContent = `${dag.messages} messages · ${dag.summaries.length} summaries · ${dag.max_depth + 1} levels`;
  renderOverview(dag);
  renderTree(dag);
  status(`${id}: ${dag.frontier.length} frontier summaries, raw tail ${dag.tail.count} messages`);
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
  const node = el("div", { class: "node", "data-id": s.id },
    el("div", { class: "row", onclick: guard(() => Promise.all([select(s.id), expand(s, children, toggle)])) },
      toggle, el("span", { class: "sid" }, s.id),
      el("span", { class: "span" }, `${s.type === "root" ? "root " : ""}d${s.depth} ${span(s)} · ${s.tokens} tok`),
      el("span", { class: "preview" }, s.preview)),
    children);
  return node;
}

function renderTree(dag) {
  const roots = [...(dag.root ? [dag.root] : []), ...dag.frontier].map((id) => state.byId.get(id)).filter(Boolean);
  const tail = el("div", { class: "node tail" }, el("div", { class: "row" }, el("span", { class: "toggle" }, "·"),
    el("span", { class: "span" }, `raw tail ${dag.tail.count ? span(dag.tail) : "(empty)"} · ${dag.tail.count} messages`)));
  $("tree").replaceChildren(...roots.map(nodeRow), tail);
}

async function expand(s, box, toggle) {
  if (!box.hidden) { box.hidden = true; toggle.textContent = "▸"; return; }
  box.hidden = false;
  toggle.textContent = "▾";
  if (box.dataset.filled) return;
  box.dataset.filled = "1";
  if (s.child_kind === "summary") {
    box.replaceChildren(...s.children.map((id) => state.byId.get(id)).filter(Boolean).map(nodeRow));
    return;
  }
  const out = await api(`/conversations/${enc(state.conversation)}/tools/lcm_expand`, { id: s.id, max_tokens: 100000 });
  box.replaceChildren(...out.items.map((m) => el("div", { class: `msg role-${m.role}`, "data-id": m.id },
    el("div", { class: "head" }, `${m.header || `#${m.seq} ${m.role}`} ${m.id}`),
    typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? m.tool_calls))));
}

async function select(id) {
  state.selected = id;
  document.querySelectorAll(".block.selected").forEach((b) => b.classList.remove("selected"));
  document.querySelectorAll(`.block[data-id="${id}"]`).forEach((b) => b.classList.add("selected"));
  const d = await api(`/conversations/${enc(state.conversation)}/nodes/${enc(id)}`);
  const facts = [["id", d.id], ["depth", d.depth ?? "message"], ["covers", span(d)], ["time", `${d.earliest_at || d.created_at} → ${d.latest_at || ""}`],
    ["tokens", `${d.tokens} (sources ${d.source_tokens ?? "—"})`], ["summarizer", d.summarizer ?? "—"], ["parent", d.parent ?? "—"]];
  const children = (d.children || []).map((c) => el("li", {}, `${c.id} ${c.kind === "summary" ? `d${c.depth} ${span(c)}` : `#${c.seq} ${c.role}`}`));
  $("detail").replaceChildren(el("h2", {}, `Selected ${d.id}`),
    el("dl", {}, ...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))])),
    el("pre", { id: "detail-content" }, d.content ?? d.preview ?? ""),
    el("p", { class: "muted" }, `${(d.children || []).length} direct sources`), el("ol", { id: "detail-children" }, ...children));
  document.body.dataset.selected = id;
}

async function search(ev) {
  ev.preventDefault();
  const out = await api(`/conversations/${enc(state.conversation)}/search`,
    { query: $("search-query").value, mode: $("search-mode").value, limit: 20 });
  $("search-results").replaceChildren(...out.hits.map((h) => el("li", { "data-id": h.id },
    el("a", { href: "#", onclick: guard((e) => { e.preventDefault(); return h.kind === "summary" ? select(h.id) : null; }) }, `${h.id}`),
    ` ${h.kind} ${span(h)} `, el("span", { class: "snippet" }, h.snippet))));
  status(`${out.count} hits for “${out.query}”`);
}

async function assemble(ev) {
  ev.preventDefault();
  const body = { budget_tokens: Number($("budget").value) };
  if ($("assemble-query").value.trim()) body.query = $("assemble-query").value.trim();
  const out = await api(`/conversations/${enc(state.conversation)}/assemble`, body);
  const tiers = Object.entries(out.tiers);
  $("tiers").replaceChildren(...tiers.map(([tier, n]) => el("div", {
    style: `flex:${n};background:${TIER_COLORS[tier] || "#555"}`, title: `${tier}: ${n} tokens` }, `${tier} ${n}`)));
  $("assembled").replaceChildren(...out.messages.map((m) => el("li", {},
    el("span", { class: "role" }, `${m.role}: `), typeof m.content === "string" ? m.content : JSON.stringify(m.content))));
  status(`assembled ${out.tokens} / ${out.budget_tokens} tokens in ${out.messages.length} messages`);
  document.body.dataset.assembled = String(out.tokens);
}

function guard(fn) {
  return (...args) => Promise.resolve(fn(...args)).catch((err) => status(String(err.message || err), true));
}

$("conversation").addEventListener("change", guard((e) => loadConversation(e.target.value)));
$("search-form").addEventListener("submit", guard(search));
$("assemble-form").addEventListener("submit", guard(assemble));
$("key").value = key();
$("key").addEventListener("change", guard((e) => { localStorage.setItem("lossless.key", e.target.value.trim()); return loadConversations(); }));
guard(loadConversations)();
