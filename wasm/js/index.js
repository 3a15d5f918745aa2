// portero for edge workers: the Rust limiters, compiled to WebAssembly.
//
// Time always comes from the caller in milliseconds: Workers freeze `Date.now()` during
// a request, so a limiter must never read the clock itself. State lives in the isolate
// (module scope): each isolate counts on its own, so a limit per isolate is coarse,
// and several isolates of one Worker each admit up to the limit.

import initAsync, {
  initSync as initRaw,
  decisionLayout,
  lastState,
  lastLedger,
  lastPlaces,
  lastFingerprintLow,
  maxKeys as rawMaxKeys,
  algorithmNames,
  outcomeCodes,
  Limiter as RawLimiter,
  Keyed as RawKeyed,
  Rule as RawRule,
} from "../pkg/portero_wasm.js";
import { fail, shown } from "./errors.js";

let ready = false;

/**
 * Instantiates the module synchronously from a compiled `WebAssembly.Module` (in
 * workerd and wrangler: `import wasm from "portero/portero.wasm"`) or from its bytes (Node).
 */
export function initSync(module) {
  takeConstants(initRaw({ module }));
}

/** Whether the module is instantiated (`initSync` or `init` ran). */
export function isReady() {
  return ready;
}

/** Instantiates the module asynchronously (browsers, Node: from a URL, bytes or Module). */
export async function init(input) {
  takeConstants(await initAsync(input === undefined ? undefined : { module_or_path: input }));
}

// The algorithm names and outcome codes, as the module (and the Rust core) spell them.
let ALGORITHMS = [];
let TABLE_FULL;
let COST_EXCEEDS_CAPACITY;
let TIME_OUT_OF_RANGE;
let BAD_NOW;
let BAD_COST;

// The decision buffer: five f64s in the module's linear memory where every check
// leaves its decision (limit, remaining, retry-after ms, reset-after ms, outcome code),
// read through a Float64Array right after the call: no getter calls into wasm, no
// object from wasm. The view is made again whenever memory has grown (growing detaches
// the old buffer, and a detached view's length is 0). Each decision object copies the
// numbers out, so a later check never changes a decision already returned.
const LIMIT = 0;
const REMAINING = 1;
const RETRY_AFTER_MS = 2;
const RESET_AFTER_MS = 3;
const OUTCOME = 4;
let memory = null;
let decisionAt = 0;
let decisionLength = 0;
let decisionView = new Float64Array(0);

// The view of the decision buffer, current (call it after the call into wasm: that
// call may have grown memory).
function decision() {
  return decisionView.length === 0 ? newView() : decisionView;
}

function newView() {
  decisionView = new Float64Array(memory.buffer, decisionAt, decisionLength);
  return decisionView;
}

function takeConstants(exports) {
  ALGORITHMS = algorithmNames().split(",");
  [, TABLE_FULL, COST_EXCEEDS_CAPACITY, TIME_OUT_OF_RANGE, BAD_NOW, BAD_COST] = outcomeCodes();
  const layout = decisionLayout();
  // The indices are constants here (faster to read); the module says where they are.
  if (String([...layout.slice(2)]) !== String([LIMIT, REMAINING, RETRY_AFTER_MS, RESET_AFTER_MS, OUTCOME])) {
    fail("this portero_wasm_bg.wasm lays its decision out differently from js/index.js: a mismatched build");
  }
  memory = exports.memory;
  [decisionAt, decisionLength] = layout;
  decisionView = new Float64Array(0);
  // Once here, so that V8 has seen the view made when it compiles the hot paths (a path
  // never taken is compiled as a bail-out, taken again when memory first grows).
  decision();
  ready = true;
}

function needReady() {
  if (!ready) fail("call initSync(module) or await init() before creating limiters");
}

// Runs `f` (a constructor of the module's), turning an error from wasm into one whose
// message says portero. (Only for constructors: the hot paths never throw in wasm.)
function guard(f) {
  try {
    return f();
  } catch (e) {
    fail(e?.message ?? String(e));
  }
}

function isNumber(v) {
  return typeof v === "number";
}


