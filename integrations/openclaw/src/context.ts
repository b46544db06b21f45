/**
 * What the hooks and the tools share: the resolved config, the API client, the availability
 * bookkeeping and the agent's namespaces.
 */

import { type RecallResponse, TotalRecallClient, TotalRecallHttpError, type Timeframe } from "./client.js";
import { namespaceFor, type TotalRecallConfig } from "./config.js";
import type { PluginLogger } from "./types.js";

export function describe(err: unknown): string {
  if (err instanceof TotalRecallHttpError) return `HTTP ${err.status}: ${err.reason}`;
  if (err instanceof Error) return err.message;
  return String(err);
}

/** Availability bookkeeping: one warning when the API goes away, one note when it is back. */
export class Availability {
  private downUntil = 0;
  private down = false;

  constructor(private readonly logger: PluginLogger, private readonly retryAfterMs: number,
              private readonly now: () => number = Date.now) {}

  get skipping(): boolean {
    return this.down && this.now() < this.downUntil;
  }

  ok(): void {
    if (this.down) this.logger.info("totalrecall: recall API reachable again");
    this.down = false;
  }

  failed(what: string, err: unknown): void {
    if (err instanceof TotalRecallHttpError && err.status < 500) {
      // The API is up but refused this request: say why, every time (it is a config/data error).
      this.logger.warn(`totalrecall: ${what} rejected (${describe(err)})`);
      return;
    }
    if (!this.down) {
      this.logger.warn(`totalrecall: ${what} failed (${describe(err)}); the agent continues `
        + `without long-term memory, retrying in ${Math.round(this.retryAfterMs / 1000)}s`);
    }
    this.down = true;
    this.downUntil = this.now() + this.retryAfterMs;
  }
}

export interface PluginContext {
  cfg: TotalRecallConfig;
  client: TotalRecallClient;
  logger: PluginLogger;
  availability: Availability;
  /** The namespace the agent writes to. */
  own: (agentId?: string) => string;
  /** Every namespace the agent reads, its own first. */
  readable: (agentId?: string) => string[];
  /** One recall over every namespace the agent reads (its own first): the server fuses the hits
   * and renders the one `<system_memory>` block (escaped, injection-marked, with the profile);
   * the plugin passes it through and never builds a block itself. */
  recallAll: (agentId: string | undefined, query: string, maxResults: number,
              timeframe: Timeframe, category: string | undefined, timeoutMs: number,
              signal?: AbortSignal) => Promise<RecallResponse>;
}

export function createContext(cfg: TotalRecallConfig, logger: PluginLogger,
                              deps: { fetchImpl?: typeof fetch; now?: () => number }): PluginContext {
  const client = new TotalRecallClient({ baseUrl: cfg.apiUrl, token: cfg.apiToken,
    timeoutMs: cfg.timeoutMs, fetchImpl: deps.fetchImpl });
  const availability = new Availability(logger, cfg.retryAfterMs, deps.now);
  const own = (agentId?: string) => namespaceFor(cfg.namespace, agentId);
  const readable = (agentId?: string) => [...new Set([own(agentId), ...cfg.sharedNamespaces])];
  const recallAll: PluginContext["recallAll"] = (agentId, query, maxResults, timeframe, category,
                                                 timeoutMs, signal) =>
    client.recall({ query, maxResults, timeframe, category, namespaces: readable(agentId) },
      { timeoutMs, signal });
  return { cfg, client, logger, availability, own, readable, recallAll };
}
