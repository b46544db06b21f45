/** The tools that change memory: memory_store, memory_supersede, memory_forget (the agent's own
 * namespace only). */

import { str, text, type ToolKit } from "./tool-kit.js";
import type { AgentToolLike } from "./types.js";

/** Store a memory in the agent's own namespace. */
export function storeTool(kit: ToolKit, agentId: string | undefined): AgentToolLike {
  const { client, availability, own, fail } = kit;
  return {
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
  };
}

/** Replace a memory that is no longer true; the old one stays as history. */
export function supersedeTool(kit: ToolKit, agentId: string | undefined): AgentToolLike {
  const { client, availability, own, fail } = kit;
  return {
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
  };
}

/** Forget memories for good, in the agent's own namespace only. */
export function forgetTool(kit: ToolKit, agentId: string | undefined): AgentToolLike {
  const { client, availability, own, fail } = kit;
  return {
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
  };
}
