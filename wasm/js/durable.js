// One exact limit across every isolate and location of a Worker: a Durable Object holds
// the state of a shard of keys (one single-threaded instance per shard name, reachable
// from every isolate), and a Worker-side client that answers what it can locally first.
//
// Export `PorteroShard` from your Worker and bind it as a Durable Object namespace; use
// `EdgeLimiter` in the fetch handler. The bounds both keep (exactness, rule identity,
// local answers, durability, keys, work per check, bad input) are listed once, with
// what tests each, in `wasm/README.md`'s "The edge, exact".
import { KeyedLimiter, Rule } from "./index.js";
import { fail, shown } from "./errors.js";
import { Leases, leaseOf } from "./lease.js";
import { owedFor } from "./settle.js";
import { keyOf, shardOf, settingsOf, pairsOf, NOW_PROBE, SWEEP_MS } from "./keys.js";

export { PorteroShard } from "./shard.js";

const REMEMBERED = 10_000; // refusals an isolate remembers
// What a refusal of a key at its limit, while its next lease is on its way, tells the
// client: come back in a second (the Retry-After field's unit).
const AT_LIMIT_RETRY_MS = 1000;

/**
 * The Worker-side client: an exact limit per key through `PorteroShard` objects, with
 * two local stages that only ever refuse, and only what the object would refuse:
 *
 * 1. this isolate's own count of what the shards admitted for the key (a subset of all
 *    admissions): once that alone refuses the cost, the shard would too;
 * 2. the last refusal a shard gave the key: a cost at least that large, until its
 *    retry-after ends.
 *
 * `checkMany` sends the checks of one request that land on one shard in one call.
 * Checks of different requests cannot share a call: the Workers runtime ties every
 * call and promise to the request that made it (a request waiting on another
 * request's call is cancelled as hung), so batching stops at the request.
 *
 * With `lease: { batch, lifetimeMs }`, a check that reaches a shard asks for up to
 * `batch` units of its key, charged there at once; this limiter admits later checks of
 * the key from them, without a call, until they run out or `lifetimeMs` after the call
 * was sent (on this isolate's clock). Each limiter holds at most `batch - 1` unspent
 * units of a key (one lease at a time, the first unit its asker's), so across `I`
 * leasing limiters of a rule (one per isolate, built once as in the example), in any
 * span of time, no more is admitted than the rule admits in that span plus
 * `I × (batch - 1)`, nor more than it admits in that span lengthened by `lifetimeMs`.
 * A batch of 1 is exact. A check that costs more than the lease holds spends what it
 * holds and asks the shard for the rest (given back to the lease if refused; spent when
 * the call is sent, so such a check's held units can be used up to one call's latency
 * after the lease's end, which lengthens the second bound by that latency); a full
 * table of leases (`localKeys`) takes no new lease until one ends, so a flood of new
 * keys asks for its cost alone and cannot push out a live lease. A lease that leaves a
 * live isolate's table with units unspent (ended, replaced, fetched ahead with no place
 * left) gives them back to its shard off the request's path (`ctx.waitUntil`), by the
 * admission that granted it (portero's refund rule); an isolate that ends mid-lease
 * loses what it held, at most `batch - 1` a key.
 *
 * With `lease: { …, prefetch: true }`, once the lease held is down to half its batch
 * the next one is fetched off the request's path (handed to the check's
 * `ctx.waitUntil`), and takes over when the one held runs dry or ends: a key this
 * isolate keeps using waits on no round trip. A limiter then holds up to
 * `2 × batch - 1` units of a key, so the first bound becomes `I × (2 × batch - 1)`
 * (the second is unchanged), and an isolate that ends loses up to that much. And a
 * key the shard last found at its limit (a refusal, or a lease of fewer units than
 * asked) is refused here while this isolate holds none of it, and its next lease is
 * asked for off the path: a key over its limit waits on no round trip either. This
 * third local stage is the one that may refuse what the shard would admit: for at
 * most one round trip after room came back, until that lease lands; a whole lease
 * ends it. The leases themselves: `lease.js`.
 */
