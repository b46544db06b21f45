// Total Recall's web page. Plain JS: it talks to nothing but this server's /memory/* API, and
// puts every text it shows into the page as text (never as HTML).

const $ = (selector, root = document) => root.querySelector(selector);
const TOKEN_KEY = "totalrecall.token";
const NAMESPACE_KEY = "totalrecall.namespace";

// ---- the API ------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(message, status, data) {
    super(message);
    this.status = status;
    this.data = data;
  }
}

/** Calls /memory/<path> (relative to the page, so a proxy may serve both under a prefix). */
async function api(path, { method = "GET", body } = {}) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(new URL(`../memory/${path}`, location.href), {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const isJson = (response.headers.get("content-type") || "").includes("json");
  const data = isJson ? await response.json() : await response.text();
  if (response.status === 401) {
    askForToken(token ? "That token was refused." : "");
    throw new ApiError("the API needs its bearer token", 401, data);
  }
  if (!response.ok) {
    throw new ApiError((data && data.detail) || `HTTP ${response.status}`, response.status, data);
  }
  return data;
}

const namespace = () => $("#namespace").value.trim() || "default";
const query = (params) => new URLSearchParams(params).toString();

// ---- small DOM helpers --------------------------------------------------------------------

/** el("li", {class: "x", dataset: {id}}, "text", child) — children are text or nodes. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null && child !== false) node.append(child);
  }
  return node;
}

/** Replaces a node's children (absent ones, e.g. `cond ? node : null`, are left out). */
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function say(target, message, kind = "") {
  const node = typeof target === "string" ? $(target) : target;
  node.textContent = message;
  node.classList.remove("error", "ok");
  if (kind) node.classList.add(kind);
}

/** Runs an action; its failure is shown in `statusTarget` instead of being lost. */
async function guarded(statusTarget, action) {
  try {
    return await action();
  } catch (error) {
    say(statusTarget, error.status === 401 ? "Enter the API token above." : `Failed: ${error.message}`,
      "error");
    return undefined;
  }
}

const number = (v, digits = 3) => (typeof v === "number" ? v.toFixed(digits) : "–");
const signed = (v) => (v >= 0 ? "+" : "") + number(v);
const utcDay = (ts) => new Date(ts).toISOString().slice(0, 10);
const utcTime = (ts) => new Date(ts).toISOString().slice(11, 19) + "Z";
const when = (ts) => new Date(ts).toISOString().replace("T", " ").slice(0, 19) + " UTC";

// ---- token --------------------------------------------------------------------------------

function askForToken(reason) {
  const form = $("#token-form");
  form.hidden = false;
  say("#token-status", reason, "error");
  $("#token").focus();
}

function setupToken() {
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("#token").value);
    $("#token").value = "";
    $("#token-form").hidden = true;
    $("#token-clear").hidden = false;
    refresh();
  });
  $("#token-clear").hidden = !sessionStorage.getItem(TOKEN_KEY);
  $("#token-clear").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("#token-clear").hidden = true;
  });
}

// ---- views --------------------------------------------------------------------------------

let currentView = "search";

function show(view) {
  currentView = view;
  for (const button of document.querySelectorAll("nav button")) {
    if (button.dataset.view === view) button.setAttribute("aria-current", "page");
    else button.removeAttribute("aria-current");
  }
  for (const name of ["search", "timeline", "status"]) $(`#view-${name}`).hidden = name !== view;
  refresh();
}

function refresh() {
  if (currentView === "timeline") loadTimeline();
  else if (currentView === "status") loadStatus();
  else if ($("#query").value.trim()) search();
}

// ---- search -------------------------------------------------------------------------------

const COMPONENTS = [["vector", "vector"], ["bm25", "keyword"], ["recency", "recency"]];
const BOOSTS = {
  actor: "actor named", date: "date named", diagnostic: "diagnostic", named: "identifier named",
  neighbour: "neighbour of a hit", superseded: "superseded", repeat_order: "repeat order",
};

