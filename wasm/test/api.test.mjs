// The npm package in Node: decisions, headers, and every bad input becomes an Error
// (a trap would kill a Worker's isolate).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import {
  initSync,
  Gcra,
  TokenBucket,
  FixedWindow,
  SlidingWindowCounter,
  LeakyMeter,
  algorithms,
  KeyedLimiter,
  Rule,
  rateLimitHeaders,
} from "../js/index.js";
import { Keyed as RawKeyed } from "../pkg/portero_wasm.js";

test("a limiter before init says what to do", () => {
  assert.throws(() => new Gcra({ perSecond: 1 }), /call initSync/);
});

test("init", () => {
  initSync(readFileSync(new URL("../pkg/portero_wasm_bg.wasm", import.meta.url)));
});

test("token bucket: burst, then one token every 100 ms", () => {
  const rl = new TokenBucket({ capacity: 10, perSecond: 10 });
  const t0 = 1_700_000_000_000;
  for (let i = 0; i < 10; i++) {
    const d = rl.check(t0, 1);
    assert.equal(d.allowed, true);
    assert.equal(d.remaining, 9 - i);
    assert.equal(d.limit, 10);
  }
  const no = rl.check(t0, 1);
  assert.deepEqual(no, { allowed: false, limit: 10, remaining: 0, retryAfterMs: 100, resetAfterMs: 1000 });
  assert.equal(rl.check(t0 + 99, 1).allowed, false);
  assert.equal(rl.check(t0 + 100).allowed, true, "cost defaults to 1");
});

test("every algorithm answers with the same Decision shape", () => {
  for (const Cls of [Gcra, TokenBucket, FixedWindow, SlidingWindowCounter, LeakyMeter]) {
    const rl = new Cls({ limit: 3, periodMs: 1000 });
    const t = 5_000;
    const got = [0, 1, 2, 3].map(() => rl.check(t).allowed);
    assert.deepEqual(got, [true, true, true, false], Cls.name);
    const d = rl.peek(t);
    assert.deepEqual(Object.keys(d).sort(), ["allowed", "limit", "remaining", "resetAfterMs", "retryAfterMs"]);
    assert.ok(d.retryAfterMs > 0, Cls.name);
    rl.reset();
    assert.equal(rl.check(t).allowed, true, `${Cls.name} after reset`);
  }
});

