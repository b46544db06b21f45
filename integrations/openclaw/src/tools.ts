/**
 * The plugin's tools: `memory_recall`, `memory_store`, `memory_supersede`, `memory_timeline`,
 * `memory_search`, `memory_get`, `memory_forget`, `memory_alerts`, and the system-prompt guidance
 * for them (the memory slot). A tool whose API call fails throws a clear message the model can
 * read.
 */

import { TotalRecallUnavailableError, type Timeframe } from "./client.js";
import { describe, type PluginContext } from "./context.js";
import type {
  AgentToolLike,
  MemoryPromptSectionParams,
  PluginApiLike,
  ToolContextLike,
  ToolResult,
} from "./types.js";

export const TOOL_NAMES = [
  "memory_recall", "memory_store", "memory_timeline", "memory_search", "memory_get",
  "memory_forget",
  "memory_supersede",
  "memory_alerts",
] as const;
const TIMEFRAMES: Timeframe[] = ["auto", "1h", "24h", "7d", "30d", "90d", "all"];

function when(ts: string): string {
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : d.toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

function text(t: string, details: unknown = {}): ToolResult {
  return { content: [{ type: "text", text: t }], details };
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v.trim() ? v.trim() : undefined;
}

function int(v: unknown, fallback: number, min: number, max: number): number {
  const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : NaN;
  return Number.isFinite(n) ? Math.min(max, Math.max(min, Math.floor(n))) : fallback;
}

/** The tools, as the factory OpenClaw calls with each agent's context. */
export function toolFactory(plugin: PluginContext): (toolCtx?: ToolContextLike) => AgentToolLike[] {
  const { cfg, client, availability, own, readable, recallAll } = plugin;

  const fail = (what: string, err: unknown): never => {
    if (err instanceof TotalRecallUnavailableError) {
      availability.failed(what, err);
      throw new Error(`Total Recall is unreachable (${err.message}). Long-term memory is `
        + "unavailable right now; carry on without it.");
    }
    throw new Error(`Total Recall ${what} failed: ${describe(err)}`);
  };

  function tools(toolCtx: ToolContextLike = {}): AgentToolLike[] {
    const agentId = toolCtx.agentId;
    return [
      {
        name: "memory_recall",
        label: "Recall memory",
        description: "Search long-term OS memory (system events, diagnoses, errors, configs, "
          + "user preferences, stored notes) for context relevant to a query. Returns a "
          + "<system_memory> block with relative times.",
        parameters: {
          type: "object", additionalProperties: false, required: ["query"],
          properties: {
            query: { type: "string", description: "What to search for" },
            timeframe: { type: "string", enum: TIMEFRAMES, default: "7d",
              description: "How far back to look" },
            category: { type: "string", description:
              "Filter: conversation, diagnosis, error, file, system.service, system.process, …" },
            maxResults: { type: "integer", minimum: 1, maximum: 50, default: 6 },
          },
        },
        async execute(_id, params, signal) {
          const p = (params ?? {}) as Record<string, unknown>;
          const query = str(p.query);
          if (!query) throw new Error("memory_recall needs a query");
          const tf = TIMEFRAMES.includes(p.timeframe as Timeframe) ? p.timeframe as Timeframe : "7d";
          try {
            const res = await recallAll(agentId, query, int(p.maxResults, 6, 1, 50), tf,
              str(p.category), cfg.timeoutMs, signal);
            availability.ok();
            return text(res.memories.length || res.alerts?.length ? res.system_memory
              : "No matching memories.",
              { memories: res.memories });
          } catch (err) {
            return fail("recall", err);
          }
        },
      },
      {
        name: "memory_store",
        label: "Store memory",
        description: "Explicitly store something important in long-term memory (a root cause, "
          + "a fix, a decision, a user preference). One-line summary; specifics in detail.",
        parameters: {
          type: "object", additionalProperties: false, required: ["summary"],
          properties: {
            summary: { type: "string", minLength: 1, maxLength: 2000 },
            detail: { type: "string", maxLength: 32000 },
            category: { type: "string", description: "e.g. diagnosis, user_pattern, conversation" },
            tags: { type: "array", items: { type: "string" } },
          },
        },
        async execute(_id, params, signal) {
          const p = (params ?? {}) as Record<string, unknown>;
          const summary = str(p.summary);
          if (!summary) throw new Error("memory_store needs a summary");
          const tags = Array.isArray(p.tags) ? p.tags.filter((t): t is string => typeof t === "string")
            : undefined;
          try {
            const res = await client.store({
              summary, detail: str(p.detail), category: str(p.category), tags, actor: "agent",
              source: "openclaw", namespace: own(agentId),
            }, { signal });
            availability.ok();
            return text(`Stored in long-term memory: id ${res.ids.join(", ")}.`, res);
          } catch (err) {
            return fail("store", err);
          }
        },
      },
      {
        name: "memory_supersede",
        label: "Supersede memory",
        description: "Replace a memory that is no longer true (a changed preference, a moved "
          + "port) by a new one: the old memory (its id from memory_recall/memory_search) stays as "
          + "history but is no longer recalled unless history is asked for.",
        parameters: {
          type: "object", additionalProperties: false, required: ["old_id", "summary"],
          properties: {
            old_id: { type: "string", description: "id of the memory that is no longer true" },
            summary: { type: "string", minLength: 1, maxLength: 2000,
              description: "What is true now" },
            detail: { type: "string", maxLength: 32000 },
          },
        },
        async execute(_id, params, signal) {
          const p = (params ?? {}) as Record<string, unknown>;
          const oldId = str(p.old_id);
          const summary = str(p.summary);
          if (!oldId || !summary) throw new Error("memory_supersede needs old_id and summary");
          try {
            const res = await client.supersede({ old_id: oldId, namespace: own(agentId),
              new: { summary, detail: str(p.detail), actor: "agent", source: "openclaw" } },
              { signal });
            availability.ok();
            return text(`Stored ${res.ids.join(", ")}; memory ${oldId} is superseded.`, res);
          } catch (err) {
            return fail("supersede", err);
          }
        },
      },
      {
        name: "memory_timeline",
        label: "Memory timeline",
        description: "What happened in the last N hours, oldest first (optionally one category).",
        parameters: {
          type: "object", additionalProperties: false,
          properties: {
            hours: { type: "number", exclusiveMinimum: 0, default: 24 },
            category: { type: "string" },
            limit: { type: "integer", minimum: 1, maximum: 500, default: 50 },
          },
        },
        async execute(_id, params, signal) {
          const p = (params ?? {}) as Record<string, unknown>;
          const hours = typeof p.hours === "number" && p.hours > 0 ? p.hours : 24;
          try {
            const answers = await Promise.all(readable(agentId).map((namespace) =>
              client.timeline({ hours, category: str(p.category), namespace,
                limit: int(p.limit, 50, 1, 500) }, { signal })));
            availability.ok();
            const memories = answers.flatMap((a) => a.memories)
              .sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp));
            const lines = memories.map((m) => `${when(m.timestamp)} | ${m.category} | ${m.summary}`);
            return text(lines.length ? lines.join("\n") : `Nothing recorded in the last ${hours} hours.`,
              { memories });
          } catch (err) {
            return fail("timeline", err);
          }
        },
      },
      {
        name: "memory_search",
        label: "Search memory",
        description: "Ranked search over memory; returns JSON snippets with id, score, category, "
          + "timestamp and the Markdown file (path) holding each memory, for memory_get.",
        parameters: {
          type: "object", additionalProperties: false, required: ["query"],
          properties: {
            query: { type: "string" },
            maxResults: { type: "integer", minimum: 1, maximum: 50, default: 6 },
            minScore: { type: "number" },
          },
        },
        async execute(_id, params, signal) {
          const p = (params ?? {}) as Record<string, unknown>;
          const query = str(p.query);
          if (!query) throw new Error("memory_search needs a query");
          const minScore = typeof p.minScore === "number" ? p.minScore : -Infinity;
          try {
            const res = await recallAll(agentId, query, int(p.maxResults, 6, 1, 50), "all",
              undefined, cfg.timeoutMs, signal);
            availability.ok();
            const results = res.memories.filter((m) => m.score >= minScore).map((m) => ({
              id: m.id, score: m.score, category: m.category, timestamp: m.timestamp,
              path: `memory/daily/${new Date(m.timestamp).toISOString().slice(0, 10)}.md`,
              snippet: (m.summary + (m.detail ? `\n${m.detail}` : "")).slice(0, 700),
            }));
            return text(JSON.stringify({ results }), { results });
          } catch (err) {
            return fail("search", err);
          }
        },
      },
      {
        name: "memory_get",
        label: "Read memory file",
        description: "Read a memory Markdown file (MEMORY.md or memory/daily/YYYY-MM-DD.md), "
          + "optionally from a line for N lines. A daily log shows only the memories this agent "
          + "may read (other lines are empty). A missing file returns empty text.",
        parameters: {
          type: "object", additionalProperties: false, required: ["path"],
          properties: {
            path: { type: "string" },
            from: { type: "integer", minimum: 1 },
            lines: { type: "integer", minimum: 1 },
          },
        },
        async execute(_id, params, signal) {
          const p = (params ?? {}) as Record<string, unknown>;
          const path = str(p.path);
          if (!path) throw new Error("memory_get needs a path");
          try {
            // The namespaces this agent may read (its own and the shared ones), as recall does.
            const res = await client.file({ path, namespace: own(agentId),
              namespaces: readable(agentId) }, { signal });
            availability.ok();
            let body = res.text ?? "";
            if (p.from !== undefined || p.lines !== undefined) {
              const all = body.split("\n");
              const start = int(p.from, 1, 1, Number.MAX_SAFE_INTEGER) - 1;
              const n = int(p.lines, all.length, 1, Number.MAX_SAFE_INTEGER);
              body = all.slice(start, start + n).join("\n");
            }
            return text(body, { path: res.path ?? path, text: body });
          } catch (err) {
            return fail("file read", err);
          }
        },
      },
      {
        name: "memory_forget",
        label: "Forget memory",
        description: "Forget memories for good, by the ids memory_recall / memory_search return: "
          + "they are removed from every index and from the Markdown logs and never come back. "
          + "Only this agent's own memories can be forgotten (a shared one is reported as not "
          + "found). Use when the user asks to forget something or a stored memory is wrong.",
        parameters: {
          type: "object", additionalProperties: false, required: ["ids"],
          properties: {
            ids: { type: "array", minItems: 1, maxItems: 1000, items: { type: "string" },
              description: "Ids of the memories to forget" },
          },
        },
        async execute(_id, params, signal) {
          const p = (params ?? {}) as Record<string, unknown>;
          const ids = Array.isArray(p.ids)
            ? p.ids.filter((i): i is string => typeof i === "string" && i.trim() !== "") : [];
          if (!ids.length) throw new Error("memory_forget needs the ids of the memories to forget");
          try {
            // Only where this agent writes: its own namespace.
            const res = await client.forget({ ids, namespace: own(agentId) }, { signal });
            availability.ok();
            let msg = `Forgot ${res.forgotten} memor${res.forgotten === 1 ? "y" : "ies"}.`;
            if (res.missing?.length) msg += ` Not found (nothing to forget): ${res.missing.join(", ")}.`;
            return text(msg, res);
          } catch (err) {
            return fail("forget", err);
          }
        },
      },
      alertsTool(agentId),
    ];
  }

  /** The alerts of every namespace the agent reads (its own first), each once. */
  function alertsTool(agentId: string | undefined): AgentToolLike {
    return {
      name: "memory_alerts",
      label: "Machine alerts",
      description: "What needs attention on this machine, found in its events: a filesystem "
        + "filling up, a service or timer failing again and again, a process crashing "
        + "repeatedly, a service running unused for weeks. Most severe first.",
      parameters: {
        type: "object", additionalProperties: false,
        properties: {
          state: { type: "string", enum: ["open", "all"], default: "open",
            description: "open, or all to include the resolved ones" },
        },
      },
      async execute(_id, params, signal) {
        const p = (params ?? {}) as Record<string, unknown>;
        const state = p.state === "all" ? "all" : "open";
        try {
          const answers = await Promise.all(readable(agentId).map((namespace) =>
            client.alerts({ namespace, state }, { signal })));
          availability.ok();
          const seen = new Set<string>();
          const alerts = answers.flatMap((a) => a.alerts ?? []).filter((a) =>
            !seen.has(a.id) && !!seen.add(a.id));
          const lines = alerts.map((a) => `[${a.severity}${a.state === "open" ? "" : `, ${a.state}`}] `
            + `${a.text} (${a.rule}, ${a.count}x, first ${when(a.first_seen)}, `
            + `last ${when(a.last_seen)}; id:${a.id})`);
          return text(lines.length ? lines.join("\n")
            : state === "open" ? "No open alerts." : "No alerts.", { alerts });
        } catch (err) {
          return fail("alerts", err);
        }
      },
    };
  }

  return tools;
}

