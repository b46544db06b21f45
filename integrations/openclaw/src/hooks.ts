/**
 * The plugin's hooks: automatic recall on every turn (`before_prompt_build`), the session-start
 * bundle (`session_start` → POST /memory/warm, injected on the session's first turn), the session's
 * summary (`session_end`), the pre-compaction flush (`before_compaction`) and auto-capture of each
 * finished turn (`agent_end`). None of them ever breaks the agent: when the API is down or slow
 * they log one warning and return nothing.
 */

import type { PluginContext } from "./context.js";
import type {
  AgentContext,
  AgentEndEvent,
  BeforeCompactionEvent,
  BeforePromptBuildEvent,
  BeforePromptBuildResult,
  PluginApiLike,
  SessionContext,
  SessionEndEvent,
  SessionStartEvent,
} from "./types.js";

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

export function registerHooks(api: PluginApiLike, plugin: PluginContext): void {
  const { cfg, client, logger, availability, own, readable, recallAll } = plugin;

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
}
