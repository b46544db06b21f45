/** The tools that read memory: memory_recall, memory_search, memory_timeline, memory_get. */

import type { Timeframe } from "./client.js";
import { int, str, text, TIMEFRAMES, type ToolKit, when } from "./tool-kit.js";
import type { AgentToolLike } from "./types.js";

/** The `<system_memory>` block for a query, over every namespace the agent reads. */
export function recallTool(kit: ToolKit, agentId: string | undefined): AgentToolLike {
  const { cfg, availability, recallAll, fail } = kit;
  return {
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
  };
}

/** Ranked hits as JSON snippets, with the daily log holding each (for memory_get). */
export function searchTool(kit: ToolKit, agentId: string | undefined): AgentToolLike {
  const { cfg, availability, recallAll, fail } = kit;
  return {
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
  };
}

/** What happened in the last hours, every namespace the agent reads, oldest first. */
export function timelineTool(kit: ToolKit, agentId: string | undefined): AgentToolLike {
  const { client, availability, readable, fail } = kit;
  return {
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
  };
}

/** A memory Markdown file, as far as the agent may read it. */
export function getTool(kit: ToolKit, agentId: string | undefined): AgentToolLike {
  const { client, availability, own, readable, fail } = kit;
  return {
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
  };
}
