import type { Decision } from "./index.js";

/** The options both middleware take (named as express-rate-limit names them). */
export interface CommonOptions {
  /** The window the limit is counted in, in ms (default 60,000). */
  windowMs?: number;
  /** Requests a window admits (default 5). */
  limit?: number;
  /** Requests admitted at once (default `limit`). */
  burst?: number;
  /** The algorithm (default "gcra"; "fixed-window" counts as express-rate-limit does). */
  algorithm?: string;
  /** Keys the table holds (default 100,000): a flood of keys cannot grow it. */
  maxKeys?: number;
  /** Make room for a new key in a full table by dropping the one soonest full again. */
  evict?: boolean;
  /** The policy's name in the `RateLimit` fields (a structured-field token). */
  policy?: string;
  /** The IETF `RateLimit` and `RateLimit-Policy` fields (default "draft-8"; false: none). */
  standardHeaders?: boolean | "draft-8";
  /** `X-RateLimit-Limit`, `-Remaining`, `-Reset` (epoch seconds) too (default false). */
  legacyHeaders?: boolean;
  /** The status of a refusal (default 429). */
  statusCode?: number;
  /** The body of a refusal: text, or an object sent as JSON (default `{ error: "rate limit exceeded" }`). */
  message?: string | object;
  /** Give back the units of a request whose response failed (status 400 or more by default). */
  skipFailedRequests?: boolean;
  /** Give back the units of a request whose response succeeded (only failures count: failed logins). */
  skipSuccessfulRequests?: boolean;
  /** The units a failed request costs in place of its own (a penalty). */
  penalty?: number;
  /** A successful response clears its key (a good login forgets the failed ones). */
  resetOnSuccess?: boolean;
  /**
   * One limit for several Node processes, in Redis, through your client:
   * `sendCommand: (...args) => client.sendCommand(args)` (node-redis) or
   * `(command, ...args) => client.call(command, ...args)` (ioredis). portero-redis's own
   * script and keys: Rust and Node instances with the same quota and prefix share it.
   * GCRA only; `whenDown` "closed" (503, the default) or "open" after `timeoutMs` (50).
   */
  redis?: {
    sendCommand: (...args: string[]) => Promise<unknown>;
    prefix?: string;
    timeoutMs?: number;
    whenDown?: "open" | "closed";
  };
  /** The module, for runtimes where the middleware cannot load it itself (Workers). */
  wasm?: WebAssembly.Module | BufferSource;
}

/** What a custom handler is told about the refusal. */
export interface Refused {
  decision: Decision;
  statusCode: number;
}