/** Reads `{ perSecond | perMinute | perHour | limit + periodMs, capacity | burst }`. */
function quotaOf(options) {
  if (options === null || typeof options !== "object") fail("options must be an object");
  let limit;
  let periodMs;
  if (options.perSecond !== undefined) [limit, periodMs] = [options.perSecond, 1_000];
  else if (options.perMinute !== undefined) [limit, periodMs] = [options.perMinute, 60_000];
  else if (options.perHour !== undefined) [limit, periodMs] = [options.perHour, 3_600_000];
  else [limit, periodMs] = [options.limit, options.periodMs];
  const burst = options.capacity ?? options.burst ?? limit;
  for (const [name, v] of [["limit", limit], ["periodMs", periodMs], ["burst", burst]]) {
    if (!isNumber(v)) {
      fail(`${name} must be a number (set perSecond, perMinute, perHour or limit and periodMs), got ${shown(v)}`);
    }
  }
  return { limit, periodMs, burst };
}

// Only their type is checked here (the call into wasm would turn a string, null or an
// object into a number); their ranges are checked once, by the module, which refuses a
// bad `now` or `cost` with an outcome that names it, and `refusal` throws for it. (No
// try/catch around the hot calls: with one, V8 stopped inlining them and a check took
// 4x longer.) The hot paths are kept small, their error messages out of line: V8
// inlines a call only within a budget of bytecode, and the decision object is built
// without any allocation only if everything up to it is inlined into the caller
// (measured: a keyed `check` 58 ns with everything inlined, 80–90 ns where the budget
// ran out).
function checkArgs(now, cost) {
  if (typeof now !== "number" || typeof cost !== "number") badType(now, cost);
}

// One branch on the hot path for both types (measured: a single-key check 0.3-0.5 ns
// less than with a branch each).
function badType(now, cost) {
  if (!isNumber(now)) badNow(now);
  badCost(cost);
}

function badNow(now) {
  if (!isNumber(now)) fail(`now must be a number of milliseconds, e.g. Date.now(), got ${shown(now)}`);
  fail(`now must be a finite, non-negative number of milliseconds (at most ~292 years), got ${now}`);
}

function badCost(cost) {
  if (!isNumber(cost)) fail(`cost must be a number, got ${shown(cost)}`);
  fail(`cost must be a whole number from 0 to 2^53 - 1, got ${cost}`);
}

// A key's log of places as the module takes it (`KeptPlaces::to_words`: five words a
// run, the start's and end's high and low halves and what it gave back) from portero's
// text (`start:end:given` runs in lowercase hex, comma-separated). Text that is not a
// log's (a damaged record) is read as none, as the module reads words that are not:
// a settlement then gives back less, never more.
const HEX128 = /^[0-9a-f]{1,32}$/;
const HEX64 = /^[0-9a-f]{1,16}$/;
const LOW = (1n << 64n) - 1n;
function placesWords(text) {
  const words = [];
  for (const run of text === "" ? [] : text.split(",")) {
    const parts = run.split(":");
    if (parts.length !== 3 || !HEX128.test(parts[0]) || !HEX128.test(parts[1]) || !HEX64.test(parts[2])) {
      return new BigUint64Array(0);
    }
    const [start, end, given] = parts.map((p) => BigInt(`0x${p}`));
    words.push(start >> 64n, start & LOW, end >> 64n, end & LOW, given);
  }
  return BigUint64Array.from(words);
}
function placesText(words) {
  const runs = [];
  for (let i = 0; i + 5 <= words.length; i += 5) {
    const start = (words[i] << 64n) | words[i + 1];
    const end = (words[i + 2] << 64n) | words[i + 3];
    runs.push(`${start.toString(16)}:${end.toString(16)}:${words[i + 4].toString(16)}`);
  }
  return runs.join(",");
}

// A state word, or a ledger, as the wasm module takes it: a BigInt of 64 bits.
function word64(name, v) {
  if (typeof v !== "bigint" || v < 0n || v >= 1n << 64n) fail(`${name} must be a 64-bit BigInt, got ${shown(v)}`);
  return v;
}

function checkKey(key) {
  if (typeof key !== "string") badKey(key);
}

function badKey(key) {
  fail(`key must be a string, got ${typeof key}`);
}


