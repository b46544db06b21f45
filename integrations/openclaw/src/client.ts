/** A small fetch-based client of the Total Recall recall API (every endpoint: docs/api.md; the
 * request and answer types are generated from its OpenAPI schema: types.ts). */

import type {
  AlertsResponse,
  FileRequest,
  FlushRequest,
  ForgetRequest,
  ForgetResponse,
  IngestEvent,
  IngestResponse,
  RecallResponse,
  SessionEndRequest,
  SupersedeRequest,
  Timeframe,
  TimelineRequest,
  TimelineResponse,
  WarmRequest,
} from "./types.js";

// The API's shapes are generated from its OpenAPI schema (types.ts); re-exported for the modules
// that take them from the client.
export type { Alert, ForgetResponse, IngestEvent, IngestResponse, Memory, RecallResponse, Timeframe }
  from "./types.js";

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

  timeline(req: TimelineRequest, opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    return this.request<TimelineResponse>("POST", "/memory/timeline", req, opts);
  }

  /** A memory file; a daily log shows only the memories of `namespace` and `namespaces` (the
   * server blanks other namespaces' lines, so line numbers stay those of recall's citations). */
  file(req: FileRequest, opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    return this.request<{ path: string; text: string }>("POST", "/memory/file", req, opts);
  }

  flush(req: FlushRequest, opts?: { timeoutMs?: number }) {
    return this.request<Record<string, unknown>>("POST", "/memory/flush", req, opts);
  }

  /** Warm the query path; answers the session-start bundle (`session_context`: the block). */
  warm(req: WarmRequest, opts?: { timeoutMs?: number }) {
    return this.request<{ ok?: boolean; session_context?: string; bundle?: unknown }>(
      "POST", "/memory/warm", req, opts);
  }

  /** A finished session: the server stores an extractive summary of its stored turns. */
  sessionEnd(req: SessionEndRequest, opts?: { timeoutMs?: number }) {
    return this.request<{ stored: boolean; id?: string | null; summary?: string | null }>(
      "POST", "/memory/session/end", req, opts);
  }

  /** Store `next` as replacing the memory `old_id` (which recall then treats as history). */
  supersede(req: SupersedeRequest, opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    return this.request<IngestResponse>("POST", "/memory/supersede", req, opts);
  }

  /** Forget memories by the ids recall returns, in one namespace, everywhere and for good. */
  forget(req: ForgetRequest, opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    return this.request<ForgetResponse>("POST", "/memory/forget", req, opts);
  }

  alerts(req: { namespace?: string; state?: "open" | "all" },
         opts?: { timeoutMs?: number; signal?: AbortSignal }) {
    const query = new URLSearchParams({ namespace: req.namespace ?? "default",
      state: req.state ?? "open" });
    return this.request<AlertsResponse>("GET", `/memory/alerts?${query}`, undefined, opts);
  }

  health(opts?: { timeoutMs?: number }) {
    return this.request<{ status: string }>("GET", "/memory/health", undefined, opts);
  }
}