export function registerTools(api: PluginApiLike, plugin: PluginContext): void {
  const tools = toolFactory(plugin);
  api.registerTool((toolCtx: ToolContextLike) => tools(toolCtx), { names: [...TOOL_NAMES] });
}

/** The memory slot: the system-prompt guidance for the memory tools. */
export function registerMemoryPrompt(api: PluginApiLike, plugin: PluginContext): void {
  const { logger } = plugin;
  if (typeof api.registerMemoryCapability === "function") {
    try {
      api.registerMemoryCapability({
        promptBuilder: (params: MemoryPromptSectionParams) => {
          const has = (t: string) => !params?.availableTools || params.availableTools.has(t);
          const lines = ["## Memory (Total Recall)",
            "Relevant memories are injected automatically as a <system_memory> block each turn."];
          if (has("memory_recall")) {
            lines.push("Call memory_recall for deeper or older context (wider timeframe, a category).");
          }
          if (has("memory_alerts")) {
            lines.push("Open alerts about the machine (a disk filling, a unit failing again and "
              + "again, …) come as a <system_alerts> part: mention them to the user early; "
              + "memory_alerts lists them all.");
          }
          if (has("memory_store")) {
            lines.push("Call memory_store when you learn something worth keeping: a root cause, a "
              + "fix, a decision, a user preference.");
          }
          return lines;
        },
      });
    } catch (err) {
      logger.warn(`totalrecall: memory capability not registered (${describe(err)})`);
    }
  }
}
