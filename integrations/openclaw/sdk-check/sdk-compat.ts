/**
 * Compile-time proof that the plugin fits the real OpenClaw plugin SDK. Not part of the build:
 * `tests/e2e/test_openclaw_bridge.py` compiles it (tsc --noEmit) against the `openclaw` package it
 * installed, mapping `openclaw/*` to that install. Each line below fails to compile if the SDK's
 * shapes drift from the structural types in src/types.ts.
 */

import type {
  AnyAgentTool,
  OpenClawPluginApi,
  OpenClawPluginDefinition,
  OpenClawPluginToolContext,
} from "openclaw/plugin-sdk/plugin-entry";

import entry from "../src/index.js";
import { registerTotalRecall } from "../src/plugin.js";
import type {
  AgentContext,
  AgentEndEvent,
  AgentToolLike,
  BeforeCompactionEvent,
  BeforePromptBuildEvent,
  BeforePromptBuildResult,
  SessionContext,
  SessionEndEvent,
  SessionStartEvent,
  ToolContextLike,
} from "../src/types.js";

// The default export is a valid plugin definition, and register() accepts the real API.
export const definition: OpenClawPluginDefinition = entry;
declare const api: OpenClawPluginApi;
registerTotalRecall(api);

// Our hook handler signatures are accepted by the real typed hook catalog.
declare const beforePromptBuild: (e: BeforePromptBuildEvent, c: AgentContext)
  => Promise<BeforePromptBuildResult | undefined>;
declare const sessionStart: (e: SessionStartEvent, c: Partial<SessionContext>) => Promise<void>;
declare const beforeCompaction: (e: BeforeCompactionEvent, c: AgentContext) => Promise<void>;
declare const agentEnd: (e: AgentEndEvent, c: AgentContext) => Promise<void>;
declare const sessionEnd: (e: SessionEndEvent, c: Partial<SessionContext>) => Promise<void>;
api.on("before_prompt_build", beforePromptBuild);
api.on("session_start", sessionStart);
api.on("before_compaction", beforeCompaction);
api.on("agent_end", agentEnd);
api.on("session_end", sessionEnd);

// Our tools are agent tools, produced by a valid tool factory.
declare const tools: (ctx: ToolContextLike) => AgentToolLike[];
const factory = (ctx: OpenClawPluginToolContext): AnyAgentTool[] => tools(ctx) as AnyAgentTool[];
api.registerTool(factory, { names: ["memory_recall"] });
declare const one: AgentToolLike;
export const asAgentTool: Pick<AnyAgentTool, "name" | "description" | "label" | "execute"> = one;
