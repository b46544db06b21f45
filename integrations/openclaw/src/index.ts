/**
 * OpenClaw plugin entry. Shape of `definePluginEntry(...)` from `openclaw/plugin-sdk/plugin-entry`
 * (a plain object, so the plugin has no runtime dependency on the SDK).
 */

import { PLUGIN_ID, registerTotalRecall } from "./plugin.js";
import type { PluginApiLike } from "./types.js";

export { messageText, PLUGIN_ID, registerTotalRecall, TOOL_NAMES } from "./plugin.js";
export { namespaceFor, resolveConfig, type TotalRecallConfig } from "./config.js";
export { TotalRecallClient, TotalRecallHttpError, TotalRecallUnavailableError } from "./client.js";

const entry = {
  id: PLUGIN_ID,
  name: "Total Recall",
  description: "Event-streaming long-term memory: automatic recall every turn, memory tools, "
    + "warm-up on session start and flush before compaction.",
  register(api: PluginApiLike): void {
    registerTotalRecall(api);
  },
};

export default entry;
