// This isolate's leases: units of a key a `PorteroShard` charged at once, which the
// `EdgeLimiter` then admits checks from without a call, until they run out or the
// lease's life ends (on this isolate's clock, from when its call was sent).
//
// Invariants: a unit is spent at most once and never after its lease's end; a key
// holds at most one lease and, with `prefetch`, one more fetched ahead (which takes
// over only when the one held has run dry or ended), so a limiter holds at most
// `batch - 1` unspent units of a key, or `2 × batch - 1` with prefetch; the table holds
// at most `localKeys` keys' leases, counting the requests for new ones in flight, and
// a full table of live leases takes no new one (a flood of new keys cannot push out
// a live lease).
import { fail, shown } from "./errors.js";

// The most a lease may last: a day (a unit charged then spent a day later is no
// rate limit anyone asked for).
const MAX_LEASE_MS = 86_400_000;

/**
 * The lease settings: `batch` whole units from 1 to the rule's `capacity`, `lifetimeMs`
 * from 1 ms (a shorter one could never be spent: it ends within the clock's step) to a
 * day, `prefetch` a boolean (default false).
 */
export function leaseOf(lease, capacity) {
  if (lease === null || typeof lease !== "object") fail(`lease must be { batch, lifetimeMs }, got ${shown(lease)}`);
  const { batch, lifetimeMs, prefetch = false } = lease;
  if (!(Number.isSafeInteger(batch) && batch >= 1 && batch <= capacity)) {
    fail(`lease.batch must be a whole number from 1 to the rule's capacity (${capacity}), got ${shown(batch)}`);
  }
  if (!(typeof lifetimeMs === "number" && lifetimeMs >= 1 && lifetimeMs <= MAX_LEASE_MS)) {
    fail(`lease.lifetimeMs must be a number of milliseconds from 1 to ${MAX_LEASE_MS} (a day), got ${shown(lifetimeMs)}`);
  }
  if (typeof prefetch !== "boolean") fail(`lease.prefetch must be true or false, got ${shown(prefetch)}`);
  return { batch, lifetimeMs, prefetch };
}

export class Leases {
  #settings; // { batch, lifetimeMs, prefetch }
  #room; // the most keys with leases (localKeys)
  #held = new Map(); // slot -> { left, sent, expires, limit, resetAt }
  #next = new Map(); // slot -> the lease fetched ahead, waiting for the one held to end
  #asking = new Set(); // slots with a lease request of this isolate in flight
  #atLimit = new Set(); // slots the shard last found at their limit (a refusal, or fewer units than asked)
  #dropped = []; // unspent units of leases dropped, to give back: { key, admission, units }
  #pending = 0; // of those, requests for keys that hold no lease (each takes a place)
  #nextEnd = Infinity; // no held lease ends before this, while the clock runs forward
  #scanned = -Infinity; // when the table was last scanned for ended leases

  constructor(settings, room) {
    this.#settings = settings;
    this.#room = room;
  }

  get batch() {
    return this.#settings.batch;
  }

  get prefetch() {
    return this.#settings.prefetch;
  }

  /**
   * What a lease request of `asked` units of `slot` got: `granted` (0: refused). Fewer
   * than asked means the shard had no more room: the key is at its limit until a lease
   * comes back whole. (At most `localKeys` keys are remembered so; beyond, none.)
   */
  learned(slot, asked, granted) {
    if (granted >= asked) {
      this.#atLimit.delete(slot);
      return;
    }
    if (this.#atLimit.size >= this.#room) this.#atLimit.clear();
    this.#atLimit.add(slot);
  }

  /** Whether, with prefetch, `slot` is at its limit with nothing held at `at`: refused here while its next lease is asked for off the path. */
  refusesHere(slot, at) {
    return this.#settings.prefetch && this.#atLimit.has(slot) && this.units(slot, at) === 0;
  }

  /** Whether a lease request of `slot` is in flight. */
  asking(slot) {
    return this.#asking.has(slot);
  }

  // The live lease of `slot` at `at` (the one fetched ahead taking over once the one
  // held has run dry or ended), or undefined.
  #live(slot, at) {
    let lease = this.#held.get(slot);
    if (lease !== undefined && (at >= lease.expires || at < lease.sent)) {
      this.#held.delete(slot);
      this.#drop(lease);
      lease = undefined;
    }
    if (lease === undefined || lease.left === 0) {
      const next = this.#next.get(slot);
      if (next !== undefined) {
        this.#next.delete(slot);
        if (at < next.expires && at >= next.sent) {
          this.#held.set(slot, next);
          this.#nextEnd = Math.min(this.#nextEnd, next.expires);
          return next;
        }
        this.#drop(next);
      }
    }
    return lease;
  }

