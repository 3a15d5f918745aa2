import type { Decision } from "./index.js";

/** Options of `new Rule(...)`: a quota and an algorithm name. */
export type RuleOptions = Record<string, unknown>;

/** The Durable Object: the exact state of one shard of keys. Export it from your Worker. */
export declare class PorteroShard {
  constructor(ctx: unknown, env: unknown);
  /** Decides the checks in order; throws (deciding none) if any is bad. */
  checkMany(
    options: {
      rule: RuleOptions;
      maxKeys?: number;
      durability?: "confirmed" | "fast";
      sweepMs?: number;
      /** The caller's shard count; one unlike the count this object holds the rule's keys under throws. */
      shards?: number;
    },
    checks: [string, number?][],
  ): Promise<(Decision & { tableFull?: boolean })[]>;
  alarm(): Promise<void>;
  stats(): Promise<{ checks: number; batches: number; keys: number }>;
}

/** A decision from `EdgeLimiter`, and who gave it. */
export type EdgeDecision = Decision & { tableFull?: boolean; servedBy: "local" | "shard" };

/** The Worker-side client: exact limits through `PorteroShard`, local refusals first. */
export declare class EdgeLimiter {
  constructor(options: {
    namespace: unknown;
    rule: RuleOptions;
    shards?: number;
    maxKeys?: number;
    durability?: "confirmed" | "fast";
    localKeys?: number;
    sweepMs?: number;
  });
  /** Calls made to shards by this isolate. */
  calls: number;
  check(key: string, now?: number, cost?: number): Promise<EdgeDecision>;
  /** One call per shard needed; throws (sending nothing) if any check is bad. */
  checkMany(checks: [string, number?][], now?: number): Promise<EdgeDecision[]>;
  headers(decision: Decision, policy?: string): Record<string, string>;
  shardStats(key: string): Promise<{ checks: number; batches: number; keys: number }>;
}
