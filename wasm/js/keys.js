// What the Durable Object and the Worker-side client agree on: how a key is held
// (well-formed, in every layer), which shard holds it, and the settings and checks each
// side validates (the client where they are given, the object where they are used).
import { fail, shown } from "./errors.js";

export const SWEEP_MS = 60_000;
export const MAX_KEYS = 250_000; // ~120 bytes each in memory: 30 MB of an isolate's 128 MB

// A key as every layer holds it (this isolate's table, the object's memory and its
// storage): itself, unless it has lone surrogates or U+FFFF, each of which becomes U+FFFF
// and its four hex digits. Distinct keys stay distinct, and the result is well-formed,
// which storage (UTF-8) and the local table (hashed as UTF-8) both keep exactly.
const UNSAFE = /[\uFFFF\p{Cs}]/gu;
// The slot a bad `now` is checked against (a peek: nothing is stored).
export const NOW_PROBE = "";

export function keyOf(key) {
  return key.replace(UNSAFE, (unit) => `\uFFFF${unit.charCodeAt(0).toString(16)}`);
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
export function shardOf(key, shards) {
  return hash(key) % shards;
}

// The object's settings, checked where they are given (the client) and where they are
// used (the object, which may be called directly).
export function settingsOf({ maxKeys = 10_000, durability = "confirmed", sweepMs = SWEEP_MS, shards }) {
  if (!(Number.isInteger(maxKeys) && maxKeys >= 1 && maxKeys <= MAX_KEYS)) {
    fail(`maxKeys must be a whole number from 1 to ${MAX_KEYS}, got ${shown(maxKeys)}`);
  }
  if (durability !== "confirmed" && durability !== "fast") fail(`durability must be "confirmed" or "fast", got ${shown(durability)}`);
  if (!(Number.isSafeInteger(sweepMs) && sweepMs >= 1)) fail(`sweepMs must be a whole number of at least 1, got ${shown(sweepMs)}`);
  if (!(shards === undefined || (Number.isInteger(shards) && shards >= 1 && shards <= 1024))) {
    fail(`shards must be a whole number from 1 to 1024, got ${shown(shards)}`);
  }
  return { maxKeys, durability, sweepMs, shards };
}

// `[key, cost, lease]` checks (cost 1 if left out, lease the cost), keys and leases
// checked; costs are checked by the rule.
export function pairsOf(checks) {
  if (!Array.isArray(checks)) fail(`checks must be an array of [key, cost] pairs, got ${typeof checks}`);
  return checks.map((check) => {
    if (!Array.isArray(check)) fail(`checks must be [key, cost] pairs, got ${typeof check}`);
    const [key, cost = 1, lease = cost] = check;
    if (typeof key !== "string") fail(`key must be a string, got ${typeof key}`);
    // (`Object.is`: a NaN cost is the cost's error, reported by the peek, not a lease's.)
    if (!Object.is(lease, cost) && !(Number.isSafeInteger(lease) && lease >= 1)) {
      fail(`a check's lease must be a whole number of units of at least 1, got ${shown(lease)}`);
    }
    return [key, cost, lease];
  });
}
