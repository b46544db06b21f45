/** A fake Total Recall recall API (node:http, in memory) and a fake OpenClaw plugin API. */

import http from "node:http";
import type { AddressInfo } from "node:net";

export interface Recorded {
  method: string;
  path: string;
  body: any;
  auth?: string;
}

export interface FakeApi {
  url: string;
  requests: Recorded[];
  memories: any[];
  /** Per-path override: return [status, body] or a delay. */
  override?: (req: Recorded) => { status?: number; body?: unknown; delayMs?: number } | undefined;
  close(): Promise<void>;
  bodies(path: string): any[];
}

export async function startFakeApi(): Promise<FakeApi> {
  const api = {
    url: "", requests: [] as Recorded[], memories: [] as any[],
    override: undefined as FakeApi["override"],
    bodies(path: string) { return this.requests.filter((r) => r.path === path).map((r) => r.body); },
  } as FakeApi;
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", async () => {
      const rec: Recorded = { method: req.method ?? "", path: req.url ?? "",
        body: raw ? JSON.parse(raw) : undefined, auth: req.headers.authorization };
      api.requests.push(rec);
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      const o = api.override?.(rec);
      if (o?.delayMs) await new Promise((r) => setTimeout(r, o.delayMs));
      if (o?.status) return send(o.status, o.body ?? {});
      const b = rec.body ?? {};
      switch (rec.path) {
        case "/memory/store":
        case "/memory/ingest": {
          const events = Array.isArray(b) ? b : [b];
          const ids = events.map((e: any) => {
            const m = { id: e.id ?? `m${api.memories.length + 1}`, score: 0.7,
              timestamp: new Date().toISOString(), category: e.category ?? "conversation",
              summary: e.summary, detail: e.detail ?? "", namespace: e.namespace ?? "default",
              relative_time: "just now" };
            api.memories.push(m);
            return m.id;
          });
          return send(200, { ids, accepted: ids.length });
        }
        case "/memory/recall": {
          const words = new Set(String(b.query).toLowerCase().split(/\W+/).filter((w) => w.length > 2));
          // the server's rule: `namespaces`, plus `namespace` when given; else `namespace`
          const scope: string[] = b.namespaces
            ? [...new Set([...(b.namespace ? [b.namespace] : []), ...b.namespaces])]
            : [b.namespace ?? "default"];
          const hits = api.memories.filter((m) => scope.includes(m.namespace)
            && String(m.summary + " " + m.detail).toLowerCase().split(/\W+/).some((w) => words.has(w)))
            .slice(0, b.maxResults ?? 6);
          const block = hits.length ? `<system_memory ns="${scope.join(",")}">\n`
            + hits.map((m) => `[${m.relative_time} | ${m.category}]\n${m.summary}`).join("\n\n")
            + "\n</system_memory>" : "";
          return send(200, { memories: hits, system_memory: block });
        }
        case "/memory/timeline":
          return send(200, { memories: api.memories.filter((m) => m.namespace === b.namespace) });
        case "/memory/file":
          return send(200, { path: b.path, text: b.path === "MEMORY.md" ? "a\nb\nc\nd" : "" });
        case "/memory/forget": {
          const ns = b.namespace ?? "default";
          const mine = new Set(api.memories.filter((m) => m.namespace === ns).map((m) => m.id));
          api.memories = api.memories.filter((m) => !(m.namespace === ns && b.ids.includes(m.id)));
          return send(200, { forgotten: b.ids.filter((i: string) => mine.has(i)).length,
            missing: b.ids.filter((i: string) => !mine.has(i)) });
        }
        case "/memory/warm":
          return send(200, { warmed: 3 });
        case "/memory/flush":
          return send(200, { stored: (b.messages ?? []).length });
        default:
          return send(404, { detail: "Not Found" });
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  api.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  api.close = () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); });
  return api;
}

export interface FakePluginApi {
  id: string;
  pluginConfig: Record<string, unknown>;
  logger: { info: (m: string) => void; warn: (m: string) => void; error: (m: string) => void;
            debug: (m: string) => void };
  logs: { level: string; message: string }[];
  hooks: Map<string, (event: any, ctx?: any) => Promise<any>>;
  toolFactories: { factory: (ctx: any) => any[]; opts: any }[];
  memoryCapability?: any;
  registerTool: (tool: any, opts?: any) => void;
  on: (name: string, handler: any) => void;
  registerMemoryCapability: (c: any) => void;
  tools(ctx?: any): Map<string, any>;
}

export function fakePluginApi(pluginConfig: Record<string, unknown>): FakePluginApi {
  const logs: { level: string; message: string }[] = [];
  const log = (level: string) => (message: string) => logs.push({ level, message });
  const api: FakePluginApi = {
    id: "totalrecall", pluginConfig, logs,
    logger: { info: log("info"), warn: log("warn"), error: log("error"), debug: log("debug") },
    hooks: new Map(), toolFactories: [],
    registerTool(tool, opts) { api.toolFactories.push({ factory: tool, opts }); },
    on(name, handler) { api.hooks.set(name, handler); },
    registerMemoryCapability(c) { api.memoryCapability = c; },
    tools(ctx = { agentId: "main" }) {
      const out = new Map<string, any>();
      for (const { factory } of api.toolFactories) for (const t of factory(ctx)) out.set(t.name, t);
      return out;
    },
  };
  return api;
}
