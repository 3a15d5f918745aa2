// One run, side by side: portero (wasm) against rate-limiter-flexible's in-memory
// limiter and a plain-JavaScript GCRA, single key and 10,000 string keys, each in both
// forms (`check`, the decision a Worker turns into a 429, and the boolean `allow`), and
// the floors under a check through the module.
// `npm run bench` (after `cargo xtask wasm`). Prints ns per check and ratios; with
// `-- --json FILE` also writes them there (what `cargo xtask bench-report` reads).
import { readFileSync, writeFileSync } from "node:fs";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { initSync, Gcra, KeyedLimiter } from "../js/index.js";
import {
  initSync as rawExports,
  decisionLayout,
  Limiter as RawLimiter,
  Keyed as RawKeyed,
  lastFingerprintLow,
} from "../pkg/portero_wasm.js";

initSync(readFileSync(new URL("../pkg/portero_wasm_bg.wasm", import.meta.url)));
// The module's decision buffer, for the floors of the decision form: a `check` must read
// the decision out of the module's memory into a new object, whatever its wrapper does.
const [decisionAt, decisionLength] = decisionLayout();
const memory = rawExports().memory;
let buffer = new Float64Array(0);
const decisionBuffer = () => (buffer.length === 0 ? (buffer = new Float64Array(memory.buffer, decisionAt, decisionLength)) : buffer);
// The least object a decision is: its five numbers copied out (the package's decision
// objects are built the same way; fields seeded as tagged, as the package does).
function Bare(allowed, d) {
  this.allowed = allowed;
  this.limit = d[0];
  this.remaining = d[1];
  this.retryAfterMs = d[2];
  this.resetAfterMs = d[3];
}
new Bare(false, [null, null, null, null]);

const N = 1_000_000;
const KEYS = Array.from({ length: 10_000 }, (_, i) => `198.51.${i >> 8}.${i & 255}`);

// A plain-JS GCRA (the theoretical arrival time per key), the usual hand-written one,
// with both forms portero has: `allow`, a boolean, and `check`, the decision a Worker
// turns into a 429 — a new object with the limit, the units remaining, and how long to
// wait (rounded up to the millisecond) until this request would pass and until the
// limiter is full again, as portero's decision. (It validates nothing; portero checks
// every argument.)
class PlainGcra {
  constructor(perSecond, burst) {
    this.limit = burst;
    this.t = 1000 / perSecond;
    this.tau = this.t * burst;
    this.tat = new Map();
  }
  allow(key, now, cost = 1) {
    const tat = Math.max(this.tat.get(key) ?? 0, now);
    const next = tat + this.t * cost;
    if (next - now > this.tau) return false;
    this.tat.set(key, next);
    return true;
  }
  check(key, now, cost = 1) {
    const tat = Math.max(this.tat.get(key) ?? 0, now);
    const next = tat + this.t * cost;
    const allowed = next - now <= this.tau;
    if (allowed) this.tat.set(key, next);
    const used = (allowed ? next : tat) - now;
    return {
      allowed,
      limit: this.limit,
      remaining: Math.floor((this.tau - used) / this.t),
      retryAfterMs: allowed ? 0 : Math.ceil(next - now - this.tau),
      resetAfterMs: Math.ceil(used),
    };
  }
}

// Every loop uses each answer as a Worker would (whether to refuse, and a number for
// its headers), so that no engine can drop work whose result is unused; each loop does
// it in its own code, so that no contender's objects make another's site polymorphic.
let sink = 0;

// Every contender of a scope runs once per round, in turn, and keeps its best round:
// on a shared machine slow spells last seconds, and taking turns lets each contender
// meet the same ones instead of one contender getting all of a spell.
const ROUNDS = 7;
async function scope(contenders) {
  const best = contenders.map(() => Infinity);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, [, f]] of contenders.entries()) {
      const t0 = process.hrtime.bigint();
      await f();
      best[i] = Math.min(best[i], Number(process.hrtime.bigint() - t0) / N);
    }
  }
  return contenders.map(([name], i) => [name, best[i]]);
}

const OPEN = 1_000_000_000; // never runs out during the benchmark
const START = 1_700_000_000_000;
// Time only moves forward, across rounds too (1 µs per check).
let clock = 0;
const now = () => START + clock++ * 1e-3;
const results = [];