export class EdgeLimiter {
  #namespace;
  #options;
  #shards;
  #local;
  #rule; // the rule, checked (its decisions validate times)
  #leases; // this isolate's leases (`lease.js`), or null
  #capacity; // the rule's capacity (the limit a local refusal reports)
  #refused = new Map(); // key -> the shard's last refusal: { cost, limit, retryAt, resetAt }
  #admitted = new WeakMap(); // a decision admitted -> what settles it: { key, slot, cost, parts, shard }
  /** Calls made to shards by this isolate (for tests and metrics). */
  calls = 0;

  constructor({
    namespace,
    rule,
    shards = 16,
    maxKeys = 10_000,
    durability = "confirmed",
    localKeys = 10_000,
    sweepMs = SWEEP_MS,
    lease,
  }) {
    if (!namespace || typeof namespace.idFromName !== "function") fail("namespace must be a Durable Object namespace binding");
    const settings = settingsOf({ maxKeys, durability, sweepMs, shards });
    // Validated here, not in the object, and sent as the canonical quota.
    const checked = new Rule(rule);
    const { quota } = checked;
    this.#namespace = namespace;
    this.#rule = checked;
    this.#options = { ...settings, rule: quota };
    this.#shards = shards;
    this.#local = new KeyedLimiter({ ...quota, maxKeys: localKeys, evict: true });
    // The capacity from the rule, not from the local table: building the table draws
    // the hash seed's random numbers, which workerd refuses at module scope, where a
    // Worker builds its limiter.
    const capacity = checked.decide(checked.initialState, 0, 0, false)[0].limit;
    this.#leases = lease === undefined ? null : new Leases(leaseOf(lease, capacity), localKeys);
    this.#capacity = capacity;
  }

  /**
   * Checks `cost` units (default 1) of `key`; `now` is read once per request. `ctx`
   * (the fetch handler's, optional) keeps a lease fetched ahead alive past the
   * response: its `waitUntil` is given the call.
   */
  async check(key, now = Date.now(), cost = 1, ctx = undefined) {
    return (await this.checkMany([[key, cost]], now, ctx))[0];
  }

