// One exact limit across every isolate and location of a Worker: a Durable Object holds
// the state of a shard of keys (one single-threaded instance per shard name, reachable
// from every isolate), and a Worker-side client that answers what it can locally first.
//
// Export `PorteroShard` from your Worker and bind it as a Durable Object namespace; use
// `EdgeLimiter` in the fetch handler (see the README's "The edge, exact").
//
// Durability. Each batch of checks changes some keys' states; they are written with one
// `storage.put` per batch, never awaited by the check. With `durability: "confirmed"`
// (the default) the runtime's output gate holds every answer until that write is on
// disk, so a crash loses nothing that was answered: a restarted object admits no one
// twice. With `durability: "fast"` the answer leaves before the write is confirmed
// (`allowUnconfirmed`): a crash can lose the admissions of the writes still in flight
// (the last few milliseconds), and a restarted object may admit those units again.
// Idle keys (full again) are dropped by an alarm (every `sweepMs`, default a minute),
// from memory and from storage.
import { DurableObject } from "cloudflare:workers";
import { KeyedLimiter, Rule } from "./index.js";

const STATE = "k:"; // k:<rule id>:<key> -> state (a decimal string)
const RULE = "r:"; // r:<rule id> -> the rule's options (JSON)
const SWEEP_MS = 60_000;

/** The Durable Object: the exact state of one shard of keys. */
export class PorteroShard extends DurableObject {
  #states = new Map(); // "<rule id>:<key>" -> BigInt state
  #rules = new Map(); // rule id -> Rule
  #stats = { checks: 0, batches: 0 };
  #sweepMs = SWEEP_MS;
  #alarmAt = null; // when the sweep alarm is set for (kept here: no storage read per check)