{
  const p = new Gcra({ perSecond: OPEN, burst: OPEN });
  const raw = new RawLimiter("gcra", OPEN, 1000, OPEN);
  const plain = new PlainGcra(OPEN, OPEN);
  const rlf = new RateLimiterMemory({ points: OPEN, duration: 1 });
  results.push(...(await scope([
    ["single key: portero check (wasm)", () => {
      for (let i = 0; i < N; i++) { const d = p.check(now()); sink += d.allowed ? d.remaining : d.retryAfterMs; }
    }],
    ["single key: plain JS GCRA check", () => {
      for (let i = 0; i < N; i++) { const d = plain.check("k", now()); sink += d.allowed ? d.remaining : d.retryAfterMs; }
    }],
    ["single key: portero allow (wasm)", () => {
      for (let i = 0; i < N; i++) sink += p.allow(now()) ? 1 : 0;
    }],
    ["single key: plain JS GCRA allow", () => {
      for (let i = 0; i < N; i++) sink += plain.allow("k", now()) ? 1 : 0;
    }],
    // The floors under a check through the module: the bare call into wasm (the
    // module's own class, no argument checks in JS, no decision read), on its own
    // limiter; for the decision form, that call asked for the whole decision, read into
    // a new object.
    ["single key: floor: the wasm call alone", () => {
      for (let i = 0; i < N; i++) sink += raw.check(now(), 1, false) ? 1 : 0;
    }],
    ["single key: floor: the wasm call + a decision object", () => {
      for (let i = 0; i < N; i++) {
        const d = new Bare(raw.check(now(), 1, true), decisionBuffer());
        sink += d.allowed ? d.remaining : d.retryAfterMs;
      }
    }],
    ["single key: rate-limiter-flexible", async () => {
      for (let i = 0; i < N; i++) sink += (await rlf.consume("k", 1)).remainingPoints;
    }],
  ])));
}
{
  const p = new KeyedLimiter({ perSecond: OPEN, burst: OPEN, maxKeys: 20_000 });
  // The floor under a keyed check in this design: the one Map lookup of a key's cached
  // fingerprint (the plain-JS GCRA does a lookup and an update) and the bare call into
  // wasm with it, on a table of its own; no argument checks, no decision read.
  const raw = new RawKeyed("gcra", OPEN, 1000, OPEN, 20_000, crypto.getRandomValues(new Uint32Array(4)), false);
  const index = new Map(KEYS.map((k, i) => [k, i]));
  const words = new Uint32Array(3 * KEYS.length);
  KEYS.forEach((k, i) => {
    words[3 * i] = raw.fingerprint(k);
    words[3 * i + 1] = lastFingerprintLow();
    words[3 * i + 2] = 0xffff_ffff;
  });
  const plain = new PlainGcra(OPEN, OPEN);
  const rlf = new RateLimiterMemory({ points: OPEN, duration: 1 });
  results.push(...(await scope([
    ["10,000 keys: portero check (wasm)", () => {
      for (let i = 0; i < N; i++) { const d = p.check(KEYS[i % 10_000], now()); sink += d.allowed ? d.remaining : d.retryAfterMs; }
    }],
    ["10,000 keys: plain JS GCRA check", () => {
      for (let i = 0; i < N; i++) { const d = plain.check(KEYS[i % 10_000], now()); sink += d.allowed ? d.remaining : d.retryAfterMs; }
    }],
    ["10,000 keys: portero allow (wasm)", () => {
      for (let i = 0; i < N; i++) sink += p.allow(KEYS[i % 10_000], now()) ? 1 : 0;
    }],
    ["10,000 keys: plain JS GCRA allow", () => {
      for (let i = 0; i < N; i++) sink += plain.allow(KEYS[i % 10_000], now()) ? 1 : 0;
    }],
    ["10,000 keys: floor: Map lookup + the wasm call", () => {
      for (let i = 0; i < N; i++) {
        const j = 3 * index.get(KEYS[i % 10_000]);
        const r = raw.checkFingerprint(words[j], words[j + 1], words[j + 2], now(), 1, false);
        words[j + 2] = r >>> 1;
        sink += r & 1;
      }
    }],
    ["10,000 keys: floor: Map lookup + call + decision object", () => {
      for (let i = 0; i < N; i++) {
        const j = 3 * index.get(KEYS[i % 10_000]);
        const r = raw.checkFingerprint(words[j], words[j + 1], words[j + 2], now(), 1, true);
        words[j + 2] = r >>> 1;
        const d = new Bare((r & 1) === 1, decisionBuffer());
        sink += d.allowed ? d.remaining : d.retryAfterMs;
      }
    }],
    ["10,000 keys: rate-limiter-flexible", async () => {
      for (let i = 0; i < N; i++) sink += (await rlf.consume(KEYS[i % 10_000], 1)).remainingPoints;
    }],
  ])));
}

console.log(`node ${process.version}, ${N} checks per round, best of ${ROUNDS} rounds taken in turn`);
for (const [name, ns] of results) console.log(`${name.padEnd(56)} ${ns.toFixed(1).padStart(8)} ns/check`);
const by = Object.fromEntries(results);
for (const scope of ["single key", "10,000 keys"]) {
  for (const form of ["check", "allow"]) {
    const p = by[`${scope}: portero ${form} (wasm)`];
    console.log(
      `${scope}: portero ${form} is ${(by[`${scope}: plain JS GCRA ${form}`] / p).toFixed(2)}x plain JS GCRA ${form}, ` +
        `${(by[`${scope}: rate-limiter-flexible`] / p).toFixed(1)}x rate-limiter-flexible`,
    );
  }
}
for (const scope of ["single key", "10,000 keys"]) {
  const [bare, decided] = results.filter(([name]) => name.startsWith(`${scope}: floor`)).map(([, ns]) => ns);
  const plain = by[`${scope}: plain JS GCRA check`];
  console.log(
    `${scope}: the floors are ${(plain / bare).toFixed(2)}x (the bare call) and ${(plain / decided).toFixed(2)}x ` +
      `(with the decision object) plain JS GCRA check: the most any allow / check through the module could reach here`,
  );
}
if (sink === 0) console.log("(nothing decided)");
const jsonAt = process.argv.indexOf("--json");
if (jsonAt > 0) {
  const rows = results.map(([name, ns]) => ({ name, ns }));
  writeFileSync(process.argv[jsonAt + 1], JSON.stringify({ node: process.version, checks: N, rounds: ROUNDS, rows }, null, 1));
}
