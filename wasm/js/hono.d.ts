import type { CommonOptions, Refused } from "./middleware.js";

type Context = any;

export interface Options extends CommonOptions {
  /** The key of a request (default: the client's address where the runtime tells it). */
  keyGenerator?: (c: Context) => string | Promise<string>;
  /** Requests that are not limited. */
  skip?: (c: Context) => boolean | Promise<boolean>;
  /** Answers a refused request in place of the 429 (the fields are added to its response). */
  handler?: (c: Context, refused: Refused) => Response | Promise<Response>;
  /** The units a request costs (default 1). */
  cost?: (c: Context) => number | Promise<number>;
  /** Whether a response counts as successful (default: status below 400; any truthy answer is a success). */
  requestWasSuccessful?: (c: Context) => unknown | Promise<unknown>;
  /** The request's real cost once the response's body was read to its end (undefined: its estimate). */
  settle?: (c: Context) => number | undefined | Promise<number | undefined>;
  /**
   * Exact across isolates: the `PorteroShard` Durable Object namespace binding of a
   * request (e.g. `(c) => c.env.LIMITER`), decided by `portero/durable`'s `EdgeLimiter`.
   */
  shard?: (c: Context) => unknown;
  /** With `shard`: how many objects share the keys (default 16). */
  shards?: number;
  /** With `shard`: leases of `batch` units spent in the isolate for `lifetimeMs` (see `EdgeLimiter`). */
  lease?: { batch: number; lifetimeMs: number; prefetch?: boolean };
}

/** The middleware. The handler reads the decision as `c.get("rateLimit")`. */
export function rateLimiter(options?: Options): (c: Context, next: () => Promise<void>) => Promise<Response | void>;
export default rateLimiter;
