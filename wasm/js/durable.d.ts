import type { Decision, Headers, KeptAdmission, RuleOptions } from "./index.js";

export type { RuleOptions };

/**
 * A Durable Object namespace binding of `PorteroShard` (`env.LIMITER`): what
 * `EdgeLimiter` calls on it. Cloudflare's `DurableObjectNamespace` is one.
 */
export interface ShardNamespace {
  idFromName(name: string): unknown;
  get(id: unknown): unknown;
}

/** How an object keeps a rule's keys (checked where given, and again by the object). */
export interface ShardSettings {
  /** Keys one shard holds at most: a whole number from 1 to 250,000. Default 10,000. */
  maxKeys?: number;
  /** "confirmed" (default): answers wait for the storage write; "fast": they do not. */
  durability?: "confirmed" | "fast";
  /** How often (ms) the alarm drops idle keys: a whole number, at least 1. Default 60,000. */
  sweepMs?: number;
}

/** The options of `PorteroShard.checkMany`. */
export interface ShardOptions extends ShardSettings {
  rule: RuleOptions;
  /** The caller's shard count (1 to 1024); one unlike the count this object holds the rule's keys under throws. */
  shards?: number;
}

/**
 * Leases: a check that reaches a shard borrows up to `batch` units of its key (charged
 * there at once), and the limiter admits later checks of the key from them without a
 * call until they run out or `lifetimeMs` after the call was sent. Each limiter holds
 * at most `batch - 1` unspent units of a key, so across `I` leasing limiters of a rule
 * (one per isolate, built once) no span of time admits more than the rule does in it
 * plus `I × (batch - 1)`, nor more than the rule does in it lengthened by
 * `lifetimeMs`; a batch of 1 is exact. A check that costs more than a lease holds
 * spends what it holds and asks the shard for the rest (the held units count as spent
 * when that call is sent, so the second bound lengthens by one call's latency); a
 * full table of leases
 * (`localKeys`) takes no new one until one ends, so a flood of new keys cannot push out
 * a live lease. A lease that leaves the table with units unspent (ended, replaced)
 * gives them back to its shard off the path, by the refund rule; a limiter that ends
 * mid-lease loses at most `batch - 1` per key. A settlement gives a request's unused
 * units back to its lease while that lease lives, else to the shard.
 */
export interface LeaseOptions {
  /** Units a lease takes at most: a whole number from 1 to the rule's capacity. */
  batch: number;
  /** How long (ms) a lease may be spent, from when its call was sent (this isolate's clock): 1 ms to a day. */
  lifetimeMs: number;
  /**
   * Fetch the next lease off the request's path once the one held is down to half its
   * batch (given to the check's `ctx.waitUntil`), so a key this isolate keeps using
   * waits on no round trip; it takes over when the one held ends. A limiter then holds
   * up to `2 × batch - 1` units of a key, and the first bound becomes the rule's plus
   * `I × (2 × batch - 1)`. A key the shard last found at its limit is refused locally
   * (`retryAfterMs` 1000) while none of it is held, its next lease asked for off the
   * path: up to one round trip of refusals after room came back. Default false.
   */
  prefetch?: boolean;
}

/** What a check may be given of its fetch handler: `waitUntil`, which keeps a lease fetched ahead alive past the response. */
export interface CheckContext {
  waitUntil(promise: Promise<unknown>): void;
}

/** The options of `new EdgeLimiter(...)`. */
export interface EdgeLimiterOptions extends ShardSettings {
  namespace: ShardNamespace;
  rule: RuleOptions;
  /** Shards the keys are spread over: a whole number from 1 to 1024. Default 16; one count per rule. */
  shards?: number;
  /** Keys this isolate's own count holds (it evicts); also the most keys it holds leases for. Default 10,000. */
  localKeys?: number;
  /** Answer from leased units (see `LeaseOptions`); off by default (every admission is a call). */
  lease?: LeaseOptions;
}

/**
 * A check sent to a shard: `[key, cost, lease]`; the cost defaults to 1, `lease` (the
 * most units to take when the cost is admitted: a lease request) to the cost.
 */
export type Check = readonly [key: string, cost?: number, lease?: number];

/** A settlement sent to a shard: `[key, admission or null, real cost]`. */
export type Settlement = readonly [key: string, admission: ShardAdmission | null, real: number];

/**
 * An admission `PorteroShard.checkMany` returned: keep every field, the word's
 * `generation` included (a settlement without it is refused with an error).
 */
export interface ShardAdmission extends KeptAdmission {
  /** Which word took the units: a key dropped idle and made again is another word. */
  generation: number;
}

/** A check of `EdgeLimiter`: `[key, cost]`, the cost 1 if left out (its leases are its own). */
export type EdgeCheck = readonly [key: string, cost?: number];

export interface ShardStats {
  checks: number;
  batches: number;
  keys: number;
}

/** The Durable Object: the exact state of one shard of keys. Export it from your Worker. */
export declare class PorteroShard {
  constructor(ctx: unknown, env: unknown);
  /** Decides the checks in order; throws (deciding none) if any is bad. An admission carries what settles it. */
  checkMany(options: ShardOptions, checks: readonly Check[]): Promise<(Decision & { tableFull?: boolean; granted?: number; admission?: ShardAdmission })[]>;
  /**
   * Settles `[key, admission, real]` in order (an admission `checkMany` returned, or
   * null to charge `real` units now): how each key stands for one unit. Throws
   * (changing nothing) if any is bad.
   */
  settleMany(options: ShardOptions, settlements: readonly Settlement[]): Promise<(Decision & { tableFull?: boolean })[]>;
  alarm(): Promise<void>;
  stats(): Promise<ShardStats>;
}

/**
 * A decision from `EdgeLimiter`, and who gave it: `"shard"` (the object decided),
 * `"local"` (a refusal this isolate knew the object would give) or `"lease"` (admitted
 * from this isolate's lease: `remaining` is what the lease still holds, `resetAfterMs`
 * when the object said the key is full again, `retryAfterMs` 0). A shard's admission
 * that granted a lease counts the units this isolate now holds in `remaining`.
 */
export type EdgeDecision = Decision & { tableFull?: boolean; servedBy: "local" | "shard" | "lease" };

/** The Worker-side client: exact limits through `PorteroShard`, local refusals first. */
export declare class EdgeLimiter {
  constructor(options: EdgeLimiterOptions);
  /** Calls made to shards by this isolate. */
  calls: number;
  /** `now` (default `Date.now()`) is checked as a time; the local stages and leases run on this isolate's clock. */
  check(key: string, now?: number, cost?: number, ctx?: CheckContext): Promise<EdgeDecision>;
  /** One call per shard needed; throws (sending nothing) if any check is bad. */
  checkMany(checks: readonly EdgeCheck[], now?: number, ctx?: CheckContext): Promise<EdgeDecision[]>;
  /**
   * Settles a decision `check` admitted (once) at its real cost: units not used go back
   * to their lease while it lives (no call), else to the shard by the refund rule;
   * units above the estimate come from this isolate's lease, the rest is charged by the
   * shard past the limit. How the key stands afterwards.
   */
  settle(decision: EdgeDecision, real: number): Promise<EdgeDecision>;
  headers(decision: Decision, policy?: string): Headers;
  shardStats(key: string): Promise<ShardStats>;
  /** Units of `key` this isolate holds at `now`: its lease's and one fetched ahead (0 without one). */
  leasedUnits(key: string, now?: number): number;
}
