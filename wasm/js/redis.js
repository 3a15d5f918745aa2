// A limit shared by several Node processes through Redis: portero-redis's own Lua
// script (generated into pkg/ from the crate's source, never copied), sent through the
// user's Redis client (`sendCommand`, as rate-limit-redis takes it), with the keys a
// Rust `RedisLimiter` of the same algorithm, quota and prefix uses: Node and Rust
// instances share one limit. GCRA for now.
//
// Invariant: one script call per check, read-decide-write atomically in Redis on
// Redis's clock; a check Redis does not answer within `timeoutMs` (or answers with an
// error) is answered by `whenDown`, never admitted unlimited by accident. An admission
// carries what the script's settlement finds it by (its time, mark, ledger note and
// the key's generation, as a Rust `Taken` does), and is settled by the same script:
// never more given back than a twin that was charged the real cost from the start.
import { LIMITS_LUA } from "../pkg/redis_script.js";
import { fail, shown } from "./errors.js";

// The script's times are µs in doubles: a schedule beyond 2^52 µs is not exact.
const MAX_SPAN_US = 2n ** 52n;
// The most units a settlement charges (beyond, Lua's doubles stop being exact), as
// portero-redis caps it.
const MOST_UNITS = 2 ** 50;
const encoder = new TextEncoder();

/** What a limit's quota is in the script: GCRA's emission interval (µs, rounded up, as
 * portero-redis rounds it) and burst, and the key suffix naming both. */
function gcraOf({ algorithm, limit, periodMs, burst }) {
  if (algorithm !== "gcra") fail(`the Redis store runs gcra (the default) for now, got ${shown(algorithm)}`);
  const periodNs = BigInt(Math.round(periodMs * 1e6));
  const intervalNs = (periodNs + BigInt(limit) - 1n) / BigInt(limit);
  const intervalUs = (intervalNs + 999n) / 1000n;
  if (intervalUs * BigInt(burst) > MAX_SPAN_US) fail("the quota's span is longer than Redis scripts compute exactly (2^52 µs)");
  return { args: ["1", String(intervalUs), String(burst)], suffix: `gcra:${intervalUs}us:${burst}`, capacity: burst };
}

/** The options of the store: checked once. */
export function redisOf(options, quota) {
  if (options === null || typeof options !== "object") fail(`redis must be an object ({ sendCommand }), got ${shown(options)}`);
  const { sendCommand, prefix = "portero:", timeoutMs = 50, whenDown = "closed" } = options;
  if (typeof sendCommand !== "function") fail(`redis.sendCommand must be a function (...args) => Promise, got ${shown(sendCommand)}`);
  if (typeof prefix !== "string" || /[{}]/.test(prefix)) fail(`redis.prefix must be a string without { or }, got ${shown(prefix)}`);
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) fail(`redis.timeoutMs must be a number of milliseconds above 0, got ${shown(timeoutMs)}`);
  if (whenDown !== "open" && whenDown !== "closed") fail(`redis.whenDown must be "open" or "closed", got ${shown(whenDown)}`);
  return new RedisStore(sendCommand, prefix, timeoutMs, whenDown, gcraOf(quota));
}

class RedisStore {
  #send;
  #prefix;
  #timeoutMs;
  #sha = null;
  #gcra;
  constructor(send, prefix, timeoutMs, whenDown, gcra) {
    this.#send = send;
    this.#prefix = prefix;
    this.#timeoutMs = timeoutMs;
    this.whenDown = whenDown;
    this.#gcra = gcra;
  }

  /** The most units one check may cost (GCRA's burst). */
  get capacity() {
    return this.#gcra.capacity;
  }

  /** The Redis key of `key`: `prefix{length:key}:gcra:<interval>us:<burst>`, its length in UTF-8 bytes. */
  keyOf(key) {
    return `${this.#prefix}{${encoder.encode(key).length}:${key}}:${this.#gcra.suffix}`;
  }

  /**
   * Checks `cost` units of `key`: a decision, or null when Redis did not answer in
   * time or answered with an error (the outage policy decides).
   */
  async check(key, cost) {
    const argv = ["0", "0", "0", ...this.#gcra.args, String(cost)];
    let reply;
    try {
      reply = await this.#withTimeout(this.#evaluate(this.keyOf(key), argv));
    } catch {
      return null;
    }
    // The script's reply as it writes it: whole numbers, none negative. Anything else
    // (a broken client or proxy) is not an answer, and the outage policy decides.
    const n = (i) => Number(reply?.[i]);
    const whole = (i) => Number.isSafeInteger(n(i)) && n(i) >= 0;
    if (!Array.isArray(reply) || n(0) !== 1 || ![2, 3, 4, 5].every(whole)) return null;
    const decision = {
      allowed: n(2) === 1,
      limit: this.#gcra.capacity,
      remaining: n(3),
      retryAfterMs: n(4) / 1000,
      resetAfterMs: n(5) / 1000,
      servedBy: "redis",
    };
    // What a settlement finds the admission by; a reply without it cannot be settled:
    // its estimate stands. (An admission of no units is settled by charging.)
    const taken = decision.allowed && [1, 6, 7, 8, 9].every(whole);
    return { decision, admission: taken ? { key, at: n(1), cost: n(6), mark: n(7), noted: n(8), generation: n(9) } : null };
  }

  /**
   * Moves `admission` (from `check`) from its estimate to `real` units in Redis: what
   * it did not use back while still its own, more charged past the limit. Resolves
   * whether Redis settled it (false: away, too slow or erring — the estimate stands).
   */
  async settle(admission, real) {
    if (real === admission.cost) return true;
    const { key, at, cost, mark, noted, generation } = admission;
    const units = String(Math.min(real, MOST_UNITS));
    // An estimate of 0 took nothing to give back: the real cost is charged past the
    // limit (the script's debit), as units above any estimate are.
    const argv =
      cost === 0
        ? ["0", "0", "4", ...this.#gcra.args, units]
        : ["0", "0", "3", ...this.#gcra.args, String(cost), units, String(mark), String(at), String(noted), String(generation)];
    try {
      const reply = await this.#withTimeout(this.#evaluate(this.keyOf(key), argv));
      return Array.isArray(reply) && Number(reply[0]) === 1;
    } catch {
      return false;
    }
  }

  // The script by its hash, loaded once (again after Redis lost it: NOSCRIPT).
  async #evaluate(key, argv) {
    if (this.#sha !== null) {
      try {
        return await this.#send("EVALSHA", this.#sha, "1", key, ...argv);
      } catch (e) {
        if (!String(e?.message ?? e).includes("NOSCRIPT")) throw e;
      }
    }
    this.#sha = String(await this.#send("SCRIPT", "LOAD", LIMITS_LUA));
    return this.#send("EVALSHA", this.#sha, "1", key, ...argv);
  }

  #withTimeout(promise) {
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error("Redis did not answer in time")), this.#timeoutMs);
    });
    return Promise.race([promise, late]).finally(() => clearTimeout(timer));
  }
}
