/** A small fetch-based client of the Total Recall recall API (every endpoint: docs/api.md; the types come from its OpenAPI schema). */

export type Timeframe = "auto" | "1h" | "24h" | "7d" | "30d" | "90d" | "all";

export interface Memory {
  id: string;
  score: number;
  timestamp: string;
  category: string;
  subcategory?: string;
  summary: string;
  detail?: string;
  tier?: string;
  namespace?: string;
  severity?: string;
  relative_time?: string;
  tags?: string[];
  metadata?: Record<string, unknown>;
}
export interface RecallResponse {
  memories: Memory[];
  /** The block to put into the prompt, rendered (escaped, marked) by the server: used as is.
   * Holds a `<system_alerts>` part when there are open alerts (even with no memories). */
  system_memory: string;
  took_ms?: number;
  query_class?: string;
  /** The open alerts of the namespaces read (servers before alerts: absent). */
  alerts?: Alert[];
}
/** A proactive alert (GET /memory/alerts): a condition found in the machine's events. */
export interface Alert {
  id: string;
  rule: string;
  subject: string;
  namespace?: string;
  state: "open" | "resolved";
  severity: string;
  text: string;
  first_seen: string;
  last_seen: string;
  count: number;
  resolved_at?: string | null;
  evidence?: string[];
}
export interface IngestResponse {
  ids: string[];
  accepted: number;
  duplicates?: number;
}
export interface ForgetResponse {
  /** How many of the ids were found and are now gone everywhere (for good). */
  forgotten: number;
  /** Ids found nowhere in the namespace. */
  missing: string[];
}
export interface IngestEvent {
  summary: string;
  detail?: string;
  category?: string;
  subcategory?: string;
  actor?: string;
  tags?: string[];
  metadata?: Record<string, unknown>;
  id?: string;
  timestamp?: string;
  namespace?: string;
  source?: string;
}

/** The API answered with an error status; `reason` is the server's own explanation. */
export class TotalRecallHttpError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly reason: string,
  ) {
    super(`${method} ${path} -> ${status}: ${reason}`);
    this.name = "TotalRecallHttpError";
  }
}

/** The API could not be reached or did not answer in time. */
export class TotalRecallUnavailableError extends Error {
  constructor(message: string, readonly timedOut: boolean) {
    super(message);
    this.name = "TotalRecallUnavailableError";
  }
}

export interface ClientOptions {
  baseUrl: string;
  token?: string;
  timeoutMs: number;
  fetchImpl?: typeof fetch;
}

function reasonOf(body: unknown, fallback: string): string {
  if (body && typeof body === "object" && "detail" in body) {
    const detail = (body as { detail: unknown }).detail;
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) {
      return detail
        .map((e) => {
          if (e && typeof e === "object" && "msg" in e) {
            const loc = Array.isArray((e as { loc?: unknown[] }).loc)
              ? ((e as { loc: unknown[] }).loc.filter((p) => p !== "body").join("."))
              : "";
            return loc ? `${loc}: ${(e as { msg: string }).msg}` : String((e as { msg: string }).msg);
          }
          return JSON.stringify(e);
        })
        .join("; ");
    }
    return JSON.stringify(detail);
  }
  if (typeof body === "string" && body.trim()) return body.trim().slice(0, 500);
  return fallback;
}

export class TotalRecallClient {
  readonly baseUrl: string;
  private readonly token?: string;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.token = opts.token || undefined;
    this.timeoutMs = opts.timeoutMs;
    this.fetchImpl = opts.fetchImpl ?? fetch;
  }

  async request<T>(method: "GET" | "POST", path: string, body?: unknown,
                   opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<T> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    const timeout = AbortSignal.timeout(opts.timeoutMs ?? this.timeoutMs);
    const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout;
    let response: Response;
    try {
      response = await this.fetchImpl(this.baseUrl + path, {
        method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      const timedOut = timeout.aborted;
      const why = timedOut ? `timed out after ${opts.timeoutMs ?? this.timeoutMs} ms`
        : String((err as Error & { cause?: unknown }).cause ?? err);
      throw new TotalRecallUnavailableError(`${method} ${this.baseUrl}${path}: ${why}`, timedOut);
    }
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* keep the text */
    }
    if (!response.ok) {
      throw new TotalRecallHttpError(method, path, response.status,
        reasonOf(parsed, response.statusText || "error"));
    }
    return parsed as T;
  }

  /** `namespaces`: several read at once; the server fuses them into one list and one block. */
  recall(req: { query: string; maxResults?: number; timeframe?: Timeframe; category?: string;
                namespace?: string; namespaces?: string[] },
         opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    const body: Record<string, unknown> = { query: req.query, maxResults: req.maxResults ?? 6,
      timeframe: req.timeframe ?? "auto" };
    if (req.category) body.category = req.category;
    if (req.namespace) body.namespace = req.namespace;
    if (req.namespaces?.length) body.namespaces = req.namespaces;
    return this.request<RecallResponse>("POST", "/memory/recall", body, opts);
  }

  store(event: IngestEvent, opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    return this.request<IngestResponse>("POST", "/memory/store", event, opts);
  }

  ingest(events: IngestEvent | IngestEvent[], opts?: { timeoutMs?: number }) {
    return this.request<IngestResponse>("POST", "/memory/ingest", events, opts);
  }

  timeline(req: { hours: number; category?: string; namespace?: string; limit?: number },
           opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    return this.request<{ memories: Memory[] }>("POST", "/memory/timeline", req, opts);
  }

  /** A memory file; a daily log shows only the memories of `namespace` and `namespaces` (the
   * server blanks other namespaces' lines, so line numbers stay those of recall's citations). */
  file(req: { path: string; namespace?: string; namespaces?: string[] },
       opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    return this.request<{ path: string; text: string }>("POST", "/memory/file", req, opts);
  }

  flush(req: { messages: unknown[]; sessionId: string; namespace?: string },
        opts?: { timeoutMs?: number }) {
    return this.request<Record<string, unknown>>("POST", "/memory/flush", req, opts);
  }

  /** Warm the query path; answers the session-start bundle (`session_context`: the block). */
  warm(req: { sessionId: string; namespace?: string; namespaces?: string[] },
       opts?: { timeoutMs?: number }) {
    return this.request<{ ok?: boolean; session_context?: string; bundle?: unknown }>(
      "POST", "/memory/warm", req, opts);
  }

  /** A finished session: the server stores an extractive summary of its stored turns. */
  sessionEnd(req: { sessionId: string; namespace?: string }, opts?: { timeoutMs?: number }) {
    return this.request<{ stored: boolean; id?: string | null; summary?: string | null }>(
      "POST", "/memory/session/end", req, opts);
  }

  /** Store `next` as replacing the memory `old_id` (which recall then treats as history). */
  supersede(req: { old_id: string; namespace?: string; new: IngestEvent },
            opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    return this.request<IngestResponse>("POST", "/memory/supersede", req, opts);
  }

  /** Forget memories by the ids recall returns, in one namespace, everywhere and for good. */
  forget(req: { ids: string[]; namespace?: string },
         opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    return this.request<ForgetResponse>("POST", "/memory/forget", req, opts);
  }

  alerts(req: { namespace?: string; state?: "open" | "all" },
         opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    const query = new URLSearchParams({ namespace: req.namespace ?? "default",
      state: req.state ?? "open" });
    return this.request<{ alerts: Alert[] }>("GET", `/memory/alerts?${query}`, undefined, opts);
  }

  health(opts?: { timeoutMs?: number }) {
    return this.request<{ status: string }>("GET", "/memory/health", undefined, opts);
  }
}