function scoreTable(scores = {}) {
  const rows = COMPONENTS.map(([key, label]) => el("tr", { dataset: { component: key } },
    el("th", {}, label),
    el("td", {}, el("meter", { min: 0, max: 1, value: scores[key] ?? 0 })),
    el("td", { class: "num" }, number(scores[key] ?? 0))));
  for (const [key, value] of Object.entries(scores)) {
    if (COMPONENTS.some(([name]) => name === key)) continue;
    rows.push(el("tr", { class: "boost", dataset: { component: key } },
      el("th", {}, BOOSTS[key] ?? key), el("td", {}, "boost"), el("td", { class: "num" }, signed(value))));
  }
  return el("table", { class: "scores" }, el("caption", {}, "score components"), el("tbody", {}, rows));
}

function hitItem(memory) {
  const { _scores: scores, ...metadata } = memory.metadata || {};
  const item = el("li", { class: "hit", dataset: { id: memory.id } },
    el("div", { class: "head" },
      el("span", { class: "score", title: "fused score" }, number(memory.score)),
      el("span", { class: "summary" }, memory.summary)),
    el("div", { class: "meta" },
      el("span", { class: `sev ${memory.severity}` }, memory.severity),
      ` ${memory.category}/${memory.subcategory} · tier ${memory.tier} · ${when(memory.timestamp)}`,
      memory.relative_time ? ` (${memory.relative_time})` : "", ` · ${memory.actor} · id `,
      el("code", {}, memory.id)),
    memory.detail ? el("details", {}, el("summary", {}, "detail"), el("pre", {}, memory.detail)) : null,
    scoreTable(scores),
    el("div", { class: "actions" },
      el("button", { type: "button", onclick: () => showSource(memory) }, "Markdown source"),
      el("button", { type: "button", onclick: () => editMemory(memory, metadata, item) }, "Edit"),
      el("button", { type: "button", class: "danger", onclick: () => forgetHit(memory, item) },
        "Forget")));
  return item;
}

async function search(event) {
  event?.preventDefault();
  const text = $("#query").value.trim();
  if (!text) return;
  say("#search-status", "Searching…");
  await guarded("#search-status", async () => {
    const result = await api("recall", { method: "POST", body: {
      query: text, namespace: namespace(), timeframe: $("#timeframe").value,
      maxResults: Number($("#max-results").value) || 10,
    } });
    fill($("#results"), result.memories.map(hitItem));
    say("#search-status", `${result.memories.length} memories in ${number(result.took_ms, 1)} ms`
      + ` · query class: ${result.query_class}`);
  });
}

// ---- source, forget, edit -----------------------------------------------------------------

async function showSource(memory) {
  const dialog = $("#source-dialog");
  say($(".where", dialog), "Loading…");
  $("pre", dialog).textContent = "";
  dialog.showModal();
  await guarded($(".where", dialog), async () => {
    const source = await api(`source?${query({ id: memory.id, namespace: memory.namespace })}`);
    say($(".where", dialog), `${source.path}, lines ${source.startLine}–${source.endLine}`);
    $("pre", dialog).textContent = source.text;
  });
}

async function forget(memory) {
  return api("forget", { method: "POST", body: { ids: [memory.id], namespace: memory.namespace } });
}

async function forgetHit(memory, item) {
  if (!confirm(`Forget this memory?\n\n${memory.summary}\n\nIts text is removed from every store `
    + "and from the Markdown log (an audit line records the forgetting).")) return;
  await guarded("#search-status", async () => {
    const result = await forget(memory);
    if (result.forgotten) item.remove();
    say("#search-status", result.forgotten ? `Forgot ${memory.id}.`
      : `Nothing forgotten: ${memory.id} was not found.`, result.forgotten ? "ok" : "error");
  });
}

