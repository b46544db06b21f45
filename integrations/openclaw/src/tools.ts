/**
 * The plugin's tools: `memory_recall`, `memory_store`, `memory_supersede`, `memory_timeline`,
 * `memory_search`, `memory_get`, `memory_forget`, `memory_alerts` (the reading ones in
 * `tools-read.ts`, the changing ones in `tools-write.ts`, the alerts in `tools-alerts.ts`), and the
 * system-prompt guidance for them (the memory slot). A tool whose API call fails throws a clear
 * message the model can read.
 */

import { describe, type PluginContext } from "./context.js";
import { toolKit } from "./tool-kit.js";
import { alertsTool } from "./tools-alerts.js";
import { getTool, recallTool, searchTool, timelineTool } from "./tools-read.js";
import { forgetTool, storeTool, supersedeTool } from "./tools-write.js";
import type {
  AgentToolLike,
  MemoryPromptSectionParams,
  PluginApiLike,
  ToolContextLike,
} from "./types.js";

export const TOOL_NAMES = [
  "memory_recall", "memory_store", "memory_timeline", "memory_search", "memory_get",
  "memory_forget",
  "memory_supersede",
  "memory_alerts",
] as const;

/** The tools, as the factory OpenClaw calls with each agent's context. */
export function toolFactory(plugin: PluginContext): (toolCtx?: ToolContextLike) => AgentToolLike[] {
  const kit = toolKit(plugin);
  return (toolCtx: ToolContextLike = {}) => {
    const agentId = toolCtx.agentId;
    return [recallTool, storeTool, supersedeTool, timelineTool, searchTool, getTool, forgetTool,
      alertsTool].map((tool) => tool(kit, agentId));
  };
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
