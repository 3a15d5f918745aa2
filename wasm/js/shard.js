// The Durable Object: the exact state of one shard of keys (one single-threaded
// instance per shard name, reachable from every isolate): checks, leases and
// settlements on each key's stored word, its refund ledger and its generation. The
// bounds it keeps are listed, with what tests each, in `wasm/README.md`'s "The edge,
// exact".
import { DurableObject } from "cloudflare:workers";
import { Rule } from "./index.js";
import { fail, shown } from "./errors.js";
import { keyOf, settingsOf, pairsOf, SWEEP_MS } from "./keys.js";

const STATE = "k:"; // k:<rule id>:<key> -> "state/ledger/generation/places" (decimal; earlier versions wrote fewer fields)
const GENERATION = "g:"; // the last generation given to a word (decimal)
const LATEST = "t:"; // the latest time a kept change was decided at (ms, decimal)
const RULE = "r:"; // r:<rule id> -> { rule, shards } (JSON)
const HAND = 8; // keys a new key at a full shard looks at for an idle one
// A new key at a full shard whose clock hand found no idle key.
const TABLE_FULL = Object.freeze({ allowed: false, tableFull: true, limit: 0, remaining: 0, retryAfterMs: 1000, resetAfterMs: 0 });

/** The Durable Object: the exact state of one shard of keys. */
export class PorteroShard extends DurableObject {
  #states = new Map(); // "<rule id>:<key>" -> BigInt state
  #ledgers = new Map(); // slot -> its refund ledger (a BigInt), only once not 0
  #places = new Map(); // slot -> where its settlements gave back from (portero's text), only once not empty
  #generations = new Map(); // slot -> which word it is: a word dropped and made again is another
  #generation = 0; // the last generation given (kept in storage: never given twice)
  #latest = 0; // the latest time this object decided at: its clock never goes back
  #rules = new Map(); // rule id -> { rule, shards }
  #spellings = new Map(); // a caller's rule options (JSON) -> [rule id, Rule]
  #hand = null; // the clock hand: an iterator over #states
  #stats = { checks: 0, batches: 0 };
  #sweepMs = SWEEP_MS;
  #alarmAt = null; // when the sweep alarm is set for (kept here: no storage read per check)

