import type { components } from "./api-types.js";

// --- the recall API's shapes: generated from its OpenAPI schema (src/api-types.ts), never copied --

type Schemas = components["schemas"];

/** A recalled memory. */
export type Memory = Schemas["Memory"];
/** `POST /memory/recall`'s answer. `system_memory` is the block to put into the prompt, rendered
 * (escaped, marked) by the server: used as is. It holds a `<system_alerts>` part when there are
 * open alerts (even with no memories); `alerts` lists them. */
export type RecallResponse = Schemas["RecallResponse"];
/** A proactive alert (GET /memory/alerts): a condition found in the machine's events. */
export type Alert = Schemas["Alert"];
export type AlertsResponse = Schemas["AlertsResponse"];
export type IngestEvent = Schemas["IngestEvent"];
export type IngestResponse = Schemas["IngestResponse"];
export type TimelineRequest = Schemas["TimelineRequest"];
export type TimelineResponse = Schemas["TimelineResponse"];
export type FileRequest = Schemas["FileRequest"];
export type FlushRequest = Schemas["FlushRequest"];
export type WarmRequest = Schemas["WarmRequest"];
export type SessionEndRequest = Schemas["SessionEndRequest"];
export type SupersedeRequest = Schemas["SupersedeRequest"];
export type ForgetRequest = Schemas["ForgetRequest"];
/** `forgotten`: how many of the ids were found and are now gone everywhere (for good);
 * `missing`: ids found nowhere in the namespace. */
export type ForgetResponse = Schemas["ForgetResponse"];
export type Timeframe = NonNullable<Schemas["RecallRequest"]["timeframe"]>;

// --- the OpenClaw plugin SDK ------------------------------------------------------------------

/**
 * The slice of the OpenClaw plugin SDK this plugin uses, written structurally so the plugin builds
 * and unit-tests without the (large, Node 24+) `openclaw` package. Shapes mirror
 * `openclaw/plugin-sdk` 2026.9.x (`PluginHookBeforePromptBuildEvent`, `PluginHookAgentContext`, …);
 * `sdk-check/sdk-compat.ts` type-checks them against the real SDK when it is installed.
 */

export interface PluginLogger {
  debug?: (message: string) => void;
  info: (message: string) => void;
  warn: (message: string) => void;
  error: (message: string) => void;
}

export type ToolContent = { type: "text"; text: string };
export interface ToolResult<TDetails = unknown> {
  content: ToolContent[];
  details: TDetails;
}

export interface AgentToolLike {
  name: string;
  label: string;
  description: string;
  /** JSON Schema of the arguments. */
  parameters: Record<string, unknown>;
  execute: (toolCallId: string, params: unknown, signal?: AbortSignal) => Promise<ToolResult>;
}

/** Context OpenClaw passes to tool factories (subset of `OpenClawPluginToolContext`). */
export interface ToolContextLike {
  agentId?: string;
  sessionKey?: string;
  sessionId?: string;
}

export interface BeforePromptBuildEvent {
  prompt: string;
  currentUserMessage?: string;
  currentUserMessageId?: string;
  messages: unknown[];
}
export interface BeforePromptBuildResult {
  prependContext?: string;
  appendContext?: string;
  prependSystemContext?: string;
  appendSystemContext?: string;
}
export interface AgentContext {
  runId?: string;
  agentId?: string;
  sessionKey?: string;
  sessionId?: string;
  trigger?: string;
}
export interface SessionStartEvent {
  sessionId: string;
  sessionKey?: string;
  resumedFrom?: string;
}
export interface SessionContext {
  agentId?: string;
  sessionId: string;
  sessionKey?: string;
}
export interface SessionEndEvent {
  sessionId: string;
  sessionKey?: string;
  messageCount: number;
  durationMs?: number;
  reason?: string;
}
export interface BeforeCompactionEvent {
  messageCount: number;
  compactingCount?: number;
  tokenCount?: number;
  messages?: unknown[];
  sessionFile?: string;
}
export interface AgentEndEvent {
  runId?: string;
  messages: unknown[];
  success: boolean;
  error?: string;
  durationMs?: number;
}

export interface MemoryPromptSectionParams {
  availableTools: Set<string>;
  agentId?: string;
}

/**
 * The registration API, loosely typed on purpose: the real `OpenClawPluginApi` must be assignable
 * to it (its `on` is generic over the hook catalog), so `register(api)` accepts the real thing.
 */
export interface PluginApiLike {
  id?: string;
  pluginConfig?: Record<string, unknown>;
  logger: PluginLogger;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  registerTool: (tool: any, opts?: { name?: string; names?: string[]; optional?: boolean }) => void;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  on: (hookName: any, handler: any, opts?: any) => void;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  registerMemoryCapability?: (capability: any) => void;
}