function editMemory(memory, metadata, item) {
  const dialog = $("#edit-dialog");
  const status = $(".status", dialog);
  $("#edit-summary").value = memory.summary;
  $("#edit-detail").value = memory.detail || "";
  say(status, "");
  // The stored metadata without what the API adds (keys starting with "_") and without the tags,
  // which are sent once, as tags.
  const kept = Object.fromEntries(Object.entries(metadata)
    .filter(([key]) => !key.startsWith("_") && key !== "tags"));
  $("#edit-save").onclick = () => guarded(status, async () => {
    const summary = $("#edit-summary").value.trim();
    if (!summary) throw new Error("the summary may not be empty");
    const stored = await api("store", { method: "POST", body: {
      summary, detail: $("#edit-detail").value, category: memory.category,
      subcategory: memory.subcategory, namespace: memory.namespace, actor: memory.actor,
      timestamp: memory.timestamp, tags: memory.tags, source: "ui",
      metadata: { ...kept, severity: memory.severity, edited_from: memory.id },
    } });
    await forget(memory);
    dialog.close();
    item.remove();
    say("#search-status", `Stored the corrected text as ${stored.ids[0]} (searchable once `
      + `indexed) and forgot ${memory.id}.`, "ok");
  });
  dialog.showModal();
}

// ---- timeline -----------------------------------------------------------------------------

/** {day: {category: [memory]}} with the newest day first (the API answers oldest first). */
function byDayAndCategory(memories) {
  const days = new Map();
  for (const memory of [...memories].reverse()) {
    const day = utcDay(memory.timestamp);
    if (!days.has(day)) days.set(day, new Map());
    const categories = days.get(day);
    if (!categories.has(memory.category)) categories.set(memory.category, []);
    categories.get(memory.category).push(memory);
  }
  return days;
}

async function loadTimeline(event) {
  event?.preventDefault();
  say("#timeline-status", "Loading…");
  await guarded("#timeline-status", async () => {
    const body = { hours: Number($("#tl-hours").value), namespace: namespace(), limit: 2000 };
    const category = $("#tl-category").value.trim();
    if (category) body.category = category;
    const { memories } = await api("timeline", { method: "POST", body });
    const days = [...byDayAndCategory(memories)].map(([day, categories]) => {
      const count = [...categories.values()].reduce((n, list) => n + list.length, 0);
      return el("section", { class: "day", dataset: { day } },
        el("h3", {}, `${day} `, el("small", {}, `${count} memories (UTC day)`)),
        [...categories].sort(([a], [b]) => a.localeCompare(b)).map(([name, list]) =>
          el("details", { class: "category", dataset: { category: name }, open: true },
            el("summary", {}, `${name} `, el("span", { class: "count" }, String(list.length))),
            el("ul", {}, list.map((memory) => el("li", { dataset: { id: memory.id } },
              el("time", { datetime: memory.timestamp }, utcTime(memory.timestamp)), " ",
              el("span", { class: `sev ${memory.severity}` }, memory.severity), " ",
              el("button", { type: "button", class: "link", onclick: () => showSource(memory) },
                memory.summary)))))));
    });
    fill($("#timeline"), days);
    say("#timeline-status", `${memories.length} memories on ${days.length} days`
      + (memories.length >= body.limit ? ` (the newest ${body.limit} only)` : ""));
  });
}

// ---- status: health, stats, alerts --------------------------------------------------------

function table(headings, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, headings.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((row) => el("tr", {}, row.map((cell) => el("td", {}, cell))))));
}

function renderHealth(health) {
  const checks = Object.entries(health.checks || {});
  const degraded = checks.filter(([, check]) => !check.ok);
  fill($("#health .body"),
    el("p", {}, "Status: ", el("strong", { class: `state ${health.status}` }, health.status)),
    checks.length ? table(["part", "state", "why"], checks.map(([part, check]) =>
      [part, check.ok ? "ok" : "not ok", check.error || ""])) : el("p", {}, "(details need the token)"),
    degraded.length ? el("p", { class: "error" }, "Degraded: ", degraded.map(([p]) => p).join(", ")) : null);
}