  // The lease fetched ahead for `slot`, while it lives at `at`.
  #ahead(slot, at) {
    const next = this.#next.get(slot);
    return next !== undefined && at < next.expires && at >= next.sent ? next : undefined;
  }

  /** Units of `slot`'s live leases at `at` (the one held and one fetched ahead) that a check of `cost` would use (no more than the cost). */
  held(slot, at, cost) {
    if (cost < 1) return 0;
    const lease = this.#live(slot, at);
    if (lease === undefined) return 0;
    return Math.min(lease.left + (this.#ahead(slot, at)?.left ?? 0), cost);
  }

  /** The live lease of `slot` (for a check that sets units aside from it). */
  of(slot, at) {
    return this.#live(slot, at);
  }

  /** Sets aside for a check of `cost` what `lease` holds at `at` (fewer than the cost); 0 once it ended. */
  setAside(lease, at, cost) {
    if (at >= lease.expires || at < lease.sent) return 0;
    const n = Math.min(lease.left, cost);
    lease.left -= n;
    return n;
  }

  /**
   * Gives `n` units a settled admission did not use back to `lease`, while it is still
   * one of `slot`'s and lives at `at`, never past what it was granted: how many went
   * back (the caller gives the rest back to the shard).
   */
  giveBack(slot, lease, n, at) {
    const ours = this.#held.get(slot) === lease || this.#next.get(slot) === lease;
    if (!ours || at >= lease.expires || at < lease.sent) return 0;
    // Never more held of the key than the bound allows (`batch - 1`, or `2 × batch - 1`
    // with prefetch): a lease refilled while the next one waits could hold both whole.
    const { batch, prefetch } = this.#settings;
    const room = (prefetch ? 2 * batch - 1 : batch - 1) - this.units(slot, at);
    const back = Math.max(0, Math.min(n, lease.granted - lease.left, room));
    lease.left += back;
    return back;
  }

  /** Takes up to `n` units from `slot`'s live leases at `at` (a settlement above its estimate): how many it took. */
  take(slot, at, n) {
    const lease = this.#live(slot, at);
    if (lease === undefined) return 0;
    let taken = 0;
    for (const l of [lease, this.#ahead(slot, at)]) {
      if (l === undefined) continue;
      const k = Math.min(l.left, n - taken);
      l.left -= k;
      taken += k;
    }
    return taken;
  }

  /** Gives a refused (or failed) check's units back to their lease, if it is still the key's and lives. */
  putBack({ from, held, slot }) {
    if (held > 0 && this.#held.get(slot) === from && Date.now() < from.expires) from.left += held;
  }

  /**
   * Whether a check of `slot` may ask for a lease now: none is asked for already, and
   * the key holds one or the table has room once ended leases are dropped. Marks the
   * request as in flight when it may (`done` ends it).
   */
  ask(slot, at) {
    if (this.#asking.has(slot) || !this.#roomFor(slot, at)) return null;
    this.#asking.add(slot);
    const place = !this.#held.has(slot);
    if (place) this.#pending += 1;
    return { place };
  }

  /** A lease request of `slot` ended (answered or failed). */
  done(slot, { place }) {
    this.#asking.delete(slot);
    if (place) this.#pending -= 1;
  }

  #roomFor(slot, at) {
    if (this.#held.has(slot)) return true;
    const full = () => this.#held.size + this.#pending >= this.#room;
    if (!full()) return true;
    // Scanned only once the earliest held lease may have ended (or the clock went back):
    // a flood of new keys against a table of live leases costs no scan each.
    if (at < this.#nextEnd && at >= this.#scanned) return false;
    this.#scanned = at;
    this.#nextEnd = Infinity;
    for (const [k, lease] of this.#held) {
      if (at >= lease.expires || at < lease.sent) {
        // A lease fetched ahead goes with the one it was waiting behind: it holds no
        // place of its own (its units go back, never spent past its end).
        this.#held.delete(k);
        this.#drop(lease);
        this.#drop(this.#next.get(k));
        this.#next.delete(k);
      } else this.#nextEnd = Math.min(this.#nextEnd, lease.expires);
    }
    return !full();
  }

  // A lease leaves the table: what it holds unspent is given back (`dropped`), by the
  // shard's admission that granted it, and can no longer be spent here.
  #drop(lease) {
    if (lease === undefined || lease.left === 0) return;
    if (lease.admission !== undefined) this.#dropped.push({ key: lease.key, admission: lease.admission, units: lease.left });
    lease.left = 0;
  }

  /** The unspent units of the leases dropped since the last call, to give back to their shards (and forgets them). */
  dropped() {
    return this.#dropped.splice(0);
  }

  /**
   * A lease of `left` units of `key` (at `slot`) granted by a call sent at `sent`, by
   * the shard's `decision` (its `admission` gives unspent units back when the lease is
   * dropped). A check that asks for a lease has set aside every unit the one held had,
   * so what it replaces holds nothing — unless a refused check gave units back
   * meanwhile (given back then). `ahead`: fetched ahead, it waits for the one held to
   * end.
   */
  keep(slot, key, sent, left, decision, ahead = false) {
    const lease = {
      key,
      admission: decision.admission,
      left,
      granted: left,
      sent,
      expires: sent + this.#settings.lifetimeMs,
      limit: decision.limit,
      resetAt: sent + decision.resetAfterMs,
    };
    if (ahead && this.#held.has(slot)) {
      this.#drop(this.#next.get(slot));
      this.#next.set(slot, lease);
      return;
    }
    // Fetched ahead for a lease that has since been dropped: it takes a place only if
    // the table has one (it asked for none); else its units go back.
    if (ahead && !this.#roomFor(slot, sent)) {
      this.#drop(lease);
      return;
    }
    this.#nextEnd = Math.min(this.#nextEnd, lease.expires);
    this.#drop(this.#held.get(slot));
    this.#held.set(slot, lease);
  }

  /**
   * `cost` units of `slot`'s live lease at `at`, as an answer: only while it holds them
   * (a cost of 0, a question, goes to the shard). `remaining` is what this isolate still
   * holds of the key, the reset when the shard said the key is full again. `parts`
   * gets the `{ lease, units }` it spent from, for a settlement.
   */
  spend(slot, at, cost, parts) {
    if (cost < 1) return null;
    const lease = this.#live(slot, at);
    if (lease === undefined) return null;
    // The one held first, then the one fetched ahead: both live now, so every unit is
    // spent before its own lease's end.
    const next = this.#ahead(slot, at);
    if (cost > lease.left + (next?.left ?? 0)) return null;
    const first = Math.min(lease.left, cost);
    lease.left -= first;
    if (first > 0) parts.push({ lease, units: first });
    if (cost > first) {
      next.left -= cost - first;
      parts.push({ lease: next, units: cost - first });
    }
    const resetAfterMs = Math.max(0, lease.resetAt - at);
    const remaining = this.units(slot, at);
    return { allowed: true, limit: lease.limit, remaining, retryAfterMs: 0, resetAfterMs, servedBy: "lease" };
  }

  /** Whether the next lease of `slot` should be fetched ahead now: prefetch is on, the one held is down to half, none is on its way or waiting. */
  wantsNext(slot, at) {
    if (!this.#settings.prefetch || this.#settings.batch < 2) return false;
    const lease = this.#held.get(slot);
    if (lease === undefined || at >= lease.expires || at < lease.sent) return false;
    return lease.left * 2 <= this.#settings.batch && !this.#next.has(slot) && !this.#asking.has(slot);
  }

  /** Units of `slot` this isolate holds at `now`: the live lease's and the one fetched ahead. */
  units(slot, now) {
    let n = 0;
    for (const lease of [this.#held.get(slot), this.#next.get(slot)]) {
      if (lease !== undefined && now < lease.expires && now >= lease.sent) n += lease.left;
    }
    return n;
  }
}