// A refusal for `allow`: false, unless the refusal was an error (thrown as `check` does).
function refused(now, cost) {
  refusal(now, cost);
  return false;
}

// The decision objects: plain data (own enumerable fields in the documented order, and
// Object.prototype as their prototype, as an object literal's), a new object for every
// call, its numbers copied from the decision buffer, so a decision kept stays as it
// was whatever is checked after it. Built by constructors of their own rather than as
// literals: V8 gives every literal with the same keys in the same order one hidden
// shape, so an application's own `{ allowed, limit, … }` objects (a plain-JS limiter's,
// say) would share the shape and widen its fields, which measured 65 → 83 ns per keyed
// check.
function Decision(allowed, d) {
  this.allowed = allowed;
  this.limit = d[LIMIT];
  this.remaining = d[REMAINING];
  this.retryAfterMs = d[RETRY_AFTER_MS];
  this.resetAfterMs = d[RESET_AFTER_MS];
}
Decision.prototype = Object.prototype;

// A `Decision` with `tableFull`, built whole (a property added afterwards changes the
// object's shape on every call).
function KeyedDecision(allowed, d, tableFull) {
  this.allowed = allowed;
  this.limit = d[LIMIT];
  this.remaining = d[REMAINING];
  this.retryAfterMs = d[RETRY_AFTER_MS];
  this.resetAfterMs = d[RESET_AFTER_MS];
  this.tableFull = tableFull;
}
KeyedDecision.prototype = Object.prototype;

// Each field seeded once with a non-number, so that V8 keeps it as a tagged field:
// a field V8 types as a double takes a new heap box for every number stored in it,
// which cost 4 allocations per decision, while a tagged field holds a whole number
// of the usual size (below 2^30) as is.
{
  const seed = [null, null, null, null, null];
  new Decision(false, seed);
  new KeyedDecision(false, seed, false);
}

// The decision of a call made with `detail` (only a refusal asks why: `refusal` throws
// for the refusals that are errors).
function decisionOf(allowed, now, cost) {
  if (!allowed) refusal(now, cost);
  return new Decision(allowed, decision());
}

function keyedDecisionOf(allowed, now, cost) {
  const tableFull = !allowed && refusal(now, cost) === TABLE_FULL;
  return new KeyedDecision(allowed, decision(), tableFull);
}

// A refusal's outcome code; throws for the refusals that are errors.
function refusal(now, cost) {
  const d = decision();
  const outcome = d[OUTCOME];
  if (outcome === BAD_NOW) badNow(now);
  if (outcome === BAD_COST) badCost(cost);
  if (outcome === COST_EXCEEDS_CAPACITY) {
    fail(`cost exceeds the limiter's capacity: it can never be admitted (cost ${cost}, capacity ${d[LIMIT]})`);
  }
  if (outcome === TIME_OUT_OF_RANGE) fail("now is past the supported time range");
  return outcome;
}

