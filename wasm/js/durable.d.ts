import type { Decision, Headers, RuleOptions } from "./index.js";

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

/** The options of `new EdgeLimiter(...)`. */
export interface EdgeLimiterOptions extends ShardSettings {
  namespace: ShardNamespace;
  rule: RuleOptions;
  /** Shards the keys are spread over: a whole number from 1 to 1024. Default 16; one count per rule. */
  shards?: number;
  /** Keys this isolate's own count holds (it evicts). Default 10,000. */
  localKeys?: number;
}

/** `[key, cost]`; the cost defaults to 1. */
export type Check = readonly [key: string, cost?: number];

export interface ShardStats {
  checks: number;
  batches: number;
  keys: number;
}

/** The Durable Object: the exact state of one shard of keys. Export it from your Worker. */
export declare class PorteroShard {
  constructor(ctx: unknown, env: unknown);
  /** Decides the checks in order; throws (deciding none) if any is bad. */
  checkMany(options: ShardOptions, checks: readonly Check[]): Promise<(Decision & { tableFull?: boolean })[]>;
  alarm(): Promise<void>;
  stats(): Promise<ShardStats>;
}

/** A decision from `EdgeLimiter`, and who gave it. */
export type EdgeDecision = Decision & { tableFull?: boolean; servedBy: "local" | "shard" };

/** The Worker-side client: exact limits through `PorteroShard`, local refusals first. */
export declare class EdgeLimiter {
  constructor(options: EdgeLimiterOptions);
  /** Calls made to shards by this isolate. */
  calls: number;
  check(key: string, now?: number, cost?: number): Promise<EdgeDecision>;
  /** One call per shard needed; throws (sending nothing) if any check is bad. */
  checkMany(checks: readonly Check[], now?: number): Promise<EdgeDecision[]>;
  headers(decision: Decision, policy?: string): Headers;
  shardStats(key: string): Promise<ShardStats>;
}
