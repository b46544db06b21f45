// OpenClaw's built-in memory search (memory-core) behind the JSON-lines protocol of
// bench/peers/adapter.py. Run with OpenClaw's Node from its own install:
//   OPENCLAW_DIR=<dir with node_modules/openclaw> PEERS_STATE=<tmp> node openclaw_adapter.mjs
//
// Each namespace is one OpenClaw agent with its own workspace: the memories go, as OpenClaw keeps
// them, into that workspace's daily Markdown (memory/YYYY-MM-DD.md, one "- HH:MM text" line per
// memory). The index and the search are memory-core's own (getMemorySearchManager, as
// `openclaw memory search` runs it): its chunking, FTS5, hybrid ranking and MMR, untouched. A
// result is a chunk (path + lines); it is mapped back to the memories on those lines, in order.
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const root = path.join(process.env.OPENCLAW_DIR, "node_modules", "openclaw");
const state = process.env.PEERS_STATE;
const provider = process.env.OPENCLAW_MEMORY_PROVIDER || "none";
const configPath = path.join(state, "openclaw.json");
const undated = process.env.OPENCLAW_UNDATED === "1";
process.env.OPENCLAW_STATE_DIR = path.join(state, "state");
process.env.OPENCLAW_CONFIG_PATH = configPath;
process.env.HOME = state;

const agents = new Map(); // ns -> {id, workspace, lines: Map(relpath -> [memory id per line]), manager}
const log = (...a) => process.stderr.write(a.join(" ") + "\n");

function agentId(ns) {
  return "a" + ns.toLowerCase().replace(/[^a-z0-9-]+/g, "-").slice(0, 60);
}

function writeConfig() {
  const list = [...agents.values()].map((a) => ({ id: a.id, workspace: a.workspace }));
  const search = { provider };
  if (process.env.OPENCLAW_MEMORY_BASEURL) {
    search.remote = { baseUrl: process.env.OPENCLAW_MEMORY_BASEURL, apiKey: "local" };
    search.model = process.env.OPENCLAW_MEMORY_MODEL || "all-MiniLM-L6-v2";
  }
  // Several agents: OpenClaw wants their ownership explicit.
  const cfg = { agents: { ownership: "explicit", list }, memory: { search } };
  fs.writeFileSync(configPath, JSON.stringify(cfg, null, 2));
  return cfg;
}

let mods = null;
async function load() {
  if (mods) return mods;
  const core = await import(pathToFileURL(path.join(root, "dist/extensions/memory-core/runtime-api.js")));
  const conf = await import(pathToFileURL(path.join(root, "dist/plugin-sdk/config-runtime.js")));
  const store = await import(pathToFileURL(path.join(root, "dist/plugin-sdk/plugin-state-store-runtime.js")));
  // What the Gateway's plugin loader hands memory-core at registration (its keyed SQLite state).
  core.configureMemoryCoreDreamingState((options) => store.createPluginStateKeyedStore("memory-core", options));
  mods = { core, conf };
  return mods;
}

function agentFor(ns) {
  let a = agents.get(ns);
  if (!a) {
    const id = agentId(ns);
    const workspace = path.join(state, "ws", id);
    fs.mkdirSync(path.join(workspace, "memory"), { recursive: true });
    a = { id, workspace, lines: new Map(), manager: null };
    agents.set(ns, a);
    writeConfig();
  }
  return a;
}

function add(ns, docs) {
  const a = agentFor(ns);
  const byFile = new Map();
  for (const d of docs) {
    const day = d.ts.slice(0, 10);
    const hhmm = d.ts.slice(11, 16);
    // OPENCLAW_UNDATED=1 (a variant, not the default): one undated file, which memory-core does
    // not decay (it gives dated daily notes a fixed 30-day recency half-life).
    const rel = undated ? "memory/notes.md" : `memory/${day}.md`;
    const stamp = undated ? `${day} ${hhmm}` : hhmm;
    if (!byFile.has(rel)) byFile.set(rel, []);
    // One memory, one line: newlines inside a text would split it over several.
    byFile.get(rel).push([d.id, `- ${stamp} ${d.text.replace(/\s*\n\s*/g, " ")}`]);
  }
  for (const [rel, entries] of byFile) {
    const file = path.join(a.workspace, rel);
    let ids = a.lines.get(rel);
    let text = "";
    if (!ids) {
      ids = [null, null]; // "# day" and a blank line
      text = `# ${undated ? "Notes" : rel.slice(7, 17)}\n\n`;
      a.lines.set(rel, ids);
    }
    for (const [id, line] of entries) {
      ids.push(id);
      text += line + "\n";
    }
    fs.appendFileSync(file, text);
  }
  return { added: docs.length };
}

async function manager(a) {
  if (a.manager) return a.manager;
  const { core, conf } = await load();
  const cfg = conf.getRuntimeConfig({ skipPluginValidation: true });
  // "default": the long-lived manager the Gateway's memory_search uses (file watcher, sync on
  // search); "cli" would be a one-shot manager that never sees a file change.
  const res = await core.getMemorySearchManager({ cfg, agentId: a.id, purpose: "default" });
  const m = res && res.manager ? res.manager : res;
  if (!m || typeof m.search !== "function") throw new Error(`no memory manager: ${JSON.stringify(res?.error ?? res)}`);
  a.manager = m;
  return m;
}

async function flush() {
  for (const a of agents.values()) {
    const m = await manager(a);
    await m.sync({ reason: "bench", force: false });
  }
  return {};
}

function idsOf(a, results, k) {
  const out = [];
  for (const r of results) {
    const ids = a.lines.get(r.path) || [];
    for (let line = r.startLine; line <= r.endLine && out.length < k; line++) {
      const id = ids[line - 1];
      if (id && !out.includes(id)) out.push(id);
    }
    if (out.length >= k) break;
  }
  return out;
}

async function search(ns, query, k) {
  const a = agents.get(ns);
  if (!a) return { ids: [], ms: 0 };
  const m = await manager(a);
  const t0 = performance.now();
  const results = await m.search(query, { maxResults: k });
  const ms = performance.now() - t0;
  return { ids: idsOf(a, results, k), ms, chunks: results.length };
}

async function info() {
  await load();
  const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
  return { config: { openclaw: pkg.version, node: process.version, provider,
                     files: undated ? "one undated memory/notes.md (variant)" : "daily memory/YYYY-MM-DD.md",
                     remote: process.env.OPENCLAW_MEMORY_BASEURL || null } };
}

async function status(ns) {
  const a = agents.get(ns);
  if (!a) return {};
  const m = await manager(a);
  return { status: m.status() };
}

const rl = readline.createInterface({ input: process.stdin, terminal: false });
const reply = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
for await (const line of rl) {
  if (!line.trim()) continue;
  const req = JSON.parse(line);
  try {
    if (req.op === "quit") break;
    if (req.op === "info") reply(await info());
    else if (req.op === "add") reply(add(req.ns, req.docs));
    else if (req.op === "flush") reply(await flush());
    else if (req.op === "search") reply(await search(req.ns, req.query, req.k));
    else if (req.op === "status") reply(await status(req.ns));
    else reply({ error: `unknown op ${req.op}` });
  } catch (err) {
    log(err && err.stack ? err.stack : String(err));
    reply({ error: String(err && err.message ? err.message : err) });
  }
}
for (const a of agents.values()) {
  try { await a.manager?.close?.(); } catch (err) { log(String(err)); }
}
process.exit(0);
