/** Plugin configuration: `plugins.entries.totalrecall.config` in openclaw.json, then the environment. */

import type { Timeframe } from "./client.js";

export interface TotalRecallConfig {
  /** Base URL of the recall API. Env TOTALRECALL_API. */
  apiUrl: string;
  /** Bearer token. Env TOTALRECALL_API_TOKEN; `${NAME}` reads another variable. */
  apiToken?: string;
  /** Namespace template of an agent's own memories; `{agentId}` is replaced. Env TOTALRECALL_NAMESPACE. */
  namespace: string;
  /** Namespaces also searched on recall (read-only), e.g. the machine's system events in "default". */
  sharedNamespaces: string[];
  autoRecall: boolean;
  /** "system": append the block to the system prompt (the design); "context": prepend to the turn. */
  injectAs: "system" | "context";
  recallMaxResults: number;
  recallTimeframe: Timeframe;
  /** Budget of the automatic recall on every turn; past it the turn goes on without memories. */
  recallTimeoutMs: number;
  /** Budget of tools, warm-up and flush. */
  timeoutMs: number;
  /** After a failure, automatic recall is skipped for this long (no added latency while down). */
  retryAfterMs: number;
  minQueryChars: number;
  /** Session start: warm the query path and fetch the session-start bundle (today's and
   * yesterday's essentials, the last session's summary, MEMORY.md), injected on the first turn. */
  warmOnSessionStart: boolean;
  flushOnCompaction: boolean;
  /** Store each finished turn (user message + reply) as a conversation memory. On by default:
   * the design's bridge "intercepts agent responses" and summarises each session at its end,
   * which needs the session's turns stored. */
  autoCapture: boolean;
  /** Session end: the server stores an extractive summary of the session's stored turns. */
  summarizeOnSessionEnd: boolean;
}

export const DEFAULTS: TotalRecallConfig = {
  apiUrl: "http://127.0.0.1:8765",
  namespace: "{agentId}",
  sharedNamespaces: ["default"],
  autoRecall: true,
  injectAs: "system",
  recallMaxResults: 6,
  recallTimeframe: "auto",
  recallTimeoutMs: 2000,
  timeoutMs: 8000,
  retryAfterMs: 15000,
  minQueryChars: 3,
  warmOnSessionStart: true,
  flushOnCompaction: true,
  autoCapture: true,
  summarizeOnSessionEnd: true,
};

const TIMEFRAMES = new Set(["auto", "1h", "24h", "7d", "30d", "90d", "all"]);
const NAMESPACE_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

function expand(value: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  if (!value) return undefined;
  const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(value.trim());
  return m ? env[m[1]] || undefined : value;
}

function num(v: unknown, fallback: number, min: number, max: number): number {
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() ? Number(v) : NaN;
  return Number.isFinite(n) ? Math.min(max, Math.max(min, n)) : fallback;
}

function bool(v: unknown, fallback: boolean): boolean {
  return typeof v === "boolean" ? v : fallback;
}

export function resolveConfig(raw: Record<string, unknown> | undefined,
                              env: NodeJS.ProcessEnv = process.env): TotalRecallConfig {
  const c = raw ?? {};
  const str = (k: string) => (typeof c[k] === "string" && (c[k] as string).trim()
    ? (c[k] as string).trim() : undefined);
  const shared = Array.isArray(c.sharedNamespaces)
    ? (c.sharedNamespaces as unknown[]).filter((s): s is string => typeof s === "string")
    : DEFAULTS.sharedNamespaces;
  const timeframe = str("recallTimeframe");
  return {
    apiUrl: expand(str("apiUrl"), env) ?? env.TOTALRECALL_API ?? DEFAULTS.apiUrl,
    apiToken: expand(str("apiToken"), env) ?? (env.TOTALRECALL_API_TOKEN || undefined),
    namespace: str("namespace") ?? (env.TOTALRECALL_NAMESPACE || DEFAULTS.namespace),
    sharedNamespaces: shared,
    autoRecall: bool(c.autoRecall, DEFAULTS.autoRecall),
    injectAs: c.injectAs === "context" ? "context" : "system",
    recallMaxResults: num(c.recallMaxResults, DEFAULTS.recallMaxResults, 1, 50),
    recallTimeframe: (timeframe && TIMEFRAMES.has(timeframe) ? timeframe
      : DEFAULTS.recallTimeframe) as Timeframe,
    recallTimeoutMs: num(c.recallTimeoutMs, DEFAULTS.recallTimeoutMs, 50, 60000),
    timeoutMs: num(c.timeoutMs, DEFAULTS.timeoutMs, 100, 120000),
    retryAfterMs: num(c.retryAfterMs, DEFAULTS.retryAfterMs, 0, 3600000),
    minQueryChars: num(c.minQueryChars, DEFAULTS.minQueryChars, 1, 1000),
    warmOnSessionStart: bool(c.warmOnSessionStart, DEFAULTS.warmOnSessionStart),
    flushOnCompaction: bool(c.flushOnCompaction, DEFAULTS.flushOnCompaction),
    autoCapture: bool(c.autoCapture, DEFAULTS.autoCapture),
    summarizeOnSessionEnd: bool(c.summarizeOnSessionEnd, DEFAULTS.summarizeOnSessionEnd),
  };
}

/** The namespace of one agent: the template with `{agentId}` filled in, made valid. */
export function namespaceFor(template: string, agentId: string | undefined): string {
  const filled = template.replaceAll("{agentId}", agentId || "main");
  if (NAMESPACE_RE.test(filled)) return filled;
  const cleaned = filled.replace(/[^A-Za-z0-9_.-]+/g, "-").replace(/^[^A-Za-z0-9]+/, "").slice(0, 64);
  return cleaned || "default";
}