  /**
   * Checks several `[key, cost]` pairs of one request (each decided on its own), one
   * call per shard that any of them needs. The batch is checked whole first: a bad
   * check throws and nothing is sent.
   */
  async checkMany(checks, now = Date.now(), ctx = undefined) {
    if (typeof now !== "number") fail(`now must be a number of milliseconds, e.g. Date.now(), got ${typeof now}`);
    // The one rule for a time (finite, not negative, within the range), the module's, as
    // at every other entry point: a peek at `now` itself throws its error. (The later of
    // `now` and the clock below would otherwise turn a negative `now` into a valid one.)
    this.#local.peek(NOW_PROBE, now, 0);
    // The local stages and leases run on this isolate's own clock, whatever `now` says:
    // a `now` read long before the call would make a wait look shorter, or this
    // isolate's count look older, than the object (on its own clock) sees them, and one
    // ahead of the clock would stretch a lease, or a remembered wait, past what the
    // object gave. Only durations cross between the two clocks.
    const at = Date.now();
    // Every check's peek comes first: it validates the cost (and that it fits the
    // capacity) as the object would, before anything is sent.
    const asked = pairsOf(checks).map(([key, cost]) => {
      const slot = keyOf(key);
      return { key, cost, slot, mine: this.#local.peek(slot, at, cost) };
    });
    const out = new Array(asked.length);
    const byShard = new Map();
    asked.forEach((check, i) => {
      const { key, cost, slot } = check;
      // Units a live lease holds count toward the cost: they were charged by the shard
      // (and are in this isolate's count) already, so the local stages judge the rest.
      const leases = this.#leases;
      const rest = cost - (leases?.held(slot, at, cost) ?? 0);
      const mine = rest === cost ? check.mine : this.#local.peek(slot, at, rest);
      // A lease's units were charged by the shard already: they come first.
      const parts = [];
      const spent = leases?.spend(slot, at, cost, parts) ?? null;
      if (spent !== null) this.#admitted.set(spent, { key, slot, cost, parts, shard: null });
      if (spent !== null && leases.wantsNext(slot, at)) this.#fetchAhead(key, slot, at, ctx);
      const answer =
        spent ?? this.#remembered(slot, at, rest) ?? (mine.allowed ? null : local(mine)) ?? this.#atLimit(key, slot, at, ctx);
      if (answer !== null) {
        out[i] = answer;
        return;
      }
      // Units a live lease holds, fewer than the cost: set aside for this check, the
      // shard is asked for the rest only, and they go back to the lease if it refuses
      // (a new lease no longer replaces units still held).
      check.from = cost >= 1 ? leases?.of(slot, at) : undefined;
      check.held = check.from === undefined ? 0 : leases.setAside(check.from, at, cost);
      check.ask = cost - check.held;
      // One lease request per key in flight (a check meanwhile asks for its cost
      // alone), and a place in the table for a key that holds no lease.
      check.asked = leases !== null && cost >= 1 ? leases.ask(slot, at) : null;
      if (check.asked !== null) check.lease = Math.max(check.ask, leases.batch);
      const shard = shardOf(slot, this.#shards);
      if (!byShard.has(shard)) byShard.set(shard, []);
      byShard.get(shard).push(i);
    });
    await Promise.all(
      [...byShard].map(async ([shard, indices]) => {
        this.calls += 1;
        const batch = indices.map((i) => [asked[i].key, asked[i].ask, asked[i].lease ?? asked[i].ask]);
        let decisions;
        try {
          decisions = await this.#stub(shard).checkMany(this.#options, batch);
        } catch (e) {
          for (const i of indices) this.#leases?.putBack(asked[i]);
          throw e;
        } finally {
          for (const i of indices) {
            if (asked[i].asked) this.#leases.done(asked[i].slot, asked[i].asked);
          }
        }
        // The isolate's clock when the answer came: a lease that ended while the call
        // was on its way is counted no more.
        const answered = Date.now();
        decisions.forEach((d, j) => {
          const { ask: cost, slot, lease } = asked[indices[j]];
          const { granted, admission, ...decision } = d;
          // What the shard charged: a lease's units, or the cost.
          const took = d.allowed ? (granted ?? cost) : 0;
          this.#learn(slot, at, d.allowed ? took : cost, decision);
          // Refused: the units set aside go back to their lease, while it lives.
          if (!d.allowed) this.#leases?.putBack(asked[indices[j]]);
          // A refusal, or a lease of fewer units than asked: the key is at its limit.
          if (!d.allowed && !d.tableFull) this.#leases?.learned(slot, 1, 0);
          else if (lease !== undefined) this.#leases.learned(slot, lease - cost, took - cost);
          if (lease !== undefined && took > cost) this.#leases.keep(slot, asked[indices[j]].key, at, took - cost, { ...decision, admission });
          // The key's units left count the ones this isolate holds for it.
          if (d.allowed) decision.remaining += this.leasedUnits(asked[indices[j]].key, answered);
          const answer = { ...decision, servedBy: "shard" };
          out[indices[j]] = answer;
          const check = asked[indices[j]];
          if (d.allowed && check.cost >= 1) {
            const parts = check.held > 0 ? [{ lease: check.from, units: check.held }] : [];
            const shard = admission === undefined ? null : { admission, units: cost };
            this.#admitted.set(answer, { key: check.key, slot, cost: check.cost, parts, shard });
          }
        });
      }),
    );
    this.#giveBack(ctx);
    return out;
  }

  // Gives the unspent units of leases dropped here (ended, replaced, or fetched ahead
  // with no place left) back to their shards by the admissions that granted them, off
  // the request's path (to `ctx.waitUntil` when there is one): one call per shard.
  // This isolate's count of the key then forgets it, as after any give-back. Those for
  // `shard` go into `into` instead, when given (a settlement's own call).
  #giveBack(ctx, shard = -1, into = null) {
    const dropped = this.#leases?.dropped() ?? [];
    const byShard = new Map();
    for (const { key, admission, units } of dropped) {
      const slot = keyOf(key);
      this.#local.reset(slot);
      this.#refused.delete(slot);
      const shard = shardOf(slot, this.#shards);
      if (!byShard.has(shard)) byShard.set(shard, []);
      byShard.get(shard).push([key, admission, admission.cost - units]);
    }
    if (into !== null) {
      into.unshift(...(byShard.get(shard) ?? []));
      byShard.delete(shard);
    }
    for (const [shard, settlements] of byShard) {
      this.calls += 1;
      try {
        keepAlive(ctx, Promise.resolve(this.#stub(shard).settleMany(this.#options, settlements)).catch(() => {}));
      } catch {
        // A stub that throws at once: nothing was sent; the units stay charged.
      }
    }
  }

  /**
   * Settles a decision this limiter's `check` admitted (each at most once) at its real
   * cost `real`, learned from the response (tokens a model call used): units not used
   * go back — to the lease they came from while it lives (no call), else to the shard
   * by portero's refund rule (never more than if the request had cost `real` from the
   * start); units above the estimate come from this isolate's lease of the key, and the
   * rest is charged by the shard past the limit (debt every isolate waits out). Returns
   * how the key stands afterwards (`servedBy: "shard"` when the shard was called).
   * Units of a lease that ended before the settlement go back to the shard by that
   * lease's admission.
   */
  async settle(decision, real) {
    const handle = this.#admitted.get(decision);
    if (handle === undefined) fail("settle takes a decision this limiter's check admitted, at most once");
    if (!(Number.isSafeInteger(real) && real >= 0)) fail(`real must be a whole number of units, got ${shown(real)}`);
    this.#admitted.delete(decision);
    const { key, slot, cost, parts, shard } = handle;
    const at = Date.now();
    const leases = this.#leases;
    const owed = owedFor(handle, real, leases, at);
    const shardOfKey = shardOf(slot, this.#shards);
    // Leases dropped meanwhile give back in this call (before this settlement's own).
    this.#giveBack(undefined, shardOfKey, owed);
    if (owed.length === 0) {
      const held = this.leasedUnits(key, at);
      return { allowed: true, limit: decision.limit, remaining: held, retryAfterMs: 0, resetAfterMs: decision.resetAfterMs, servedBy: parts.length > 0 ? "lease" : decision.servedBy };
    }
    this.calls += 1;
    const decided = await this.#stub(shardOfKey).settleMany(this.#options, owed);
    if (owed.some(([, admission, units]) => units < (admission?.cost ?? 0))) {
      // The shard gave units back: this isolate's count of what it admitted, and a
      // refusal it remembers, would now refuse what the shard admits.
      this.#local.reset(slot);
      this.#refused.delete(slot);
    }
    const d = decided.at(-1);
    return { ...d, remaining: d.remaining + this.leasedUnits(key, Date.now()), servedBy: "shard" };
  }

  /** `rateLimitHeaders` with the rule's quota. */
  headers(decision, policy = "default") {
    return this.#local.headers(decision, policy);
  }

  /** The statistics of the shard that holds `key` (one call to it). */
  shardStats(key) {
    return this.#stub(shardOf(keyOf(key), this.#shards)).stats();
  }

  #stub(shard) {
    return this.#namespace.get(this.#namespace.idFromName(`portero-shard-${shard}`));
  }

  /** Units of `key` this isolate holds (its lease's, and one fetched ahead; 0 without one; for tests and metrics). */
  leasedUnits(key, now = Date.now()) {
    // The rules of every other entry point: a string key, a time in range.
    if (typeof key !== "string") fail(`key must be a string, got ${typeof key}`);
    if (typeof now !== "number") fail(`now must be a number of milliseconds, e.g. Date.now(), got ${typeof now}`);
    this.#rule.decide(this.#rule.initialState, now, 0, false);
    return this.#leases?.units(keyOf(key), now) ?? 0;
  }

  // Fetches the next lease of `key` off the request's path: a lease request of one
  // unit (the object charges a lease's units only with a check's) up to the batch,
  // kept to take over when the one held ends; a refusal is remembered as any other.
  // Given to `ctx.waitUntil` when there is one (else the runtime may cancel it with
  // the request: units the object charged then are lost, never over-admitted).
  #fetchAhead(key, slot, at, ctx) {
    const asked = this.#leases.ask(slot, at);
    if (asked === null) return;
    this.calls += 1;
    let sent;
    try {
      sent = this.#stub(shardOf(slot, this.#shards)).checkMany(this.#options, [[key, 1, this.#leases.batch]]);
    } catch {
      // A stub that throws at once: nothing was sent; the key may ask again.
      this.#leases.done(slot, asked);
      return;
    }
    const call = Promise.resolve(sent)
      .then(([d]) => {
        const { granted, ...decision } = d;
        const took = d.allowed ? (granted ?? 1) : 0;
        this.#learn(slot, at, d.allowed ? took : 1, decision);
        this.#leases.learned(slot, this.#leases.batch, took);
        if (took > 0) this.#leases.keep(slot, key, at, took, decision, true);
        this.#giveBack(ctx);
      })
      .catch(() => {}) // a failed fetch ahead changes nothing: the next check asks
      .finally(() => this.#leases.done(slot, asked));
    keepAlive(ctx, call);
  }

  // With prefetch, a key the shard last found at its limit, with nothing held here: its
  // next lease is asked for off the request's path (if none is on its way already) and
  // the check is refused here meanwhile, so a key over its limit waits on no round trip
  // either. The price: up to one round trip of refusals after room came back.
  #atLimit(key, slot, at, ctx) {
    const leases = this.#leases;
    if (leases === null || !leases.refusesHere(slot, at)) return null;
    if (!leases.asking(slot)) this.#fetchAhead(key, slot, at, ctx);
    return local({ limit: this.#capacity, retryAfterMs: AT_LIMIT_RETRY_MS, resetAfterMs: AT_LIMIT_RETRY_MS });
  }

  // The shard's last refusal of `slot` as an answer at `at`, if it covers `cost`: the
  // shard refused that cost, so until the wait it gave ends it refuses that cost and
  // any larger one (until then its state only gains admissions, and every algorithm
  // refuses a larger cost whenever it refuses a smaller one).
  #remembered(slot, at, cost) {
    const r = this.#refused.get(slot);
    if (r === undefined) return null;
    // Its wait is over, or the clock went back before the refusal: forgotten.
    if (at >= r.retryAt || at < r.sent) {
      this.#refused.delete(slot);
      return null;
    }
    if (cost < r.cost) return null;
    return local({ limit: r.limit, retryAfterMs: r.retryAt - at, resetAfterMs: r.resetAt - at });
  }

  // `sent` is when the call left, on this isolate's clock: the shard decided later, so
  // its waits, counted from `sent`, end no later than they do for the shard; and 1 ms
  // earlier still, because the shard rounds its waits up to whole milliseconds.
  #learn(slot, sent, cost, decision) {
    if (decision.allowed) {
      this.#local.check(slot, sent, cost); // what this isolate was admitted: a subset
    } else if (!decision.tableFull) {
      if (this.#refused.size >= REMEMBERED) this.#refused.clear();
      this.#refused.set(slot, {
        cost,
        sent,
        limit: decision.limit,
        retryAt: sent + decision.retryAfterMs - 1,
        resetAt: sent + decision.resetAfterMs - 1,
      });
    }
  }
}

// Hands `call` to the fetch handler's `ctx.waitUntil`, when there is one, so that the
// runtime keeps it past the response (without it, the call may be cancelled with the
// request: what it would have changed is lost, never over-admitted).
function keepAlive(ctx, call) {
  if (ctx !== undefined && ctx !== null && typeof ctx.waitUntil === "function") {
    try {
      ctx.waitUntil(call);
    } catch {
      // The runtime refused to keep it: the call runs on (or is cancelled with the
      // request); nothing else depends on it.
    }
  }
}

function local({ limit, retryAfterMs, resetAfterMs }) {
  return { allowed: false, limit, remaining: 0, retryAfterMs, resetAfterMs, servedBy: "local" };
}
