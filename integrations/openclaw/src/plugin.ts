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
 *
 * The hooks are in `hooks.ts`, the tools and their prompt guidance in `tools.ts` (each tool in
 * `tools-read.ts`, `tools-write.ts`, `tools-alerts.ts`), what both share (config, client,
 * availability, namespaces) in `context.ts`; this module wires them.
 */

import type { TotalRecallClient } from "./client.js";
import { resolveConfig, type TotalRecallConfig } from "./config.js";
import { createContext } from "./context.js";
import { registerHooks } from "./hooks.js";
import { registerMemoryPrompt, registerTools } from "./tools.js";
import type { PluginApiLike } from "./types.js";

export { messageText } from "./hooks.js";
export { TOOL_NAMES } from "./tools.js";

export const PLUGIN_ID = "totalrecall";

export interface PluginDeps {
  fetchImpl?: typeof fetch;
  env?: NodeJS.ProcessEnv;
  now?: () => number;
}

export function registerTotalRecall(api: PluginApiLike, deps: PluginDeps = {}): {
  config: TotalRecallConfig; client: TotalRecallClient;
} {
  const cfg = resolveConfig(api.pluginConfig, deps.env ?? process.env);
  const plugin = createContext(cfg, api.logger, deps);
  registerHooks(api, plugin);
  registerTools(api, plugin);
  registerMemoryPrompt(api, plugin);
  plugin.logger.info(`totalrecall: registered (api ${cfg.apiUrl}, namespace ${cfg.namespace}, `
    + `autoRecall ${cfg.autoRecall}, inject ${cfg.injectAs})`);
  return { config: cfg, client: plugin.client };
}
