// A small fetch wrapper typed by the types openapi-typescript generates
// from api/openapi.yaml (schema.ts): a call names the document's path and
// method, and its parameters, body and answer are that operation's, so a
// change to the document that breaks a caller fails its type check.

import type { components, paths } from "./schema.js";

/** The document's schemas by name: `Schemas["Session"]`. */
export type Schemas = components["schemas"];

/** The methods of the document's operations. */
export type Method = "get" | "put" | "post" | "delete" | "patch";

/** The paths with an operation for method M. */
export type PathsOf<M extends Method> = {
  [P in keyof paths]: paths[P][M] extends undefined ? never : P;
}[keyof paths];

/** The operation at path P for method M. */
export type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

type ParametersOf<O> = O extends { parameters: infer Ps } ? Ps : never;

/** The path parameters of operation O; undefined when it has none. */
export type PathParams<O> = ParametersOf<O> extends { path: infer X } ? X : undefined;

/** The query parameters of operation O. */
export type QueryParams<O> = ParametersOf<O> extends { query?: infer Q } ? NonNullable<Q> : never;

/** The JSON body operation O takes; never when it takes none. */
export type JsonBody<O> = O extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;

type Success = 200 | 201 | 202;
type ResponsesOf<O> = O extends { responses: infer R } ? R : never;
type ContentOf<R> = R extends { content: { "application/json": infer T } }
  ? T
  : R extends { content: { "text/markdown": infer T } }
    ? T
    : undefined;

/** What a success of operation O answers: its JSON (or markdown) body. */
export type Answer<O> = ContentOf<ResponsesOf<O>[Extract<keyof ResponsesOf<O>, Success>]>;

/** What a call of operation O sends beside its path and method. */
export type RequestOptions<O> = {
  query?: QueryParams<O>;
  /** The JSON body. */
  body?: JsonBody<O>;
  /** A markdown body, for the operations that take one (putMemory, putIndex). */
  markdown?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
} & (PathParams<O> extends undefined ? { path?: undefined } : { path: PathParams<O> });

/** The arguments after the path: required when the operation has path parameters. */
export type Args<O> = PathParams<O> extends undefined ? [options?: RequestOptions<O>] : [options: RequestOptions<O>];

/** An error answer: Mnemos's `{"error": {"code", "message"}}`, or the model proxy's Messages API error. */
export class MnemosError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The stable error code ("not_found", "too_large", …); the error type for the model proxy; "" when the body was no error body. */
  readonly code: string;
  /** Retry-After in seconds, or undefined without one. */
  readonly retryAfter: number | undefined;
  /** The decoded body, or its text when it was not JSON. */
  readonly body: unknown;

  constructor(status: number, code: string, message: string, retryAfter: number | undefined, body: unknown) {
    super(code === "" ? `mnemos: ${status}: ${message}` : `mnemos: ${status} ${code}: ${message}`);
    this.name = "MnemosError";
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
    this.body = body;
  }
}

/** How to reach a Mnemos server. */
export interface ClientOptions {
  /** The server's base URL ("http://localhost:8080"). */
  baseUrl: string;
  /** The tenant's API key, sent as its bearer token. */
  apiKey?: string;
  /** The fetch to send with (default: the global one). */
  fetch?: typeof fetch;
}

/** A client of one Mnemos server with one API key (which names the tenant). */
export class Client {
  readonly #base: string;
  readonly #key: string | undefined;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    this.#base = options.baseUrl.replace(/\/+$/, "");
    this.#key = options.apiKey;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** GET path. */
  get<P extends PathsOf<"get">>(path: P, ...args: Args<Operation<P, "get">>): Promise<Answer<Operation<P, "get">>> {
    return this.#send("GET", path, untyped(args[0]));
  }

  /** POST path. */
  post<P extends PathsOf<"post">>(path: P, ...args: Args<Operation<P, "post">>): Promise<Answer<Operation<P, "post">>> {
    return this.#send("POST", path, untyped(args[0]));
  }

  /** PUT path. */
  put<P extends PathsOf<"put">>(path: P, ...args: Args<Operation<P, "put">>): Promise<Answer<Operation<P, "put">>> {
    return this.#send("PUT", path, untyped(args[0]));
  }

  /** PATCH path. */
  patch<P extends PathsOf<"patch">>(path: P, ...args: Args<Operation<P, "patch">>): Promise<Answer<Operation<P, "patch">>> {
    return this.#send("PATCH", path, untyped(args[0]));
  }

  /** DELETE path. */
  delete<P extends PathsOf<"delete">>(path: P, ...args: Args<Operation<P, "delete">>): Promise<Answer<Operation<P, "delete">>> {
    return this.#send("DELETE", path, untyped(args[0]));
  }

  async #send<T>(method: string, template: string, options: SendOptions | undefined): Promise<T> {
    const url = this.#base + fillPath(template, options?.path) + queryString(options?.query);
    const headers: Record<string, string> = { Accept: "application/json", ...options?.headers };
    if (this.#key !== undefined) {
      headers["Authorization"] = `Bearer ${this.#key}`;
    }
    let body: string | undefined;
    if (options?.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.body);
    } else if (options?.markdown !== undefined) {
      headers["Content-Type"] = "text/markdown";
      body = options.markdown;
    }
    const res = await this.#fetch(url, { method, headers, body, signal: options?.signal });
    const text = await res.text();
    const json = (res.headers.get("Content-Type") ?? "").startsWith("application/json");
    if (!res.ok) {
      throw errorOf(res, text, json);
    }
    return (json ? JSON.parse(text) : text) as T;
  }
}

/**
 * untyped is a call's options as #send reads them: the per-operation types
 * have been checked at the call, and generic ones do not narrow to these.
 */
function untyped(options: unknown): SendOptions | undefined {
  return options as SendOptions | undefined;
}

/** The options #send reads, whatever the operation. */
interface SendOptions {
  path?: Record<string, string | number>;
  query?: Record<string, unknown>;
  body?: unknown;
  markdown?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** fillPath puts each {parameter} of template, escaped as one segment. */
function fillPath(template: string, params: Record<string, string | number> | undefined): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = params?.[name];
    if (v === undefined) {
      throw new TypeError(`mnemos: ${template} needs the path parameter ${name}`);
    }
    return encodeURIComponent(String(v));
  });
}

/** queryString is "?a=1&b=2" of the parameters set, or "". */
function queryString(query: Record<string, unknown> | undefined): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) {
      q.append(k, String(one));
    }
  }
  const s = q.toString();
  return s === "" ? "" : `?${s}`;
}

/** errorOf makes the MnemosError of an error answer. */
function errorOf(res: Response, text: string, json: boolean): MnemosError {
  const after = Number.parseInt(res.headers.get("Retry-After") ?? "", 10);
  const retryAfter = Number.isNaN(after) ? undefined : after;
  if (json) {
    const body = JSON.parse(text) as unknown;
    const e = (body as { error?: { code?: unknown; type?: unknown; message?: unknown } }).error;
    const code = typeof e?.code === "string" ? e.code : typeof e?.type === "string" ? e.type : "";
    const message = typeof e?.message === "string" ? e.message : text;
    return new MnemosError(res.status, code, message, retryAfter, body);
  }
  return new MnemosError(res.status, "", text.trim() === "" ? "(empty body)" : text.trim().slice(0, 2000), retryAfter, text);
}