  constructor(ctx, env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      for (const [k, v] of await ctx.storage.list({ prefix: RULE })) {
        this.#rules.set(k.slice(RULE.length), new Rule(JSON.parse(v)));
      }
      for (const [k, v] of await ctx.storage.list({ prefix: STATE })) {
        this.#states.set(k.slice(STATE.length), BigInt(v));
      }
      this.#alarmAt = await ctx.storage.getAlarm();
    });
  }

  // The rule for `options`, under a short id that keys its states: one key checked under
  // two rules (two quotas) has two states, never one.
  #rule(options) {
    const json = JSON.stringify(options);
    const id = hash(json).toString(36);
    if (!this.#rules.has(id)) {
      this.#rules.set(id, new Rule(options));
      this.ctx.storage.put(RULE + id, json);
    }
    return [id, this.#rules.get(id)];
  }

  /**
   * Decides a batch of `[key, cost]` checks under one rule, in order, on this object's
   * clock. Returns one decision per check (`tableFull` when the shard holds `maxKeys`
   * active keys and the key is new).
   */
  async checkMany(options, checks) {
    const [id, rule] = this.#rule(options.rule);
    const maxKeys = options.maxKeys ?? 10_000;
    const now = Date.now();
    const changed = {};
    let dirty = false;
    const out = checks.map(([key, cost]) => {
      const slot = `${id}:${key}`;
      const state = this.#states.get(slot);
      if (state === undefined && this.#states.size >= maxKeys && !this.#dropIdle(now)) {
        return { allowed: false, tableFull: true, limit: 0, remaining: 0, retryAfterMs: 1000, resetAfterMs: 0 };
      }
      const before = state ?? rule.initialState;
      const [decision, next] = rule.decide(before, now, cost);
      if (next !== before) {
        this.#states.set(slot, next);
        changed[STATE + slot] = next.toString();
        dirty = true;
      }
      return decision;
    });
    this.#stats.checks += checks.length;
    this.#stats.batches += 1;
    if (dirty) {
      this.ctx.storage.put(changed, { allowUnconfirmed: options.durability === "fast" });
      // The shortest sweep any caller asked for.
      this.#sweepMs = Math.min(this.#sweepMs, options.sweepMs ?? SWEEP_MS);
      if (this.#alarmAt === null || this.#alarmAt > now + this.#sweepMs) {
        this.#alarmAt = now + this.#sweepMs;
        await this.ctx.storage.setAlarm(this.#alarmAt);
      }
    }
    return out;
  }

  #idle(slot, state, now) {
    const rule = this.#rules.get(slot.slice(0, slot.indexOf(":")));
    return rule !== undefined && rule.decide(state, now, 0, false)[0].resetAfterMs === 0;
  }

  // Drops one key that is full again (it carries no information), to make room.
  #dropIdle(now) {
    for (const [slot, state] of this.#states) {
      if (this.#idle(slot, state, now)) {
        this.#states.delete(slot);
        this.ctx.storage.delete(STATE + slot);
        return true;
      }
    }
    return false;
  }

  /** Drops every idle key; runs again while any key is held. */
  async alarm() {
    const now = Date.now();
    const gone = [...this.#states].filter(([slot, state]) => this.#idle(slot, state, now));
    for (const [slot] of gone) this.#states.delete(slot);
    if (gone.length > 0) await this.ctx.storage.delete(gone.map(([slot]) => STATE + slot));
    this.#alarmAt = null;
    if (this.#states.size > 0) {
      this.#alarmAt = now + this.#sweepMs;
      await this.ctx.storage.setAlarm(this.#alarmAt);
    }
  }

  /** Checks answered and batches received since this object started (for tests). */
  async stats() {
    return { ...this.#stats, keys: this.#states.size };
  }
}

// FNV-1a over a string's UTF-16 units.
function hash(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

// Spreads keys over shards (load only: every shard decides exactly).
function shardOf(key, shards) {
  return hash(key) % shards;
}

/**
 * The Worker-side client: an exact limit per key through `PorteroShard` objects, with
 * two local stages that only ever refuse (so they never change who is admitted):
 *
 * 1. this isolate's own count of what the shards admitted for the key (a subset of all
 *    admissions): once that alone fills the limit, the shard would refuse too;
 * 2. the last refusal a shard gave the key, until its retry-after ends.
 *
 * `checkMany` sends the checks of one request that land on one shard in one call.
 * Checks of different requests cannot share a call: the Workers runtime ties every
 * call and promise to the request that made it (a request waiting on another
 * request's call is cancelled as hung), so batching stops at the request.
 */
export class EdgeLimiter {
  #namespace;
  #options;
  #shards;
  #local;
  #refusedUntil = new Map();
  /** Calls made to shards by this isolate (for tests and metrics). */
  calls = 0;

  constructor({
    namespace,
    rule,
    shards = 16,
    maxKeys = 10_000,
    durability = "confirmed",
    localKeys = 10_000,
    sweepMs = 60_000,
  }) {
    if (!namespace || typeof namespace.idFromName !== "function") fail("namespace must be a Durable Object namespace binding");
    if (!(Number.isInteger(shards) && shards >= 1 && shards <= 1024)) fail(`shards must be a whole number from 1 to 1024, got ${shards}`);
    if (durability !== "confirmed" && durability !== "fast") fail(`durability must be "confirmed" or "fast", got ${durability}`);
    new Rule(rule); // validates the rule here, not in the object
    this.#namespace = namespace;
    if (!(Number.isInteger(sweepMs) && sweepMs >= 1)) fail(`sweepMs must be a whole number of at least 1, got ${sweepMs}`);
    this.#options = { rule, maxKeys, durability, sweepMs };
    this.#shards = shards;
    this.#local = new KeyedLimiter({ ...rule, maxKeys: localKeys, evict: true });
  }

  /** Checks `cost` units (default 1) of `key`; `now` is read once per request. */
  async check(key, now = Date.now(), cost = 1) {
    return (await this.checkMany([[key, cost]], now))[0];
  }

  /**
   * Checks several `[key, cost]` pairs of one request (each decided on its own), one
   * call per shard that any of them needs.
   */
  async checkMany(checks, now = Date.now()) {
    const out = new Array(checks.length);
    const byShard = new Map();
    checks.forEach(([key, cost = 1], i) => {
      if (typeof key !== "string") fail(`key must be a string, got ${typeof key}`);
      const answer = this.#answerLocally(key, now, cost);
      if (answer !== null) {
        out[i] = answer;
        return;
      }
      const shard = shardOf(key, this.#shards);
      if (!byShard.has(shard)) byShard.set(shard, []);
      byShard.get(shard).push(i);
    });
    await Promise.all(
      [...byShard].map(async ([shard, indices]) => {
        this.calls += 1;
        const batch = indices.map((i) => [checks[i][0], checks[i][1] ?? 1]);
        const decisions = await this.#stub(shard).checkMany(this.#options, batch);
        decisions.forEach((d, j) => {
          const [key, cost] = batch[j];
          this.#learn(key, now, cost, d);
          out[indices[j]] = { ...d, servedBy: "shard" };
        });
      }),
    );
    return out;
  }

  /** `rateLimitHeaders` with the rule's quota. */
  headers(decision, policy = "default") {
    return this.#local.headers(decision, policy);
  }

  /** The statistics of the shard that holds `key` (one call to it). */
  shardStats(key) {
    return this.#stub(shardOf(key, this.#shards)).stats();
  }

  #stub(shard) {
    return this.#namespace.get(this.#namespace.idFromName(`portero-shard-${shard}`));
  }

  // A refusal this isolate can give without asking (never an admission), or null.
  #answerLocally(key, now, cost) {
    const until = this.#refusedUntil.get(key);
    if (until !== undefined) {
      if (now < until) return local({ allowed: false, retryAfterMs: until - now });
      this.#refusedUntil.delete(key);
    }
    const mine = this.#local.peek(key, now, cost);
    return mine.allowed ? null : local(mine);
  }

  #learn(key, now, cost, decision) {
    if (decision.allowed) {
      this.#local.check(key, now, cost); // what this isolate was admitted: a subset
    } else if (!decision.tableFull) {
      if (this.#refusedUntil.size >= 10_000) this.#refusedUntil.clear();
      this.#refusedUntil.set(key, now + decision.retryAfterMs);
    }
  }
}

function local(decision) {
  return {
    allowed: false,
    limit: decision.limit ?? 0,
    remaining: 0,
    retryAfterMs: decision.retryAfterMs,
    resetAfterMs: decision.resetAfterMs ?? decision.retryAfterMs,
    servedBy: "local",
  };
}

function fail(message) {
  throw new Error(`portero: ${message}`);
}
