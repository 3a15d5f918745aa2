// What the Express and Hono middleware share: their options, read once and named as
// express-rate-limit names them where the meaning is the same (`limit`, `windowMs`,
// `keyGenerator`, `skip`, `handler`, `message`, `statusCode`, `standardHeaders`,
// `legacyHeaders`), the limiter behind them, and the fields each response carries.
//
// One limiter per middleware, in the isolate's (or the process's) memory: a table of
// at most `maxKeys` keys (default 100,000) that a flood of keys cannot grow.
import { KeyedLimiter, initSync, isReady, rateLimitFields } from "./index.js";
import { fail, shown } from "./errors.js";
import { redisOf } from "./redis.js";

/** The body of a 429 unless `message` says otherwise. */
export const DEFAULT_MESSAGE = { error: "rate limit exceeded" };

const FIELD_STYLES = [true, false, "draft-8"];

function positive(name, v) {
  if (!(typeof v === "number" && Number.isSafeInteger(v) && v >= 1)) {
    fail(`${name} must be a whole number of at least 1, got ${shown(v)}`);
  }
  return v;
}

function optionalFunction(name, f) {
  if (f !== undefined && typeof f !== "function") fail(`${name} must be a function, got ${shown(f)}`);
  return f ?? null;
}

/** The options, checked once when the middleware is made. */
export function settingsOf(options = {}) {
  if (options === null || typeof options !== "object") fail("options must be an object");
  const windowMs = positive("windowMs", options.windowMs ?? 60_000);
  const limit = positive("limit", options.limit ?? 5);
  const standardHeaders = options.standardHeaders ?? "draft-8";
  if (!FIELD_STYLES.includes(standardHeaders)) {
    fail(`standardHeaders must be true, false or "draft-8", got ${shown(standardHeaders)}`);
  }
  const statusCode = options.statusCode ?? 429;
  if (!(Number.isInteger(statusCode) && statusCode >= 400 && statusCode <= 599)) {
    fail(`statusCode must be an error status (400-599), got ${shown(statusCode)}`);
  }
  const settings = {
    limiter: {
      limit,
      periodMs: windowMs,
      burst: positive("burst", options.burst ?? limit),
      algorithm: options.algorithm ?? "gcra",
      maxKeys: options.maxKeys ?? 100_000,
      evict: options.evict === true,
    },
    policy: options.policy ?? "default",
    standardHeaders: standardHeaders !== false,
    legacyHeaders: options.legacyHeaders === true,
    statusCode,
    message: options.message ?? DEFAULT_MESSAGE,
    keyGenerator: optionalFunction("keyGenerator", options.keyGenerator),
    skip: optionalFunction("skip", options.skip),
    handler: optionalFunction("handler", options.handler),
    cost: optionalFunction("cost", options.cost),
    outcome: outcomeOf(options),
    shard: shardOf(options),
    redis: null,
    wasm: options.wasm,
  };
  if (options.redis !== undefined) {
    if (settings.shard !== null) fail("redis and shard are two places for one limit: choose one");
    if (settings.outcome?.resetOnSuccess) fail("resetOnSuccess needs the limiter in memory: the Redis store keeps no way to clear one key");
    settings.redis = redisOf(options.redis, settings.limiter);
  }
  return settings;
}

/** The body of a response when the limit could not be checked (Redis away, failing closed). */
export const UNAVAILABLE_MESSAGE = { error: "rate limit unavailable" };

/**
 * Decides `cost` units of `key` in Redis: `{ decision, admission }` (the admission to
 * settle by outcome, null when refused), or — Redis away or too slow —
 * `{ unavailable: true }` when failing closed and null when failing open.
 */
export async function decideInRedis(redis, key, cost) {
  if (cost > redis.capacity) fail(`cost ${cost} is above the limit's capacity ${redis.capacity}`);
  const decided = await redis.check(key, cost);
  if (decided !== null) return decided;
  return redis.whenDown === "open" ? null : { unavailable: true };
}

/** The Redis store as `settleOutcome` settles through it (the settlement not awaited
 * by the response: it is made when the response is done). */
export function inRedis(redis) {
  return {
    settle: (admission, real) => void redis.settle(admission, real),
    reset: () => fail("resetOnSuccess needs the limiter in memory"),
  };
}

/**
 * Where the limit lives when it must be exact across isolates (Hono on Workers):
 * `shard(c)` returns the `PorteroShard` Durable Object namespace binding, with the
 * shards (16) and leases (none) of `portero/durable`'s `EdgeLimiter`; null: the
 * isolate's memory.
 */
function shardOf(options) {
  const shard = optionalFunction("shard", options.shard);
  if (shard === null) {
    if (options.lease !== undefined || options.shards !== undefined) fail("lease and shards need the shard option (a PorteroShard namespace)");
    return null;
  }
  if (options.resetOnSuccess === true) fail("resetOnSuccess needs the limiter in memory: a shard keeps no way to clear one key");
  return { namespace: shard, shards: options.shards ?? 16, lease: options.lease };
}

/**
 * How a response's outcome counts, or null when it does not (every admitted request
 * keeps its cost): express-rate-limit's `skipFailedRequests`,
 * `skipSuccessfulRequests` and `requestWasSuccessful`, and portero's `penalty` (the
 * units a failed request costs), `resetOnSuccess` (a success clears the key: failed
 * logins) and `settle` (the real cost, once the response is done: the tokens a model
 * used, reported by the handler).
 */
