/**
 * Total Recall ↔ OpenClaw: memories "pop in" on every turn, and the agent can search and store.
 *
 * - `before_prompt_build`: recall with the user's message (agent namespace + shared namespaces, in
 *   one request, within `recallTimeoutMs`) and inject the server's `<system_memory>` block as is.
 * - tools `memory_recall`, `memory_store`, `memory_timeline`, `memory_search`, `memory_get`,
 *   `memory_forget`, `memory_supersede`, `memory_alerts` (the server's proactive alerts; the open
 *   ones also come in the block).
 * - `session_start` → POST /memory/warm (its session-start bundle is injected on the session's
 *   first turn); `before_compaction` → POST /memory/flush; `agent_end` (`autoCapture`) → POST
 *   /memory/flush of the finished turn; `session_end` → POST /memory/session/end (its summary).
 * - Never breaks the agent: when the API is down or slow, hooks log one warning and return nothing;
 *   tools fail with a clear message the model can read.
 */

import {
  type RecallResponse,
  TotalRecallClient,
  TotalRecallHttpError,
  TotalRecallUnavailableError,
  type Timeframe,
} from "./client.js";
import { namespaceFor, resolveConfig, type TotalRecallConfig } from "./config.js";
import type {
  AgentContext,
  AgentEndEvent,
  AgentToolLike,
  BeforeCompactionEvent,
  BeforePromptBuildEvent,
  BeforePromptBuildResult,
  MemoryPromptSectionParams,
  PluginApiLike,
  PluginLogger,
  SessionContext,
  SessionEndEvent,
  SessionStartEvent,
  ToolContextLike,
  ToolResult,
} from "./types.js";

export const PLUGIN_ID = "totalrecall";
export const TOOL_NAMES = [
  "memory_recall", "memory_store", "memory_timeline", "memory_search", "memory_get",
  "memory_forget",
  "memory_supersede",
  "memory_alerts",
] as const;
const TIMEFRAMES: Timeframe[] = ["auto", "1h", "24h", "7d", "30d", "90d", "all"];
const MAX_QUERY_CHARS = 8000;
const MAX_FLUSH_MESSAGES = 200;
const MAX_MESSAGE_CHARS = 8000;
/** Session-start bundles waiting for their session's first turn (bounded: sessions that never
 * get a turn must not pile up). */
const MAX_PENDING_SESSIONS = 256;

/** Text of a chat message whatever its shape (string content or content blocks). */
export function messageText(message: unknown): { role: string; text: string } | null {
  if (!message || typeof message !== "object") return null;
  const m = message as { role?: unknown; content?: unknown; text?: unknown };
  const role = typeof m.role === "string" ? m.role : "unknown";
  let text = "";
  if (typeof m.content === "string") text = m.content;
  else if (Array.isArray(m.content)) {
    text = m.content
      .map((b) => (b && typeof b === "object" && (b as { type?: unknown }).type === "text"
        ? String((b as { text?: unknown }).text ?? "") : ""))
      .filter(Boolean)
      .join("\n");
  } else if (typeof m.text === "string") text = m.text;
  return { role, text };
}