function renderStats(stats) {
  const index = stats.index || {};
  const tiers = ["hot", "warm", "cold"];
  const pending = stats.pending || {};
  const problems = [];
  if (index.error) problems.push(`indexer: ${index.error}`);
  for (const [tier, why] of Object.entries(index.writes_held || {})) problems.push(`${tier} writes held: ${JSON.stringify(why)}`);
  for (const [tier, state] of Object.entries(index.reindex || {})) problems.push(`${tier} being refilled: ${state.reason}`);
  fill($("#stats .body"),
    el("p", {}, el("strong", {}, String(stats.total ?? 0)), ` memories in namespace ${stats.namespace}`,
      stats.oldest ? ` · ${when(stats.oldest)} to ${when(stats.newest)}` : ""),
    el("h3", {}, "Tiers"),
    table(["tier", "memories (this namespace)", "vectors (all namespaces)"], tiers.map((tier) => [
      tier, String(stats.by_tier?.[tier] ?? 0), String(index.docs?.[tier] ?? "–")])),
    el("h3", {}, "Pipeline lag"),
    table(["stage", "events waiting (all namespaces)"], Object.entries(pending).map(([stage, n]) =>
      [stage, n === null ? "unknown" : String(n)])),
    el("p", {}, `model ${index.model ?? "–"} · ${index.markdown_days ?? "–"} daily logs · `
      + `last compaction ${index.last_compaction ? JSON.stringify(index.last_compaction) : "never"}`),
    problems.length ? el("ul", { class: "error" }, problems.map((p) => el("li", {}, p))) : null,
    el("h3", {}, "By category"),
    table(["category", "memories"], Object.entries(stats.by_category || {})
      .sort(([, a], [, b]) => b - a).map(([name, n]) => [name, String(n)])));
}

function renderAlerts(alerts) {
  const list = Array.isArray(alerts) ? alerts : alerts.alerts || [];
  fill($("#alerts .body"), list.length
    ? el("ul", {}, list.map((a) => el("li", { class: `sev ${a.severity || ""}` },
      `${a.severity || "alert"}: ${a.text || a.summary || JSON.stringify(a)}`,
      a.count > 1 ? ` (${a.count}×, ` : " (", `last ${when(a.last_seen || a.timestamp)})`)))
    : el("p", {}, "No open alerts."));
}

async function loadStatus() {
  say("#status-status", "Loading…");
  const ns = query({ namespace: namespace() });
  const [health, stats, alerts] = await Promise.allSettled(
    [api("health"), api(`stats?${ns}`), api(`alerts?${ns}`)]);
  // A 503 from /memory/health still says which part is down.
  const healthBody = health.status === "fulfilled" ? health.value : health.reason.data;
  if (healthBody && healthBody.status) renderHealth(healthBody);
  else fill($("#health .body"), el("p", { class: "error" }, `Unreachable: ${health.reason}`));
  if (stats.status === "fulfilled") renderStats(stats.value);
  else fill($("#stats .body"), el("p", { class: "error" }, stats.reason.message));
  if (alerts.status === "fulfilled") renderAlerts(alerts.value);
  else if (alerts.reason.status === 404) {
    fill($("#alerts .body"), el("p", { class: "muted" }, "No alert source yet."));
  } else fill($("#alerts .body"), el("p", { class: "error" }, alerts.reason.message));
  const refused = [health, stats, alerts].some((r) => r.status === "rejected" && r.reason.status === 401);
  say("#status-status", refused ? "Enter the API token above." : `Updated ${when(Date.now())}`,
    refused ? "error" : "");
}

// ---- start --------------------------------------------------------------------------------

function start() {
  setupToken();
  const ns = $("#namespace");
  ns.value = sessionStorage.getItem(NAMESPACE_KEY) || "default";
  ns.addEventListener("change", () => {
    if (!ns.checkValidity()) return;
    sessionStorage.setItem(NAMESPACE_KEY, namespace());
    refresh();
  });
  for (const button of document.querySelectorAll("nav button")) {
    button.addEventListener("click", () => show(button.dataset.view));
  }
  $("#search-form").addEventListener("submit", search);
  $("#timeline-form").addEventListener("submit", loadTimeline);
  for (const button of document.querySelectorAll("dialog .close")) {
    button.addEventListener("click", () => button.closest("dialog").close());
  }
  // Asks for the token at once when the API needs one (the page itself holds no data).
  api(`stats?${query({ namespace: namespace() })}`).catch(() => {});
  document.body.dataset.ready = "true";
}

start();