  constructor(ctx, env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      for (const [k, v] of await ctx.storage.list({ prefix: RULE })) {
        const { rule, shards } = JSON.parse(v);
        // (Records without `rule` are an earlier version's, whose ids were 32-bit hashes.)
        if (rule !== undefined) this.#rules.set(k.slice(RULE.length), { rule: new Rule(rule), shards });
      }
      for (const [k, v] of await ctx.storage.list({ prefix: STATE })) {
        const slot = k.slice(STATE.length);
        // A state without its rule could never be judged idle: not loaded.
        if (!this.#rules.has(ruleOf(slot))) continue;
        const [state, ledger = "0", generation = "0", places = ""] = String(v).split("/");
        this.#states.set(slot, BigInt(state));
        if (ledger !== "0") this.#ledgers.set(slot, BigInt(ledger));
        if (places !== "") this.#places.set(slot, places);
        this.#generations.set(slot, Number(generation));
        this.#generation = Math.max(this.#generation, Number(generation));
      }
      this.#generation = Math.max(this.#generation, Number((await ctx.storage.get(GENERATION)) ?? 0));
      // The clock never goes back across a restart either (a host whose clock is
      // behind would date a settlement before a check already applied, and give back
      // that check's units: found by an outside harness).
      this.#latest = Number((await ctx.storage.get(LATEST)) ?? 0) || 0;
      this.#alarmAt = await ctx.storage.getAlarm();
    });
  }

  // The rule for `options` and its id, the canonical quota: one quota however it is
  // spelled names one state, and two quotas never share one. A rule's keys are spread
  // over one shard count; a caller with another would give them a second state.
  #rule(options, shards) {
    let spelled;
    try {
      spelled = JSON.stringify(options);
    } catch {
      fail("rule must be plain options ({ perMinute: 100 }…)");
    }
    let known = this.#spellings.get(spelled);
    if (known === undefined) {
      const rule = new Rule(options);
      known = [ruleId(rule.quota), rule];
      if (this.#spellings.size >= 64) this.#spellings.clear();
      this.#spellings.set(spelled, known);
    }
    const [id, rule] = known;
    const held = this.#rules.get(id);
    if (held === undefined) {
      this.#rules.set(id, { rule, shards });
      this.ctx.storage.put(RULE + id, JSON.stringify({ rule: rule.quota, shards }));
    } else if (shards !== undefined && held.shards !== undefined && shards !== held.shards) {
      fail(
        `this object holds keys of rule ${id} under shards: ${held.shards}, and was called with ` +
          `shards: ${shards}: every limiter of one rule must use one shard count (each count would be ` +
          `a quota of its own); to change it, let the old keys go idle or use a new namespace`,
      );
    }
    return [id, rule];
  }

  /**
   * Decides a batch of `[key, cost, lease]` checks under one rule, in order, on this
   * object's clock. Returns one decision per check (`tableFull` when the shard holds
   * `maxKeys` keys, none of those the clock hand looks at is idle, and the key is new).
   * A check with `lease` above its cost (a lease request) takes, when the cost is
   * admitted, the most units that fit up to `lease`, and says how many in `granted`.
   * The batch is checked whole first: a bad check throws and nothing of it is taken.
   */
  async checkMany(options, checks) {
    if (options === null || typeof options !== "object") fail("options must be an object");
    const { maxKeys, durability, sweepMs, shards } = settingsOf(options);
    const batch = pairsOf(checks);
    const [id, rule] = this.#rule(options.rule, shards);
    const now = this.#now();
    // Decided into `pending`, kept only once every check is decided: a cost the rule
    // refuses to decide (negative, above capacity) throws with nothing changed.
    const pending = new Map();
    const born = new Map(); // slot -> the generation of a word this batch makes
    let added = 0;
    const out = batch.map(([key, cost, lease]) => {
      const slot = `${id}:${keyOf(key)}`;
      const state = pending.get(slot) ?? this.#states.get(slot);
      if (state === undefined && this.#states.size + added >= maxKeys && !this.#reclaim(now, pending)) {
        return { ...TABLE_FULL };
      }
      const before = state ?? rule.initialState;
      const [decision, next, took] = leased(rule, before, now, cost, lease);
      if (next !== before) {
        if (state === undefined) {
          added += 1;
          born.set(slot, ++this.#generation);
        }
        pending.set(slot, next);
      }
      const out = lease > cost ? { ...decision, granted: decision.allowed ? took : 0 } : decision;
      // What settles it later (`settleMany`): as portero's own admissions, one of a
      // positive cost that was admitted, and which word it was taken from.
      if (decision.allowed && took > 0) {
        const generation = born.get(slot) ?? this.#generations.get(slot) ?? 0;
        out.admission = { at: now, cost: took, before, after: next, noted: this.#ledgers.get(slot) ?? 0n, generation };
      }
      return out;
    });
    this.#stats.checks += batch.length;
    this.#stats.batches += 1;
    await this.#keep(pending, born, durability, sweepMs, now);
    return out;
  }

  /**
   * Settles a batch of `[key, admission, real]` under one rule, in order, on this
   * object's clock: each admission (as `checkMany` returned it, or `null` to charge
   * `real` units now) at its real cost `real` — units not used go back by portero's
   * refund rule (never more than if the request had cost `real` from the start),
   * units above the estimate are charged past the limit. Returns how each key stands
   * for one unit (`tableFull` for a charge of a key this shard no longer holds, when
   * it has no room: nothing charged). The batch is checked whole first. An admission
   * of a word the shard no longer holds (the key was dropped idle, and perhaps made
   * again since) gives nothing back; what it owes above its estimate is charged.
   *
   * It trusts its caller — your Worker's own code, never a client: a record is not
   * authenticated, so one made up, or one settled twice, gives back what it says.
   * `EdgeLimiter.settle` settles each admission at most once.
   */
  async settleMany(options, settlements) {
    if (options === null || typeof options !== "object") fail("options must be an object");
    const { maxKeys, durability, sweepMs, shards } = settingsOf(options);
    if (!Array.isArray(settlements)) fail(`settlements must be an array of [key, admission, real], got ${typeof settlements}`);
    const [id, rule] = this.#rule(options.rule, shards);
    const now = this.#now();
    const pending = new Map();
    const ledgers = new Map(); // slot -> [ledger, places] after this batch's settlements
    const born = new Map();
    let added = 0;
    const decided = settlements.map((settlement) => {
      if (!Array.isArray(settlement)) fail(`settlements must be [key, admission, real] triples, got ${typeof settlement}`);
      const [key, admission, real] = settlement;
      if (typeof key !== "string") fail(`key must be a string, got ${typeof key}`);
      if (!(Number.isSafeInteger(real) && real >= 0)) fail(`a settlement's real cost must be a whole number of units, got ${shown(real)}`);
      if (admission !== null && !(typeof admission === "object" && Number.isSafeInteger(admission.cost))) {
        fail(`a settlement's admission must be one checkMany returned, or null, got ${shown(admission)}`);
      }
      // Without its generation a record cannot say which word it was taken from: it
      // would settle to nothing, silently. Say so instead.
      if (admission !== null && !Number.isSafeInteger(admission.generation)) {
        fail(`a settlement's admission has no generation: keep every field checkMany returned, got ${shown(admission)}`);
      }
      const slot = `${id}:${keyOf(key)}`;
      const state = pending.get(slot) ?? this.#states.get(slot);
      const generation = born.get(slot) ?? this.#generations.get(slot);
      let [settled, units] = [admission, real];
      // The admission's own word, or none of it is here any more (the key was dropped
      // idle, and perhaps made again: another word, whose units are not its to give).
      if (admission !== null && (state === undefined || admission.generation !== generation)) {
        // Nothing to give back; what was owed above the estimate is charged now.
        [settled, units] = [null, real - admission.cost];
        if (units <= 0) return [slot, null];
      }
      if (state === undefined && this.#states.size + added >= maxKeys && !this.#reclaim(now, pending)) {
        return [slot, { ...TABLE_FULL }];
      }
      const [ledger, places] = ledgers.get(slot) ?? [this.#ledgers.get(slot) ?? 0n, this.#places.get(slot) ?? ""];
      const word = { state: state ?? rule.initialState, ledger, places };
      const [decision, after] = rule.settle(word, settled, units, now);
      if (after.state !== word.state || after.ledger !== word.ledger || after.places !== word.places) {
        if (state === undefined) {
          added += 1;
          born.set(slot, ++this.#generation);
        }
        pending.set(slot, after.state);
        ledgers.set(slot, [after.ledger, after.places]);
      }
      return [slot, decision];
    });
    for (const [slot, [ledger, places]] of ledgers) {
      if (ledger === 0n) this.#ledgers.delete(slot);
      else this.#ledgers.set(slot, ledger);
      if (places === "") this.#places.delete(slot);
      else this.#places.set(slot, places);
    }
    await this.#keep(pending, born, durability, sweepMs, now);
    // How a key no longer held stands: full (it was dropped idle, or never charged).
    return decided.map(([slot, d]) => d ?? rule.decide(this.#states.get(slot) ?? rule.initialState, now, 0, false)[0]);
  }

  // This object's time: its clock, never earlier than a time it already decided at
  // (a settlement dated before a check it applied could give back what that check
  // took; checks dated back could reopen a window a charge moved on from).
  #now() {
    this.#latest = Math.max(Date.now(), this.#latest);
    return this.#latest;
  }

  // Keeps the states `pending` decided (their ledgers, and the generations of the
  // words `born` made), in memory and in storage, and sets the sweep alarm.
  async #keep(pending, born, durability, sweepMs, now) {
    const changed = {};
    for (const [slot, generation] of born) this.#generations.set(slot, generation);
    if (born.size > 0) changed[GENERATION] = String(this.#generation);
    if (pending.size > 0) changed[LATEST] = String(this.#latest);
    for (const [slot, next] of pending) {
      this.#states.set(slot, next);
      const ledger = this.#ledgers.get(slot) ?? 0n;
      const places = this.#places.get(slot) ?? "";
      changed[STATE + slot] = `${next}/${ledger}/${this.#generations.get(slot) ?? 0}/${places}`;
    }
    if (pending.size > 0) {
      for (const part of chunks(Object.entries(changed))) {
        this.ctx.storage.put(Object.fromEntries(part), { allowUnconfirmed: durability === "fast" });
      }
      // The shortest sweep any caller asked for.
      this.#sweepMs = Math.min(this.#sweepMs, sweepMs);
      if (this.#alarmAt === null || this.#alarmAt > now + this.#sweepMs) {
        this.#alarmAt = now + this.#sweepMs;
        await this.ctx.storage.setAlarm(this.#alarmAt);
      }
    }
  }

  #idle(slot, state, now) {
    const rule = this.#rules.get(ruleOf(slot))?.rule;
    return rule !== undefined && rule.decide(state, now, 0, false)[0].resetAfterMs === 0;
  }

  // Makes room for a new key: the clock hand looks at the next HAND keys after where it
  // last stopped and drops the first that is full again (it carries no information).
  // So a new key costs at most HAND decisions, and the hand passes every key within
  // maxKeys / HAND new keys. Keys this batch changed are skipped: they are not idle.
  #reclaim(now, pending) {
    for (let i = 0; i < HAND; i++) {
      let next = this.#hand?.next();
      if (next === undefined || next.done) {
        this.#hand = this.#states.keys(); // a Map's iterator sees later inserts and deletes
        next = this.#hand.next();
        if (next.done) return false;
      }
      const slot = next.value;
      if (!pending.has(slot) && this.#idle(slot, this.#states.get(slot), now)) {
        this.#states.delete(slot);
        this.#ledgers.delete(slot);
        this.#places.delete(slot);
        this.#generations.delete(slot);
        this.ctx.storage.delete(STATE + slot);
        return true;
      }
    }
    return false;
  }

  /** Drops every idle key, and every rule left without keys; runs again while any key is held. */
  async alarm() {
    const now = this.#now();
    const gone = [];
    const live = new Set();
    for (const [slot, state] of this.#states) {
      if (this.#idle(slot, state, now)) gone.push(slot);
      else live.add(ruleOf(slot));
    }
    for (const slot of gone) {
      this.#states.delete(slot);
      this.#ledgers.delete(slot);
      this.#places.delete(slot);
      this.#generations.delete(slot);
    }
    // A rule's record (and the shard count it holds its keys under) goes with its last key.
    const unused = [...this.#rules.keys()].filter((id) => !live.has(id));
    for (const id of unused) this.#rules.delete(id);
    const deleted = [...gone.map((slot) => STATE + slot), ...unused.map((id) => RULE + id)];
    for (const part of chunks(deleted)) await this.ctx.storage.delete(part);
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

// A check of `cost` that asks for up to `lease` units: the decision, the next state and
// the units taken. It takes more than the cost only when the cost is admitted, and never
// more than the rule admits at once (its `remaining` now); a larger take the rule would
// refuse after all falls back to the cost alone, so leasing never refuses what a check
// admits.
function leased(rule, before, now, cost, lease) {
  // The check itself first: it validates the cost as every check does.
  const [decision, next] = rule.decide(before, now, cost);
  if (decision.allowed && cost > 0 && lease > cost) {
    const room = rule.decide(before, now, 0, false)[0].remaining;
    const take = Math.min(lease, room);
    if (take > cost) {
      const [more, after] = rule.decide(before, now, take);
      if (more.allowed) return [more, after, take];
    }
  }
  return [decision, next, cost];
}

// A rule's id: its algorithm and quota, the period in nanoseconds rounded as the core
// rounds it (to the nearest, ties to even), so periods the core cannot tell apart are one.
function ruleId({ algorithm, limit, periodMs, burst }) {
  const ns = periodMs * 1e6;
  let whole = Math.round(ns);
  if (whole - ns === 0.5 && whole % 2 !== 0) whole -= 1;
  return `${algorithm}/${limit}/${whole}/${burst}`;
}

function ruleOf(slot) {
  return slot.slice(0, slot.indexOf(":"));
}

// Storage takes at most 128 keys per put or delete: larger batches go in parts.
const STORAGE_BATCH = 128;

function* chunks(items) {
  for (let i = 0; i < items.length; i += STORAGE_BATCH) yield items.slice(i, i + STORAGE_BATCH);
}
