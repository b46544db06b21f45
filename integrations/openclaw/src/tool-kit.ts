/** What every tool uses: the plugin's shared context, the failure rule of tools, small helpers. */

import { TotalRecallUnavailableError, type Timeframe } from "./client.js";
import { describe, type PluginContext } from "./context.js";
import type { ToolResult } from "./types.js";

export const TIMEFRAMES: Timeframe[] = ["auto", "1h", "24h", "7d", "30d", "90d", "all"];

export interface ToolKit extends PluginContext {
  /** A failed API call, as the tool's error: the model reads it, so it says what to do. */
  fail: (what: string, err: unknown) => never;
}

export function toolKit(plugin: PluginContext): ToolKit {
  const fail = (what: string, err: unknown): never => {
    if (err instanceof TotalRecallUnavailableError) {
      plugin.availability.failed(what, err);
      throw new Error(`Total Recall is unreachable (${err.message}). Long-term memory is `
        + "unavailable right now; carry on without it.");
    }
    throw new Error(`Total Recall ${what} failed: ${describe(err)}`);
  };
  return { ...plugin, fail };
}

export function when(ts: string): string {
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : d.toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

export function text(t: string, details: unknown = {}): ToolResult {
  return { content: [{ type: "text", text: t }], details };
}

export function str(v: unknown): string | undefined {
  return typeof v === "string" && v.trim() ? v.trim() : undefined;
}

export function int(v: unknown, fallback: number, min: number, max: number): number {
  const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : NaN;
  return Number.isFinite(n) ? Math.min(max, Math.max(min, Math.floor(n))) : fallback;
}