function when(ts: string): string {
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : d.toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

function describe(err: unknown): string {
  if (err instanceof TotalRecallHttpError) return `HTTP ${err.status}: ${err.reason}`;
  if (err instanceof Error) return err.message;
  return String(err);
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

/** Availability bookkeeping: one warning when the API goes away, one note when it is back. */
class Availability {
  private downUntil = 0;
  private down = false;

  constructor(private readonly logger: PluginLogger, private readonly retryAfterMs: number,
              private readonly now: () => number = Date.now) {}

  get skipping(): boolean {
    return this.down && this.now() < this.downUntil;
  }

  ok(): void {
    if (this.down) this.logger.info("totalrecall: recall API reachable again");
    this.down = false;
  }

  failed(what: string, err: unknown): void {
    if (err instanceof TotalRecallHttpError && err.status < 500) {
      // The API is up but refused this request: say why, every time (it is a config/data error).
      this.logger.warn(`totalrecall: ${what} rejected (${describe(err)})`);
      return;
    }
    if (!this.down) {
      this.logger.warn(`totalrecall: ${what} failed (${describe(err)}); the agent continues `
        + `without long-term memory, retrying in ${Math.round(this.retryAfterMs / 1000)}s`);
    }
    this.down = true;
    this.downUntil = this.now() + this.retryAfterMs;
  }
}

export interface PluginDeps {
  fetchImpl?: typeof fetch;
  env?: NodeJS.ProcessEnv;
  now?: () => number;
}

export function registerTotalRecall(api: PluginApiLike, deps: PluginDeps = {}): {
  config: TotalRecallConfig; client: TotalRecallClient;
} {
  const cfg = resolveConfig(api.pluginConfig, deps.env ?? process.env);
  const logger = api.logger;
  const client = new TotalRecallClient({ baseUrl: cfg.apiUrl, token: cfg.apiToken,
    timeoutMs: cfg.timeoutMs, fetchImpl: deps.fetchImpl });
  const availability = new Availability(logger, cfg.retryAfterMs, deps.now);
  const own = (agentId?: string) => namespaceFor(cfg.namespace, agentId);
  const readable = (agentId?: string) => [...new Set([own(agentId), ...cfg.sharedNamespaces])];

  /** One recall over every namespace the agent reads (its own first): the server fuses the hits
   * and renders the one `<system_memory>` block (escaped, injection-marked, with the profile);
   * the plugin passes it through and never builds a block itself. */
  function recallAll(agentId: string | undefined, query: string, maxResults: number,
                     timeframe: Timeframe, category: string | undefined, timeoutMs: number,
                     signal?: AbortSignal): Promise<RecallResponse> {
    return client.recall({ query, maxResults, timeframe, category, namespaces: readable(agentId) },
      { timeoutMs, signal });
  }

  // --- the session-start bundle: fetched at session_start, injected on the session's first turn --
  const pending = new Map<string, string>();
  const takeSessionContext = (ctx: AgentContext): string | undefined => {
    for (const key of [ctx.sessionId, ctx.sessionKey]) {
      const text = key ? pending.get(key) : undefined;
      if (key && text) {
        pending.delete(key);
        return text;
      }
    }
    return undefined;
  };

  // --- automatic recall on every turn ------------------------------------------------------------
  if (cfg.autoRecall) {
    api.on("before_prompt_build", async (event: BeforePromptBuildEvent, ctx: AgentContext = {})
      : Promise<BeforePromptBuildResult | undefined> => {
      if (ctx.trigger === "heartbeat") return undefined;
      const opening = takeSessionContext(ctx);
      const inject = (block: string) => (cfg.injectAs === "system"
        ? { appendSystemContext: block } : { prependContext: block });
      const openingOnly = () => (opening ? inject(opening) : undefined);
      const query = (typeof event.currentUserMessage === "string" && event.currentUserMessage.trim()
        ? event.currentUserMessage : event.prompt ?? "").trim().slice(-MAX_QUERY_CHARS);
      if (query.length < cfg.minQueryChars || availability.skipping) return openingOnly();
      try {
        const res = await recallAll(ctx.agentId, query, cfg.recallMaxResults, cfg.recallTimeframe,
          undefined, cfg.recallTimeoutMs);
        availability.ok();
        // The block may hold only the user profile (the design injects it on every turn) or only
        // open alerts ("before we start: the disk is filling"): injected too.
        if (!res.system_memory.trim()) return openingOnly();
        const block = (opening ? `${opening}\n\n` : "")
          + `# System Memory (auto-retrieved by Total Recall)\n${res.system_memory.trim()}`;
        logger.debug?.(`totalrecall: injected ${res.memories.length} memories`);
        return inject(block);
      } catch (err) {
        availability.failed("automatic recall", err);
        return openingOnly();
      }
    });
  }

  // --- lifecycle ---------------------------------------------------------------------------------
  if (cfg.warmOnSessionStart) {
    api.on("session_start", async (event: SessionStartEvent, ctx: Partial<SessionContext> = {}) => {
      const sessionId = event.sessionId || ctx.sessionId;
      if (!sessionId) return;
      try {
        const res = await client.warm({ sessionId, namespace: own(ctx.agentId),
          namespaces: readable(ctx.agentId) });
        availability.ok();
        const text = typeof res?.session_context === "string" ? res.session_context.trim() : "";
        if (text) {
          if (pending.size >= MAX_PENDING_SESSIONS) pending.delete(pending.keys().next().value!);
          pending.set(sessionId, `# Session start (Total Recall)\n${text}`);
        }
      } catch (err) {
        availability.failed("warm-up", err);
      }
    });
  }

  if (cfg.summarizeOnSessionEnd) {
    api.on("session_end", async (event: SessionEndEvent, ctx: Partial<SessionContext> = {}) => {
      const sessionId = event.sessionId || ctx.sessionId;
      if (!sessionId) return;
      pending.delete(sessionId);
      try {
        const res = await client.sessionEnd({ sessionId, namespace: own(ctx.agentId) });
        availability.ok();
        if (res?.stored) logger.info(`totalrecall: stored the summary of session ${sessionId}`);
      } catch (err) {
        availability.failed("session summary", err);
      }
    });
  }

  if (cfg.flushOnCompaction) {
    api.on("before_compaction", async (event: BeforeCompactionEvent, ctx: AgentContext = {}) => {
      const messages = (event.messages ?? [])
        .map(messageText)
        .filter((m): m is { role: string; text: string } => !!m && m.text.trim().length > 0)
        .slice(-MAX_FLUSH_MESSAGES)
        .map((m) => ({ role: m.role, content: m.text.slice(0, MAX_MESSAGE_CHARS) }));
      if (messages.length === 0) return;
      const sessionId = ctx.sessionId || ctx.sessionKey || "unknown";
      try {
        await client.flush({ messages, sessionId, namespace: own(ctx.agentId) });
        availability.ok();
        logger.info(`totalrecall: flushed ${messages.length} messages before compaction`);
      } catch (err) {
        availability.failed("pre-compaction flush", err);
      }
    });
  }

  if (cfg.autoCapture) {
    // A finished turn is stored as its two messages, each with who said it, exactly as the
    // pre-compaction flush stores them: recall's first-person boost reaches the user's own words,
    // the reply follows its question in the session's thread, and the flush of the same messages
    // later is a no-op (same ids: session + role + text).
    api.on("agent_end", async (event: AgentEndEvent, ctx: AgentContext = {}) => {
      if (!event.success) return;
      const texts = (event.messages ?? []).map(messageText).filter((m) => m && m.text.trim());
      const user = [...texts].reverse().find((m) => m!.role === "user");
      const reply = [...texts].reverse().find((m) => m!.role === "assistant");
      if (!user || !reply) return;
      const messages = [user!, reply!].map((m) => ({
        role: m.role, content: m.text.slice(0, MAX_MESSAGE_CHARS) }));
      try {
        await client.flush({ messages, sessionId: ctx.sessionId || ctx.sessionKey || "unknown",
          namespace: own(ctx.agentId) });
        availability.ok();
      } catch (err) {
        availability.failed("auto-capture", err);
      }
    });
  }

  // --- tools -------------------------------------------------------------------------------------
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

  api.registerTool((toolCtx: ToolContextLike) => tools(toolCtx), { names: [...TOOL_NAMES] });

  // --- memory slot: the system-prompt guidance for the memory tools ---------------------------------
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

  logger.info(`totalrecall: registered (api ${cfg.apiUrl}, namespace ${cfg.namespace}, `
    + `autoRecall ${cfg.autoRecall}, inject ${cfg.injectAs})`);
  return { config: cfg, client };
}