function outcomeOf(options) {
  const flag = (name) => {
    const v = options[name] ?? false;
    if (typeof v !== "boolean") fail(`${name} must be true or false, got ${shown(v)}`);
    return v;
  };
  const outcome = {
    skipFailed: flag("skipFailedRequests"),
    skipSuccessful: flag("skipSuccessfulRequests"),
    resetOnSuccess: flag("resetOnSuccess"),
    wasSuccessful: optionalFunction("requestWasSuccessful", options.requestWasSuccessful),
    settle: optionalFunction("settle", options.settle),
    penalty: options.penalty === undefined ? null : checkedWhole("penalty", options.penalty),
  };
  const counts = outcome.skipFailed || outcome.skipSuccessful || outcome.resetOnSuccess || outcome.settle !== null || outcome.penalty !== null;
  return counts ? outcome : null;
}

function checkedWhole(name, v) {
  if (!(typeof v === "number" && Number.isSafeInteger(v) && v >= 0)) fail(`${name} must be a whole number of at least 0, got ${shown(v)}`);
  return v;
}

/**
 * Settles, once a response is done, an admission `acquired` took for `key` at its
 * estimate `cost`: `success` whether the response counts as successful, `reported`
 * the real cost the user's `settle` answered (undefined: none). What goes back goes
 * by portero's refund rule — never more than a limiter that never saw the request.
 */
export function settleOutcome(counter, outcome, key, admission, cost, success, reported) {
  if (admission === null) return;
  if (success && outcome.resetOnSuccess) {
    counter.reset(key);
    return;
  }
  let real;
  if (reported !== undefined) real = checkedCost(reported);
  else if (success) real = outcome.skipSuccessful ? 0 : cost;
  else if (outcome.penalty !== null) real = outcome.penalty;
  else real = outcome.skipFailed ? 0 : cost;
  if (real !== cost) counter.settle(admission, real);
}

/** A limiter in memory as `settleOutcome` settles through it. */
export function inMemory(limiter) {
  return {
    settle: (admission, real) => limiter.settle(admission, real, Date.now()),
    reset: (key) => limiter.reset(key),
  };
}

/**
 * The limiter of `settings`, made once: requests that arrive together before it
 * exists all wait for the one being made (each making its own admitted every one of
 * them, each on an empty limiter).
 */
export function onceLimiterOf(settings) {
  settings.made ??= limiterOf(settings);
  return settings.made;
}

/** Whether a response counts as successful: the user's test (awaited when it answers a
 * promise, as express-rate-limit's may; any truthy answer is a success, as there), or a
 * status below 400. */
export async function successful(outcome, status, ...args) {
  if (outcome.wasSuccessful === null) return status < 400;
  let ok = outcome.wasSuccessful(...args);
  if (ok instanceof Promise) ok = await ok;
  return Boolean(ok);
}

/**
 * The limiter of `settings`, instantiating the module first if nobody did: from
 * `settings.wasm` (a compiled module, or its bytes), or in Node from the package's own
 * file. Elsewhere (Workers) without either it says what to pass.
 */
export async function limiterOf(settings) {
  if (!isReady()) {
    if (settings.wasm !== undefined) {
      initSync(settings.wasm);
    } else if (typeof process !== "undefined" && process.versions?.node !== undefined) {
      // Named through a variable, so that a bundler making a Worker of this module
      // (which never takes this branch) does not try to bundle Node's fs.
      const fs = "node:fs";
      const { readFileSync } = process.getBuiltinModule?.(fs) ?? (await import(fs));
      initSync(readFileSync(new URL("../pkg/portero_wasm_bg.wasm", import.meta.url)));
    } else {
      fail('instantiate the module first (initSync(wasm) with `import wasm from "portero/portero.wasm"`), or pass it as the `wasm` option');
    }
  }
  const limiter = new KeyedLimiter(settings.limiter);
  // The fields' format, its options checked now (a bad policy name, say), not at
  // every response: the same quota and window the limiter's `headers` advertise.
  // Advertised as what it admits: the burst, per the time the burst refills in
  // (`limit` per `windowMs` when the burst is the limit).
  const { limit, periodMs, burst } = settings.limiter;
  const refill = Math.ceil((burst * periodMs) / limit / 1000);
  settings.fields = rateLimitFields({ policy: settings.policy, quota: burst, windowSeconds: Math.max(refill, 1) });
  return limiter;
}

/** The fields of a response `decision` answered, as `settings` asks for them. */
export function fieldsOf(decision, settings) {
  const all = settings.fields(decision);
  let fields = all;
  if (!settings.standardHeaders) {
    // A 429 always says when to come back, whatever the field style.
    fields = decision.allowed ? {} : { "Retry-After": all["Retry-After"], "Cache-Control": all["Cache-Control"] };
  }
  if (settings.legacyHeaders) {
    fields["X-RateLimit-Limit"] = String(settings.limiter.limit);
    fields["X-RateLimit-Remaining"] = String(decision.remaining);
    const until = decision.allowed ? decision.resetAfterMs : decision.retryAfterMs;
    fields["X-RateLimit-Reset"] = String(Math.ceil((Date.now() + until) / 1000));
  }
  return fields;
}

/** The cost a user's function answered (awaited if it was a promise), checked. */
export function checkedCost(cost) {
  if (!(typeof cost === "number" && Number.isSafeInteger(cost) && cost >= 0)) {
    fail(`cost must return a whole number of at least 0, got ${shown(cost)}`);
  }
  return cost;
}

/** The key a user's function answered (awaited if it was a promise), checked. */
export function checkedKey(key) {
  if (typeof key !== "string" || key.length === 0) {
    fail(`keyGenerator must return a non-empty string, got ${shown(key)}`);
  }
  return key;
}