test("weighted cost is all or nothing; a cost above capacity is an error", () => {
  const rl = new Gcra({ perMinute: 60, burst: 5 });
  assert.equal(rl.check(0, 4).allowed, true);
  const d = rl.check(0, 2);
  assert.equal(d.allowed, false);
  assert.equal(d.remaining, 1);
  assert.equal(d.retryAfterMs, 1000);
  assert.throws(() => rl.check(0, 6), /cost exceeds the limiter's capacity/);
  assert.equal(rl.check(0, 0).allowed, true, "cost 0 always passes");
});

test("fractional milliseconds are kept (performance.now())", () => {
  const rl = new Gcra({ limit: 1, periodMs: 0.5 });
  assert.equal(rl.check(10).allowed, true);
  assert.equal(rl.check(10.4).allowed, false);
  assert.equal(rl.check(10.5).allowed, true);
});

// Two single limiters and two keyed ones, each pair made alike: one of a pair is asked
// with allow, its twin with check, and their answers compared.
function twins(makeSingle, keyedOptions) {
  return [
    [makeSingle(), makeSingle()],
    [new KeyedLimiter(keyedOptions), new KeyedLimiter(keyedOptions)],
  ];
}

// allow on the first of each pair answers at `t` as check does on its twin.
function assertAllowAsCheck([a, b], [ka, kb], t) {
  assert.equal(a.allow(t), b.check(t).allowed);
  assert.equal(ka.allow("k", t), kb.check("k", t).allowed);
}

test("allow answers as check does, without a decision; errors still throw", () => {
  const t0 = 1_700_000_000_000;
  const [singles, keyed] = twins(() => new Gcra({ perSecond: 10, burst: 3 }), { perSecond: 10, burst: 3 });
  for (let i = 0; i < 20; i++) assertAllowAsCheck(singles, keyed, t0 + i * 37);
  const [[a], [ka]] = [singles, keyed];
  assert.throws(() => a.allow(t0, 4), /capacity/);
  assert.throws(() => ka.allow("k", t0, 4), /capacity/);
  assert.throws(() => a.allow(NaN), /now must be/);
});

test("a decision kept is never changed by later checks (the decision buffer is copied out)", () => {
  const t0 = 1_700_000_000_000;
  const g = new Gcra({ perSecond: 10, burst: 2 });
  const k = new KeyedLimiter({ perSecond: 10, burst: 2, maxKeys: 1 });
  const first = g.check(t0);
  const kFirst = k.check("a", t0);
  const snapshot = structuredClone([first, kFirst]);
  // Later calls of every kind write the shared buffer: admissions, refusals, peeks,
  // a full table, allow (which fills in only part of it), and errors.
  g.check(t0);
  const no = g.check(t0);
  assert.equal(no.allowed, false);
  assert.equal(no.retryAfterMs, 100);
  g.peek(t0 + 500);
  g.allow(t0 + 1000);
  assert.throws(() => g.check(t0, 3), /capacity/);
  k.check("a", t0);
  assert.equal(k.check("b", t0).tableFull, true);
  assert.throws(() => k.allow("a", t0, 3), /capacity/);
  assert.deepEqual([first, kFirst], snapshot);
  assert.deepEqual(first, { allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 100 });
  assert.equal(Object.getPrototypeOf(first), Object.prototype, "plain objects, as before");
  assert.equal(JSON.stringify(first), '{"allowed":true,"limit":2,"remaining":1,"retryAfterMs":0,"resetAfterMs":100}');
  // Fields are ordinary data: a caller may change its own copy.
  first.remaining = 99;
  assert.equal(g.check(t0 + 10_000).remaining, 1);
});

test("allow between checks: a check's decision is whole, never left over from allow", () => {
  // allow skips remaining / retry-after / reset-after in the buffer; the check after it
  // must still answer its own figures.
  const t0 = 1_700_000_000_000;
  const [singles, keyed] = twins(() => new TokenBucket({ capacity: 5, perSecond: 5 }), { perSecond: 5, burst: 5 });
  const [[a, b], [ka, kb]] = [singles, keyed];
  for (let i = 0; i < 30; i++) {
    const t = t0 + i * 53;
    if (i % 3 === 0) {
      assertAllowAsCheck(singles, keyed, t);
    } else {
      assert.deepEqual(a.check(t), b.check(t));
      assert.deepEqual(ka.check("k", t), kb.check("k", t));
    }
  }
});

test("the decision buffer survives memory growth (a view made again after the buffer moves)", () => {
  const t0 = 1_700_000_000_000;
  const g = new Gcra({ perSecond: 10, burst: 4 });
  assert.equal(g.check(t0).remaining, 3);
  // A large table grows wasm memory (the old ArrayBuffer is detached).
  const big = new KeyedLimiter({ perSecond: 10, burst: 4, maxKeys: 500_000 });
  assert.deepEqual(big.check("x", t0), { allowed: true, limit: 4, remaining: 3, retryAfterMs: 0, resetAfterMs: 100, tableFull: false });
  assert.deepEqual(g.check(t0), { allowed: true, limit: 4, remaining: 2, retryAfterMs: 0, resetAfterMs: 200 });
  for (let i = 0; i < 3; i++) big.check("x", t0);
  assert.deepEqual(big.check("x", t0), { allowed: false, limit: 4, remaining: 0, retryAfterMs: 100, resetAfterMs: 400, tableFull: false });
});

test("milliseconds round up exactly, also for waits of days and years", () => {
  // One unit per 1,000,000,001 ns: retry-after and reset-after are never whole
  // milliseconds, so a conversion off by one would show.
  const t0 = 1_700_000_000_000;
  const g = new Gcra({ limit: 1, periodMs: 1000.000001, burst: 1 });
  assert.equal(g.check(t0).resetAfterMs, 1001);
  assert.deepEqual(g.check(t0), { allowed: false, limit: 1, remaining: 0, retryAfterMs: 1001, resetAfterMs: 1001 });
  // ~3 years per unit: far past 2^52 ns.
  const slow = new Gcra({ limit: 1, periodMs: 100_000_000_000.5, burst: 1 });
  assert.equal(slow.check(t0).resetAfterMs, 100_000_000_001);
  assert.equal(slow.check(t0).retryAfterMs, 100_000_000_001);
});

test("a Rule decides as the keyed limiter, on state the caller keeps", () => {
  const t0 = 1_700_000_000_000;
  const rule = new Rule({ perSecond: 10, burst: 3, algorithm: "sliding-window-counter" });
  const keyed = new KeyedLimiter({ perSecond: 10, burst: 3, algorithm: "sliding-window-counter" });
  let state = rule.initialState;
  for (let i = 0; i < 40; i++) {
    const t = t0 + i * 23;
    const [d, next] = rule.decide(state, t, 1 + (i % 2));
    assert.deepEqual({ ...keyed.check("k", t, 1 + (i % 2)), tableFull: undefined }, { ...d, tableFull: undefined });
    if (!d.allowed) assert.equal(next, state, "a refusal keeps the state");
    state = next;
  }
  const [peeked, same] = rule.decide(state, t0 + 5_000, 1, false);
  assert.ok(peeked.allowed);
  assert.equal(same, state, "a peek keeps the state");
  assert.throws(() => rule.decide(-1n, t0), /64-bit/);
  assert.throws(() => rule.decide(1, t0), /BigInt/);
});

test("keyed limiter: each key its own share, bounded table", () => {
  const rl = new KeyedLimiter({ perSecond: 2, maxKeys: 3 });
  assert.equal(rl.size, 0);
  assert.equal(rl.check("203.0.113.1", 0).allowed, true);
  assert.equal(rl.check("203.0.113.1", 0).allowed, true);
  assert.equal(rl.check("203.0.113.1", 0).allowed, false);
  assert.equal(rl.check("203.0.113.2", 0).allowed, true);
  assert.equal(rl.peek("203.0.113.2", 0).remaining, 0);
  rl.check("a", 0);
  const full = rl.check("b", 0);
  assert.equal(full.allowed, false);
  assert.equal(full.tableFull, true);
  assert.equal(rl.size, 3);
  assert.equal(rl.sweep(10_000), 3, "all full again after 10 s");
  assert.equal(rl.check("b", 10_000).tableFull, false);
  const evicting = new KeyedLimiter({ perSecond: 2, maxKeys: 1, evict: true });
  evicting.check("x", 0);
  assert.equal(evicting.check("y", 0).allowed, true);
  rl.reset("b");
});

test("the fingerprint cache: a key decides the same after it leaves the cache, and long keys too", () => {
  // Three times the two cache generations: every key leaves the cache before it
  // comes back, and is then found by its recomputed fingerprint.
  const keys = 100_000;
  const rl = new KeyedLimiter({ perHour: 1, maxKeys: keys + 1 });
  const t0 = 1_700_000_000_000;
  const long = "k".repeat(65);
  for (let i = 0; i < keys; i++) assert.equal(rl.allow(`c${i}`, t0), true, `first request of c${i}`);
  for (let i = 0; i < keys; i++) assert.equal(rl.allow(`c${i}`, t0 + 1), false, `second request of c${i}`);
  assert.equal(rl.check(`c${keys - 1}`, t0 + 2).allowed, false);
  assert.equal(rl.peek("c0", t0 + 2).allowed, false);
  assert.equal(rl.allow(long, t0), true);
  assert.equal(rl.check(long, t0).allowed, false);
  assert.equal(rl.size, keys + 1);
});

test("the fingerprint cache is bounded: 2 x 16,384 keys, whatever keys clients send", () => {
  // Counted through the module's own fingerprint call: with 40,000 keys cycled twice,
  // a bounded cache must compute at least 40,000 - 32,768 of them again.
  const rl = new KeyedLimiter({ perSecond: 1e9, burst: 1e9, maxKeys: 50_000 });
  rl.allow("warm", 0);
  let computed = 0;
  const original = RawKeyed.prototype.fingerprint;
  RawKeyed.prototype.fingerprint = function (key) {
    computed++;
    return original.call(this, key);
  };
  try {
    const keys = Array.from({ length: 40_000 }, (_, i) => `client-${i}`);
    for (const k of keys) rl.allow(k, 1);
    assert.equal(computed, 40_000);
    computed = 0;
    for (const k of keys) rl.allow(k, 2);
    assert.ok(computed >= 40_000 - 2 * 16_384, `only ${computed} recomputed: the cache held more than its bound`);
    computed = 0;
    for (let i = 0; i < 1_000; i++) rl.allow(keys[39_999], 3);
    assert.equal(computed, 0, "a hot key is computed once");
  } finally {
    RawKeyed.prototype.fingerprint = original;
  }
});

test("slot hints: keys evicted, reset and inserted again decide as looked up, never on another key's state", () => {
  // The wrapper (fingerprints and slot hints kept in JS) against a twin table with the
  // same hash key checked by key (looked up every time): 12 keys through a table of 4 that
  // evicts, with resets, so kept hints keep going stale.
  const hashKey = new Uint32Array([11, 22, 33, 44]);
  const original = crypto.getRandomValues;
  crypto.getRandomValues = (array) => {
    array.set(hashKey);
    return array;
  };
  try {
    const options = { perSecond: 10, burst: 3, maxKeys: 4, evict: true };
    const rl = new KeyedLimiter(options);
    const twin = new RawKeyed("gcra", 10, 1000, 3, 4, hashKey, true);
    let state = 7;
    const next = (n) => ((state = (state * 1_103_515_245 + 12_345) % 2 ** 31) % n);
    let now = 1_000;
    for (let i = 0; i < 5_000; i++) {
      const key = `k${next(12)}`;
      now += next(4) * 20;
      if (next(10) === 0) {
        rl.reset(key);
        twin.reset(key);
      }
      const cost = next(3);
      const want = twin.check(key, now, cost);
      const got = next(2) === 0 ? rl.allow(key, now, cost) : rl.check(key, now, cost).allowed;
      assert.equal(got, want, `check ${i}: ${key} at ${now} ms, cost ${cost}`);
    }
  } finally {
    crypto.getRandomValues = original;
  }
});

test("a full table asks for one second, with the limit, and its headers say so", () => {
  const rl = new KeyedLimiter({ perMinute: 5, maxKeys: 1 });
  rl.check("a", 0);
  const full = rl.check("b", 0);
  assert.deepEqual(full, { allowed: false, limit: 5, remaining: 0, retryAfterMs: 1000, resetAfterMs: 1000, tableFull: true });
  assert.equal(rl.headers(full)["Retry-After"], "1");
});

test("evicting: a table kept full by a flood gives a new key its burst, not 40 of 40", () => {
  const rl = new KeyedLimiter({ perSecond: 1, burst: 5, maxKeys: 100, evict: true });
  for (let i = 0; i < 400; i++) rl.check(`flood-${i}`, 0);
  assert.equal(rl.size, 100);
  let admitted = 0;
  for (let i = 0; i < 40; i++) admitted += rl.check("newcomer", 0).allowed ? 1 : 0;
  assert.equal(admitted, 5);
});

test("headers: IETF RateLimit fields, Retry-After rounded up, no-store on 429", () => {
  const rl = new Gcra({ perMinute: 5 });
  const ok = rl.check(0);
  assert.deepEqual(rl.headers(ok), {
    "RateLimit-Policy": '"default";q=5;w=60',
    RateLimit: '"default";r=4;t=12',
  });
  for (let i = 0; i < 4; i++) rl.check(0);
  const no = rl.check(1);
  assert.equal(no.retryAfterMs, 11_999);
  assert.deepEqual(rl.headers(no, "per-ip"), {
    "RateLimit-Policy": '"per-ip";q=5;w=60',
    RateLimit: '"per-ip";r=0;t=12',
    "Retry-After": "12",
    "Cache-Control": "no-store",
  });
  assert.equal(
    rateLimitHeaders({ allowed: false, remaining: 0, retryAfterMs: 1, resetAfterMs: 1 }, { quota: 1, windowSeconds: 1 })["Retry-After"],
    "1",
  );
  assert.throws(() => rl.headers(ok, "bad policy"), /structured-field token/);
  // A wait beyond a year is advertised as one year: bounded, whatever the decision.
  const far = rateLimitHeaders({ allowed: false, remaining: 0, retryAfterMs: 1e300, resetAfterMs: 1e300 }, { quota: 1, windowSeconds: 1 });
  assert.equal(far["Retry-After"], "31622400");
  assert.equal(far.RateLimit, '"default";r=0;t=31622400');
});

test("bad input from JavaScript throws a clear Error, never traps", () => {
  const rl = new TokenBucket({ capacity: 10, perSecond: 10 });
  const bad = [
    [() => rl.check(NaN), /now must be a finite, non-negative/],
    [() => rl.check(Infinity), /now must be a finite/],
    [() => rl.check(-1), /now must be a finite, non-negative/],
    [() => rl.check(), /now must be a number/],
    [() => rl.check("1"), /now must be a number/],
    [() => rl.check(1e30), /now must be/],
    [() => rl.check(0, -1), /cost must be a whole number/],
    [() => rl.check(0, 1.5), /cost must be a whole number/],
    [() => rl.check(0, NaN), /cost must be a whole number/],
    [() => rl.check(0, null), /cost must be a number/],
    [() => new Gcra(), /options must be an object/],
    [() => new Gcra({}), /limit must be a number/],
    [() => new Gcra({ perSecond: 0 }), /limit must be at least 1/],
    [() => new Gcra({ perSecond: -5 }), /limit must be a whole number/],
    [() => new Gcra({ perSecond: 2.5 }), /limit must be a whole number/],
    [() => new Gcra({ perSecond: NaN }), /limit must be a whole number/],
    [() => new Gcra({ perSecond: 1e12 }), /rate too high/],
    [() => new Gcra({ limit: 1, periodMs: 0 }), /periodMs must be longer than 0/],
    [() => new Gcra({ limit: 1, periodMs: -1 }), /periodMs must be a finite, positive/],
    [() => new Gcra({ perSecond: 1, burst: 0 }), /burst must be at least 1/],
    [() => new Gcra({ perHour: 1, burst: 2 ** 52 }), /too large/],
    [() => new SlidingWindowCounter({ perHour: 2 ** 22 }), /limit too large/],
    [() => new KeyedLimiter({ perSecond: 1, maxKeys: 0 }), /maxKeys must be/],
    [() => new KeyedLimiter({ perSecond: 1, maxKeys: 2 ** 40 }), /maxKeys must be/],
    // 64 Mi keys once grew Node to 2.1 GB; the table is capped at 32 MiB.
    [() => new KeyedLimiter({ perSecond: 1, maxKeys: 67_108_864 }), /from 1 to 1048576 .*32 MiB/],
    [() => new KeyedLimiter({ perSecond: 1, maxKeys: 1_048_577 }), /maxKeys must be/],
    [() => rateLimitHeaders({ allowed: true, remaining: NaN, retryAfterMs: 0, resetAfterMs: 0 }, { quota: 1, windowSeconds: 1 }), /remaining must be a whole number/],
    [() => rateLimitHeaders({ allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 0 }, { quota: NaN, windowSeconds: 1 }), /quota must be a whole number/],
    [() => rateLimitHeaders({ allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 0 }, { quota: 1, windowSeconds: Infinity }), /windowSeconds must be a whole number/],
    [() => rateLimitHeaders({ allowed: false, remaining: 0, retryAfterMs: Infinity, resetAfterMs: 0 }, { quota: 1, windowSeconds: 1 }), /retryAfterMs must be a finite/],
    [() => rateLimitHeaders({ allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: NaN }, { quota: 1, windowSeconds: 1 }), /resetAfterMs must be a finite/],
    [() => rateLimitHeaders(null, { quota: 1, windowSeconds: 1 }), /decision must be/],
    [() => new KeyedLimiter({ perSecond: 1, algorithm: "magic" }), /algorithm must be one of/],
    [() => new KeyedLimiter({ perSecond: 1 }).check(42, 0), /key must be a string/],
    [() => new KeyedLimiter({ perSecond: 1 }).check("k", NaN), /now must be/],
  ];
  for (const [f, re] of bad) {
    assert.throws(f, (e) => e instanceof Error && re.test(e.message) && e.message.startsWith("portero: "), String(f));
  }
  // The limiter still works after all of that (nothing trapped).
  assert.equal(rl.check(0).allowed, true);
});

// The least millisecond count that rounds to 2^63 ns, one past the time range (the
// range's last nanosecond, 2^63 - 1, rounds to 2^63 as an f64), and the largest below.
const PAST_2_63_NS = 9_223_372_036_854.7753906;
const LAST_MS = 9_223_372_036_854.7734375;

test("the last millisecond of the time range is a time, the next one is refused", () => {
  assert.equal(new Gcra({ perSecond: 1 }).check(LAST_MS).allowed, true);
  assert.equal(new KeyedLimiter({ perSecond: 1 }).sweep(LAST_MS), 0);
  assert.throws(() => new Gcra({ perSecond: 1 }).check(PAST_2_63_NS), /now must be a finite/);
});

test("an error message shows a refused value without calling into it", () => {
  const bare = Object.create(null); // no toString: String(bare) throws
  const liar = { toString() { throw new Error("not portero"); } };
  const rl = new Gcra({ perSecond: 1 });
  const cases = [
    [() => rl.check(bare), /now must be a number .*got an object/],
    [() => rl.check(0, liar), /cost must be a number, got an object/],
    [() => new KeyedLimiter({ perSecond: 1 }).check("k", Symbol("t")), /got a symbol/],
    [() => new Gcra({ perSecond: bare }), /limit must be a number .*got an object/],
    [() => new KeyedLimiter({ perSecond: 1, maxKeys: liar }), /maxKeys must be a number, got an object/],
    [() => new KeyedLimiter({ perSecond: 1, algorithm: bare }), /algorithm must be one of .*got an object/],
    [() => new KeyedLimiter({ perSecond: 1, algorithm: "x".repeat(1000) }), /got "x{40}…"$/],
    [() => rateLimitHeaders({ allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 0 }, { quota: bare, windowSeconds: 1 }), /quota must be a whole number .*got an object/],
  ];
  for (const [f, re] of cases) {
    assert.throws(f, (e) => e.message.startsWith("portero: ") && re.test(e.message), String(f));
  }
});

test("a bad now or cost is refused by the module before anything is taken, through every call", () => {
  const longKey = "k".repeat(100); // past the fingerprint cache: copied into wasm
  const single = new Gcra({ perSecond: 1, burst: 1 });
  const keyed = new KeyedLimiter({ perSecond: 1, burst: 1 });
  const rule = new Rule({ perSecond: 1, burst: 1 });
  const fresh = new KeyedLimiter({ perSecond: 1 });
  const calls = [];
  for (const [now, cost, re] of [[NaN, 1, /now must be a finite/], [-1, 1, /now must be a finite/], [1e30, 1, /now must be/], [PAST_2_63_NS, 1, /now must be a finite/], [0, -1, /cost must be a whole/], [0, 0.5, /cost must be a whole/], [0, 2 ** 53, /cost must be a whole/]]) {
    for (const f of ["check", "peek", "allow"]) {
      calls.push([() => single[f](now, cost), re]);
      for (const key of ["a", longKey]) calls.push([() => keyed[f](key, now, cost), re]);
    }
    calls.push([() => rule.decide(rule.initialState, now, cost), re]);
  }
  calls.push([() => fresh.sweep(NaN), /now must be a finite/]);
  calls.push([() => fresh.sweep(PAST_2_63_NS), /now must be a finite.*got 9223372036854.775/]);
  for (const [f, re] of calls) {
    assert.throws(f, (e) => re.test(e.message) && e.message.startsWith("portero: "), String(f));
  }
  // Nothing was taken and no key was stored: each still admits its one unit, once.
  assert.equal(keyed.size, 0);
  for (const take of [(t) => single.check(t), (t) => keyed.check("a", t), (t) => keyed.check(longKey, t)]) {
    assert.deepEqual([take(0).allowed, take(0).allowed], [true, false]);
  }
  assert.equal(rule.decide(rule.initialState, 0)[0].allowed, true);
  // The module itself refuses, never throws (a throw out of a method would leave the
  // object borrowed, so that it could never be freed).
  const raw = new RawKeyed("gcra", 1, 1000, 1, 10, new Uint32Array(4), false);
  assert.equal(raw.check("a", NaN, 1, true), false);
  assert.equal(raw.check("a", 0, -1, true), false);
  raw.free();
});

test("one spelling per algorithm: the module's names, the classes and the TypeScript union agree", () => {
  const names = algorithms();
  assert.deepEqual(names, ["gcra", "token-bucket", "fixed-window", "sliding-window-counter", "leaky-meter"]);
  const dts = readFileSync(new URL("../js/index.d.ts", import.meta.url), "utf8");
  const union = /export type AlgorithmName = ([^;]+);/.exec(dts)[1].split("|").map((s) => JSON.parse(s.trim()));
  assert.deepEqual(union, names);
  for (const algorithm of names) {
    const rl = new KeyedLimiter({ perSecond: 1, algorithm });
    assert.equal(rl.check("k", 0).allowed, true, algorithm);
  }
  assert.throws(() => new KeyedLimiter({ perSecond: 1, algorithm: "leaky-queue" }), /algorithm must be one of/);
});

test("the shared header cases: the same fields as portero-http writes", () => {
  const { cases } = JSON.parse(readFileSync(new URL("../../tests/fixtures/header_cases.json", import.meta.url), "utf8"));
  assert.ok(cases.length >= 6);
  for (const c of cases) {
    const got = rateLimitHeaders(c.decision, { policy: c.policy, quota: c.quota, windowSeconds: c.windowSeconds });
    assert.deepEqual(got, c.headers, c.name);
  }
});

test("keyed acquire and settle: back to the twin that never saw it, once, and checked", () => {
  const k = new KeyedLimiter({ perSecond: 10, burst: 5 });
  const twin = new KeyedLimiter({ perSecond: 10, burst: 5 });
  const t0 = 1_700_000_000_000;
  const { decision, admission } = k.acquire("ann", t0, 3);
  assert.equal(decision.allowed, true);
  assert.equal(decision.remaining, 2);
  assert.equal(k.settle(admission, 0, t0), true);
  assert.equal(k.settle(admission, 0, t0), false, "settles once");
  // Given back whole at its own time: the limiter is its twin again.
  for (let i = 0; i < 7; i++) assert.deepEqual(k.check("ann", t0 + i), twin.check("ann", t0 + i));
  // A settlement above the estimate charges into debt.
  const more = k.acquire("bob", t0, 1);
  k.settle(more.admission, 5, t0);
  assert.equal(k.check("bob", t0).allowed, false);
  // A refusal holds nothing.
  const none = k.acquire("bob", t0, 1);
  assert.equal(none.decision.allowed, false);
  assert.equal(none.admission, null);
  // Bad input is an Error; another limiter's admission too.
  const other = new KeyedLimiter({ perSecond: 10, burst: 5 });
  const mine = k.acquire("cy", t0, 1).admission;
  assert.throws(() => other.settle(mine, 0, t0), /this limiter's acquire/);
  assert.throws(() => k.settle(mine, -1, t0), /real must be a whole number/);
  assert.throws(() => k.settle(mine, 0.5, t0), /real must be a whole number/);
  assert.throws(() => k.settle(mine, 0, NaN), /nowMs must be a time/);
  assert.throws(() => k.settle(mine, 0, "now"), /now must be a number/);
  assert.throws(() => k.settle({ handle: 0 }, 0, t0), /this limiter's acquire/);
  assert.equal(k.settle(mine, 0, t0), true, "still settles after the errors");
});