const TOKEN = /^[A-Za-z*][A-Za-z0-9!#$%&'*+\-.^_`|~:/]*$/;

// The longest wait a field advertises: one year, as portero-http's
// MAX_ADVERTISED_SECS. Every number in a header is a finite whole number.
const MAX_ADVERTISED_SECONDS = 366 * 86_400;

function wholeField(name, v, min) {
  if (!(isNumber(v) && Number.isSafeInteger(v) && v >= min)) {
    fail(`${name} must be a whole number of at least ${min}, got ${shown(v)}`);
  }
  return v;
}

function millisField(name, v) {
  if (!(isNumber(v) && v >= 0 && v !== Infinity)) {
    fail(`${name} must be a finite, non-negative number of milliseconds, got ${shown(v)}`);
  }
  return Math.min(Math.ceil(v / 1000), MAX_ADVERTISED_SECONDS);
}

/**
 * Response headers for a decision: the IETF `RateLimit-Policy` and `RateLimit`
 * fields, and for a rejection `Retry-After` (whole seconds, rounded up) and
 * `Cache-Control: no-store` (a 429 must never be cached).
 */
export function rateLimitHeaders(decision, options) {
  const fields = rateLimitFields(options);
  if (decision === null || typeof decision !== "object") fail("decision must be a decision object");
  wholeField("decision.remaining", decision.remaining, 0);
  millisField(decision.allowed ? "decision.resetAfterMs" : "decision.retryAfterMs", decision.allowed ? decision.resetAfterMs : decision.retryAfterMs);
  return fields(decision);
}

/**
 * `rateLimitHeaders` with its options checked once: a function of a decision of the
 * package's own limiters (what a middleware calls for every response).
 */
export function rateLimitFields({ policy = "default", quota, windowSeconds }) {
  if (!TOKEN.test(policy)) fail(`policy must be a structured-field token, got ${JSON.stringify(policy)}`);
  wholeField("quota", quota, 0);
  wholeField("windowSeconds", windowSeconds, 1);
  const policyField = `"${policy}";q=${quota};w=${windowSeconds}`;
  const item = `"${policy}";r=`;
  return (decision) => {
    if (decision.allowed) {
      const t = Math.min(Math.ceil(decision.resetAfterMs / 1000), MAX_ADVERTISED_SECONDS);
      return { "RateLimit-Policy": policyField, RateLimit: `${item}${decision.remaining};t=${t}` };
    }
    const retry = Math.max(1, Math.min(Math.ceil(decision.retryAfterMs / 1000), MAX_ADVERTISED_SECONDS));
    return {
      "RateLimit-Policy": policyField,
      RateLimit: `${item}${decision.remaining};t=${retry}`,
      "Retry-After": String(retry),
      "Cache-Control": "no-store",
    };
  };
}

// `rateLimitHeaders` for a limiter's own quota.
function headersFor({ limit, periodMs }, decision, policy) {
  return rateLimitHeaders(decision, { policy, quota: limit, windowSeconds: Math.ceil(periodMs / 1000) });
}

// `options.algorithm` (default "gcra"), one of the module's names.
function algorithmOf(options) {
  const algorithm = options.algorithm ?? "gcra";
  if (!ALGORITHMS.includes(algorithm)) fail(`algorithm must be one of ${ALGORITHMS.join(", ")}, got ${shown(algorithm)}`);
  return algorithm;
}

class Single {
  #raw;
  #quota;
  constructor(algorithm, options) {
    needReady();
    this.#quota = quotaOf(options);
    const { limit, periodMs, burst } = this.#quota;
    this.#raw = guard(() => new RawLimiter(algorithm, limit, periodMs, burst));
  }
  /** Checks `cost` units (default 1) at `now` (ms), taking them if admitted. */
  check(now, cost = 1) {
    checkArgs(now, cost);
    return decisionOf(this.#raw.check(now, cost, true), now, cost);
  }
  /** What `check` would answer, taking nothing. */
  peek(now, cost = 1) {
    checkArgs(now, cost);
    return decisionOf(this.#raw.peek(now, cost), now, cost);
  }
  /**
   * `check` for callers that need no headers: only whether it was admitted (one call
   * into wasm, no object built).
   */
  allow(now, cost = 1) {
    checkArgs(now, cost);
    return this.#raw.check(now, cost, false) || refused(now, cost);
  }
  /** Forgets everything admitted. */
  reset() {
    this.#raw.reset();
  }
  /** `rateLimitHeaders` with this limiter's quota. */
  headers(decision, policy = "default") {
    return headersFor(this.#quota, decision, policy);
  }
}

/** GCRA: bursts of `burst`, `limit` per period on average, exact retry-after. */
export class Gcra extends Single {
  constructor(options) {
    super("gcra", options);
  }
}
/** Token bucket of `capacity`, refilled at `perSecond` (or any period). */
export class TokenBucket extends Single {
  constructor(options) {
    super("token-bucket", options);
  }
}
/** Fixed windows aligned to the time axis: `limit` per window. */
export class FixedWindow extends Single {
  constructor(options) {
    super("fixed-window", options);
  }
}
/** Sliding window counter: about `limit` in any window, in one word. */
export class SlidingWindowCounter extends Single {
  constructor(options) {
    super("sliding-window-counter", options);
  }
}
/** Leaky bucket as a meter: the level drains at the rate; admit while it fits. */
export class LeakyMeter extends Single {
  constructor(options) {
    super("leaky-meter", options);
  }
}

/** The algorithm names `KeyedLimiter` accepts (after `initSync` or `init`). */
export function algorithms() {
  return [...ALGORITHMS];
}

// The fingerprint cache of a KeyedLimiter: hot keys' 64-bit fingerprints and slot
// hints, so that checking them again copies no string into wasm, hashes nothing there
// and goes straight to the key's slot (a Map lookup on a JS string reuses the hash V8
// keeps in the string). Two generations of at most FINGERPRINT_CACHE keys each: when
// the young one is full it becomes the old one and the old one is dropped, and a key
// found in the old one moves back to the young one. Keys longer than
// FINGERPRINT_CACHE_KEY_LENGTH are never kept, so the cache holds at most 2 x 16,384
// keys of at most 64 characters whatever keys clients send: 2.3 MB of JS heap measured
// after 200,000 distinct 64-character ASCII keys, 3.8 MB with two-byte characters.
// Only a cache: a key's fingerprint is fixed by the table's seed, so a dropped entry is
// computed again, identically, and wasm compares a hint's slot with the fingerprint
// before using it, so a stale hint (the key evicted, reset or moved) costs a lookup.
const FINGERPRINT_CACHE = 16_384;
const FINGERPRINT_CACHE_KEY_LENGTH = 64;
// A slot hint that names no slot (the first check of a key looks it up).
const NO_HINT = 0xffff_ffff;

class Fingerprints {
  // Each generation: key -> entry i in its `words`, which hold the fingerprint's high
  // and low 32 bits and the slot hint at 3i, 3i + 1 and 3i + 2 (a dense typed array:
  // no object per key to chase).
  #young = new Map();
  #old = new Map();
  #oldWords = new Uint32Array(0);
  /** The young generation's words: entry i is `words[3i]`, `words[3i + 1]`, `words[3i + 2]`. */
  words = new Uint32Array(0);
  /** `key`'s entry in `words` (read them after the call), or -1 for a long key. */
  of(key, table) {
    return this.#young.get(key) ?? this.#miss(key, table);
  }
  #miss(key, table) {
    if (key.length > FINGERPRINT_CACHE_KEY_LENGTH) return -1;
    const old = this.#old.get(key);
    let high, low, hint;
    if (old === undefined) {
      high = table.fingerprint(key);
      low = lastFingerprintLow();
      hint = NO_HINT;
    } else {
      high = this.#oldWords[3 * old];
      low = this.#oldWords[3 * old + 1];
      hint = this.#oldWords[3 * old + 2];
    }
    if (this.#young.size >= FINGERPRINT_CACHE) {
      [this.#old, this.#oldWords, this.words] = [this.#young, this.words, this.#oldWords];
      this.#young = new Map();
    }
    const entry = this.#young.size;
    if (3 * entry + 2 >= this.words.length) {
      // Grown as keys come (a limiter with few keys keeps a small array), doubling up to
      // the generation's size.
      const grown = new Uint32Array(Math.min(Math.max(3 * 32, 2 * this.words.length), 3 * FINGERPRINT_CACHE));
      grown.set(this.words);
      this.words = grown;
    }
    this.#young.set(key, entry);
    this.words[3 * entry] = high;
    this.words[3 * entry + 1] = low;
    this.words[3 * entry + 2] = hint;
    return entry;
  }
}

/**
 * One limiter per string key (client address, API key…) in a table of at most
 * `maxKeys` keys (default 100,000); memory is fixed when it is created. When every key
 * is still active, new keys are refused (`tableFull: true`) unless `evict: true`.
 */
export class KeyedLimiter {
  #raw = null;
  #options;
  #quota;
  #fingerprints = new Fingerprints();
  constructor(options) {
    needReady();
    this.#quota = quotaOf(options);
    const algorithm = algorithmOf(options);
    const maxKeys = options.maxKeys ?? 100_000;
    if (!isNumber(maxKeys)) fail(`maxKeys must be a number, got ${shown(maxKeys)}`);
    this.#options = { algorithm, maxKeys, evict: options.evict === true };
    // Validate now; the table itself is built at the first check, because workerd only
    // hands out random numbers (for the hash seed) while handling a request.
    const { limit, periodMs, burst } = this.#quota;
    guard(() => new RawLimiter(algorithm, limit, periodMs, burst).free());
    if (!(maxKeys >= 1 && maxKeys <= rawMaxKeys() && Number.isInteger(maxKeys))) {
      fail(
        `maxKeys must be a whole number from 1 to ${rawMaxKeys()} (a table of at most 32 MiB: ` +
          `wasm memory never shrinks and a Worker has 128 MB), got ${maxKeys}`,
      );
    }
  }
  #table() {
    return this.#raw ?? this.#newTable();
  }
  #newTable() {
    const hashSeeds = crypto.getRandomValues(new Uint32Array(4));
    const { limit, periodMs, burst } = this.#quota;
    const { algorithm, maxKeys, evict } = this.#options;
    this.#raw = guard(() => new RawKeyed(algorithm, limit, periodMs, burst, maxKeys, hashSeeds, evict));
    return this.#raw;
  }
  /** Checks `cost` units (default 1) for `key` at `now` (ms). */
  check(key, now, cost = 1) {
    checkKey(key);
    checkArgs(now, cost);
    return keyedDecisionOf(this.#check(key, now, cost, true), now, cost);
  }
  /** What `check` would answer for `key`, taking nothing. */
  peek(key, now, cost = 1) {
    checkKey(key);
    checkArgs(now, cost);
    return keyedDecisionOf(this.#table().peek(key, now, cost), now, cost);
  }
  /** `check` for callers that need no headers: only whether `key` was admitted. */
  allow(key, now, cost = 1) {
    checkKey(key);
    checkArgs(now, cost);
    return this.#check(key, now, cost, false) || refused(now, cost);
  }
  /**
   * `check`, keeping what an admission took so that `settle` can move it to the
   * request's real cost once it is known (a response's status, the tokens a model
   * used): `{ decision, admission }`, `admission` null when refused (nothing taken).
   */
  acquire(key, now, cost = 1) {
    checkKey(key);
    checkArgs(now, cost);
    const handle = this.#table().acquire(key, now, cost);
    const decision = keyedDecisionOf(handle !== -1, now, cost);
    return { decision, admission: handle >= 0 ? new Admission(this, handle) : null };
  }
  /**
   * Moves `admission` (from this limiter's `acquire`) to its real cost `real` at `now`:
   * units not used go back by portero's refund rule (never more than a limiter that
   * never saw the request would have), units above the estimate are charged into
   * debt. An admission settles once; returns false for one already settled, or one
   * of the last 65,536 no longer (it keeps its units).
   */
  settle(admission, real, now) {
    if (!(admission instanceof Admission) || admission.limiter !== this) {
      fail(`admission must come from this limiter's acquire, got ${shown(admission)}`);
    }
    if (!(Number.isSafeInteger(real) && real >= 0)) fail(`real must be a whole number of units, got ${shown(real)}`);
    if (!isNumber(now)) badNow(now);
    return guard(() => this.#table().settle(admission.handle, real, now));
  }
  // A check through the fingerprint cache (a long key is copied in); `detail`: the
  // whole decision in the decision buffer, not only the outcome.
  #check(key, now, cost, detail) {
    const table = this.#table();
    const fingerprints = this.#fingerprints;
    const i = 3 * fingerprints.of(key, table);
    if (i < 0) return table.check(key, now, cost, detail);
    const words = fingerprints.words;
    // One number back: the key's slot hint for next time, and whether it was admitted.
    const r = table.checkFingerprint(words[i], words[i + 1], words[i + 2], now, cost, detail);
    words[i + 2] = r >>> 1;
    return (r & 1) === 1;
  }
  /** Forgets `key`. */
  reset(key) {
    checkKey(key);
    this.#raw?.reset(key);
  }
  /** Drops keys that are full again at `now`; returns how many. */
  sweep(now) {
    checkArgs(now, 0);
    // Through the table even before the first check, so that the module checks `now`.
    const dropped = this.#table().sweep(now);
    if (dropped < 0) badNow(now);
    return dropped;
  }
  /** Keys held. */
  get size() {
    return this.#raw === null ? 0 : this.#raw.size;
  }
  /** `rateLimitHeaders` with this limiter's quota. */
  headers(decision, policy = "default") {
    return headersFor(this.#quota, decision, policy);
  }
}

/** What a `KeyedLimiter`'s `acquire` took, to `settle` once. */
class Admission {
  constructor(limiter, handle) {
    this.limiter = limiter;
    this.handle = handle;
    Object.freeze(this);
  }
}

/**
 * An algorithm and quota without state: you keep each key's state (a BigInt) and hand
 * it in — to persist it, as the Durable Object in `portero/durable` does. Decides
 * exactly as `KeyedLimiter`.
 */
export class Rule {
  #raw;
  #quota;
  constructor(options) {
    needReady();
    this.#quota = quotaOf(options);
    const algorithm = algorithmOf(options);
    const { limit, periodMs, burst } = this.#quota;
    this.#raw = guard(() => new RawRule(algorithm, limit, periodMs, burst));
    /** The state of a key that has used nothing. */
    this.initialState = this.#raw.initialState();
    /** The algorithm and quota, however the options spelled them (`perMinute`, `capacity`…). */
    this.quota = Object.freeze({ algorithm, limit, periodMs, burst });
  }
  /**
   * Decides `cost` units (default 1) at `now` (ms) for a key in `state`; `take: false`
   * peeks. Returns `[decision, nextState]` (`nextState` is `state` unless admitted).
   */
  decide(state, now, cost = 1, take = true) {
    if (typeof state !== "bigint") fail(`state must be a BigInt, got ${typeof state}`);
    if (state < 0n || state >= 1n << 64n) fail(`state must be a 64-bit word, got ${state}`);
    checkArgs(now, cost);
    const d = decisionOf(this.#raw.decide(state, now, cost, take === true), now, cost);
    return [d, lastState()];
  }
  /**
   * Settles at its real cost `real` (a whole number of units), at `now` (ms), an
   * admission of this rule on a key whose word is `{ state, ledger, places }` (BigInts,
   * and a string; a key's ledger starts at 0n, its places at ""): units not used go
   * back by portero's refund rule, units above the estimate are charged into debt.
   * `admission` is `{ at, cost, before, after, noted }` as recorded when it was
   * admitted (`at` its time in ms, `before` and `after` the states it found and left,
   * `noted` the ledger then), or `null` to charge `real` units at `now`. Returns
   * `[decision, { state, ledger, places }]`: how the key stands for one unit, and the
   * word to keep. With its places kept, settlements in any order give back what a
   * twin charged the real costs from the start would have (exactly, when no time
   * passed); without them (`places` left out), by the ledger alone, which keeps some.
   */
  settle(word, admission, real, now) {
    const state = word64("word.state", word?.state);
    const ledger = word64("word.ledger", word?.ledger);
    const places = word?.places ?? "";
    if (typeof places !== "string") fail(`word.places must be a string, got ${shown(places)}`);
    checkArgs(now, real);
    let a = { at: now, cost: 0, before: state, after: state, noted: ledger };
    if (admission !== null) {
      if (typeof admission !== "object") fail(`admission must be an object or null, got ${shown(admission)}`);
      const { at, cost } = admission;
      // (Below 2^63 ns, portero's time range: so a bad `at` is named as such.)
      if (!(isNumber(at) && at >= 0 && at * 1e6 < 2 ** 63)) fail(`admission.at must be a time in milliseconds within portero's range, got ${shown(at)}`);
      if (!(Number.isSafeInteger(cost) && cost >= 0)) fail(`admission.cost must be a whole number of units, got ${shown(cost)}`);
      a = { at, cost, before: word64("admission.before", admission.before), after: word64("admission.after", admission.after), noted: word64("admission.noted", admission.noted) };
    }
    const allowed = this.#raw.settle(state, ledger, placesWords(places), a.at, a.cost, a.before, a.after, a.noted, real, now);
    // Not allowed: a key in debt, or an error (thrown).
    if (!allowed) refusal(now, real);
    return [new Decision(allowed, decision()), { state: lastState(), ledger: lastLedger(), places: placesText(lastPlaces()) }];
  }
  /** `rateLimitHeaders` with this rule's quota. */
  headers(decision, policy = "default") {
    return headersFor(this.#quota, decision, policy);
  }
}
