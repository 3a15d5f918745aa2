/**
 * What every limiter answers: a new plain object for each call (own data fields,
 * `Object.prototype`), copied out of the module, so a decision kept is never changed
 * by later checks.
 */
export interface Decision {
  /** Whether the request may pass. */
  allowed: boolean;
  /** The most units admitted at once (burst, or the window's limit). */
  limit: number;
  /** Whole units left after this decision. */
  remaining: number;
  /** Milliseconds (rounded up) until this request would be admitted; 0 when it was. */
  retryAfterMs: number;
  /** Milliseconds (rounded up) until the limiter is full again. */
  resetAfterMs: number;
}

export interface KeyedDecision extends Decision {
  /** Refused because the key table is full of active keys (and `evict` is off). */
  tableFull: boolean;
}

/**
 * A rate, spelled one of four ways (index.js reads the first present of perSecond,
 * perMinute, perHour, then limit with periodMs; a rate missing or not a number
 * throws), and the capacity, which defaults to the limit.
 */
export type QuotaOptions = (
  | { perSecond: number }
  | { perMinute: number }
  | { perHour: number }
  | { limit: number; periodMs: number }
) & {
  /** Bucket capacity (alias of burst). Defaults to the limit. */
  capacity?: number;
  burst?: number;
};

/** The algorithms' names, as the Rust core spells them (checked by the tests). */
export type AlgorithmName = "gcra" | "token-bucket" | "fixed-window" | "sliding-window-counter" | "leaky-meter";

/** The names `KeyedLimiter` accepts, from the module (after `initSync` or `init`). */
export function algorithms(): AlgorithmName[];

export type KeyedOptions = QuotaOptions & {
  algorithm?: AlgorithmName;
  /** Most keys held at once (memory is fixed at creation, ≈ 31 bytes a key). Default
   * 100,000; a whole number from 1 to 1,048,576. */
  maxKeys?: number;
  /** Evict the key closest to full instead of refusing new keys when full. */
  evict?: boolean;
};

/** What `new Rule(...)` (and a Durable Object's `rule`) takes: a quota and an algorithm. */
export type RuleOptions = QuotaOptions & { algorithm?: AlgorithmName };

/** `rateLimitHeaders`' description of the quota: `policy` is a structured-field token. */
export interface HeaderOptions {
  policy?: string;
  /** Units per window: a whole number. */
  quota: number;
  /** The window in whole seconds, at least 1. */
  windowSeconds: number;
}

export type Headers = Record<string, string>;

export function initSync(module: WebAssembly.Module | BufferSource): void;
export function init(input?: WebAssembly.Module | BufferSource | URL | string | Response): Promise<void>;
/** Whether the module is instantiated (`initSync` or `init` ran). */
export function isReady(): boolean;
export function rateLimitHeaders(decision: Decision, options: HeaderOptions): Headers;
/** `rateLimitHeaders` with its options checked once: a function of a decision of the package's own limiters. */
export function rateLimitFields(options: HeaderOptions): (decision: Decision) => Headers;

declare class Single {
  check(now: number, cost?: number): Decision;
  peek(now: number, cost?: number): Decision;
  /** `check` without a decision object: whether it was admitted. */
  allow(now: number, cost?: number): boolean;
  reset(): void;
  headers(decision: Decision, policy?: string): Headers;
}
export class Gcra extends Single {
  constructor(options: QuotaOptions);
}
export class TokenBucket extends Single {
  constructor(options: QuotaOptions);
}
export class FixedWindow extends Single {
  constructor(options: QuotaOptions);
}
export class SlidingWindowCounter extends Single {
  constructor(options: QuotaOptions);
}
export class LeakyMeter extends Single {
  constructor(options: QuotaOptions);
}
export class KeyedLimiter {
  constructor(options: KeyedOptions);
  check(key: string, now: number, cost?: number): KeyedDecision;
  /** `check` without a decision object: whether `key` was admitted. */
  allow(key: string, now: number, cost?: number): boolean;
  /**
   * `check`, keeping what an admission took for `settle`: `admission` null when
   * refused (nothing taken).
   */
  acquire(key: string, now: number, cost?: number): { decision: KeyedDecision; admission: KeyedAdmission | null };
  /**
   * Moves `admission` to its real cost `real` at `now` (units not used back by
   * portero's refund rule, units above the estimate charged into debt). Settles once;
   * false for one already settled or too old (of the last 65,536 no longer).
   */
  settle(admission: KeyedAdmission, real: number, now: number): boolean;
  peek(key: string, now: number, cost?: number): KeyedDecision;
  reset(key: string): void;
  sweep(now: number): number;
  readonly size: number;
  headers(decision: Decision, policy?: string): Headers;
}

/** What a `KeyedLimiter`'s `acquire` took, to `settle` once. */
export interface KeyedAdmission {
  readonly handle: number;
}

/** An algorithm and quota without state: you keep each key's state (a BigInt). */
export declare class Rule {
  constructor(options: RuleOptions);
  /** The state of a key that has used nothing. */
  readonly initialState: bigint;
  /** The algorithm and quota, however the options spelled them. */
  readonly quota: Readonly<{ algorithm: AlgorithmName; limit: number; periodMs: number; burst: number }>;
  /** `[decision, nextState]`; `take: false` peeks. */
  decide(state: bigint, now: number, cost?: number, take?: boolean): [Decision, bigint];
  /**
   * Settles an admission at its real cost `real` at `now` (units not used back by the
   * refund rule, units above the estimate charged into debt); `admission` null charges
   * `real` units. Returns how the key stands for one unit, and the word to keep.
   */
  settle(word: KeptWord, admission: KeptAdmission | null, real: number, now: number): [Decision, KeptWord];
  headers(decision: Decision, policy?: string): Headers;
}

/**
 * A key's state, its refund ledger and where its settlements gave back from (start at
 * `{ state: rule.initialState, ledger: 0n, places: "" }`; keep all three together).
 * Without `places`, settlements give back by the ledger alone: out of order, some
 * units stay kept. All three are trusted, as portero wrote them: a state, ledger or
 * places made up can give back more (places claiming more than the ledger moved are
 * not read).
 */
export interface KeptWord {
  state: bigint;
  ledger: bigint;
  /** portero's text: `start:end:given` runs in lowercase hex, comma-separated. */
  places?: string;
}

/** An admission as recorded when it was admitted: its time (ms), units, the states it found and left, the ledger then. */
export interface KeptAdmission {
  at: number;
  cost: number;
  before: bigint;
  after: bigint;
  noted: bigint;
}
