/** The memory_alerts tool: the proactive alerts the recall API found in the machine's events. */

import { text, type ToolKit, when } from "./tool-kit.js";
import type { AgentToolLike } from "./types.js";

/** The alerts of every namespace the agent reads (its own first), each once. */
export function alertsTool(kit: ToolKit, agentId: string | undefined): AgentToolLike {
  const { client, availability, readable, fail } = kit;
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
