// A rate-limit middleware for Hono, from portero's limiters, running unchanged on
// Workers, Node, Bun and Deno: GCRA by default, with the IETF `RateLimit` and
// `RateLimit-Policy` fields and an exact `Retry-After`; options as express-rate-limit
// names them where the meaning is the same.
//
//   import { rateLimiter } from "portero/hono";
//   app.use(rateLimiter({ windowMs: 60_000, limit: 100 }));
//
// On Workers, instantiate the module first (or pass it as `wasm`):
//   import wasm from "portero/portero.wasm";
//   app.use(rateLimiter({ wasm, windowMs: 60_000, limit: 100 }));
import { fail } from "./errors.js";
import {
  UNAVAILABLE_MESSAGE,
  checkedCost,
  checkedKey,
  decideInRedis,
  fieldsOf,
  inMemory,
  inRedis,
  onceLimiterOf,
  settingsOf,
  settleOutcome,
  successful,
} from "./middleware.js";

/**
 * The middleware. The key is the client's address where the runtime tells it
 * (Workers: `CF-Connecting-IP`; Node's server: the socket; Bun: `requestIP`; Deno:
 * `remoteAddr`) unless `keyGenerator(c)` says otherwise.
 */
export function rateLimiter(options = {}) {
  const settings = settingsOf(options);
  let limiter = null;
  // Through a shard: the Worker-side client, built at the first request (the binding
  // lives in the request's environment), with how it settles.
  let edge = null;
  let edgeMade = null;
  let memory = null;
  return async function porteroRateLimiter(c, next) {
    // Made once: requests that arrive together before they exist wait for the same.
    limiter ??= await onceLimiterOf(settings);
    memory ??= inMemory(limiter);
    if (settings.shard !== null) edge ??= await (edgeMade ??= edgeOf(settings, c));
    // The user's functions are awaited only when they answer a promise.
    if (settings.skip !== null) {
      let skip = settings.skip(c);
      if (skip instanceof Promise) skip = await skip;
      if (skip) return next();
    }
    let key = settings.keyGenerator === null ? clientOf(c) : settings.keyGenerator(c);
    if (key instanceof Promise) key = await key;
    let cost = settings.cost === null ? 1 : settings.cost(c);
    if (cost instanceof Promise) cost = await cost;
    key = checkedKey(key);
    cost = checkedCost(cost);
    const outcome = settings.outcome;
    let decision;
    let admission = null;
    if (settings.redis !== null) {
      const decided = await decideInRedis(settings.redis, key, cost);
      if (decided === null) return next(); // Redis away, failing open
      if (decided.unavailable) return c.json(UNAVAILABLE_MESSAGE, 503, { "Retry-After": "1", "Cache-Control": "no-store" });
      ({ decision, admission } = decided);
    } else if (edge !== null) {
      decision = await edge.check(key, Date.now(), cost, executionOf(c));
      // The shard's client settles a decision it admitted.
      if (outcome !== null && decision.allowed) admission = decision;
    } else if (outcome === null) decision = limiter.check(key, Date.now(), cost);
    else ({ decision, admission } = limiter.acquire(key, Date.now(), cost));
    const fields = fieldsOf(decision, settings);
    // The handler may read the decision (`c.get("rateLimit")`): what remains, who
    // decided (`servedBy` through a shard).
    c.set("rateLimit", decision);
    if (decision.allowed) {
      // Set before the handler, so a response it makes through the context carries
      // them as it is built; a response it made itself gets them after.
      for (const k in fields) c.header(k, fields[k]);
      await next();
      if (!c.res.headers.has(FIRST)) withFields(c, fields);
      if (outcome !== null) {
        const counter = settings.redis !== null ? inRedis(settings.redis) : edge === null ? memory : throughShard(edge, c);
        afterResponse(c, outcome, (success, reported) =>
          settleOutcome(counter, outcome, key, admission, cost, success, reported),
        );
      }
      return;
    }
    if (settings.handler !== null) {
      const answer = await settings.handler(c, { decision, statusCode: settings.statusCode });
      if (answer instanceof Response) {
        c.res = answer;
        withFields(c, fields);
      }
      return answer;
    }
    const body = settings.message;
    return typeof body === "string"
      ? c.text(body, settings.statusCode, fields)
      : c.json(body, settings.statusCode, fields);
  };
}

// The client of the `PorteroShard` objects, for the middleware's quota. Loaded only
// here: its module imports the Workers runtime's own.
async function edgeOf(settings, c) {
  const { EdgeLimiter } = await import("./durable.js");
  const { limit, periodMs, burst, algorithm, maxKeys } = settings.limiter;
  const { namespace, shards, lease } = settings.shard;
  return new EdgeLimiter({
    namespace: namespace(c),
    rule: { limit, periodMs, burst, algorithm },
    shards,
    lease,
    localKeys: maxKeys,
  });
}

// Settling through the shard's client, kept alive past the response where the
// runtime lets it (`waitUntil`).
function throughShard(edge, c) {
  return {
    settle: (decision, real) => {
      const settled = edge.settle(decision, real).catch(() => {});
      executionOf(c)?.waitUntil?.(settled);
    },
    reset: () => fail("resetOnSuccess needs the limiter in memory"),
  };
}

// The request's execution context, where the runtime has one (Hono's getter throws
// where it has not).
function executionOf(c) {
  try {
    return c.executionCtx;
  } catch {
    return undefined;
  }
}

// Calls `done(success, reported)` once the response is done: at once for a response
// without a body, else when its body has been read to its end — a body the client
// cancels, or that fails, was cut off: a failure, and the user's `settle` not asked
// (the estimate stands), as a response Express could not send whole. A user's
// function that throws there has no request left to fail: the estimate stands.
function afterResponse(c, outcome, done) {
  const report = async (whole) => {
    try {
      const success = whole && (await successful(outcome, c.res.status, c));
      let reported = whole && outcome.settle !== null ? outcome.settle(c) : undefined;
      if (reported instanceof Promise) reported = await reported;
      done(success, reported);
    } catch {
      // The estimate stands.
    }
  };
  const body = c.res.body;
  if (body === null) return report(true);
  c.res = new Response(watched(body, report), c.res);
}

// `body`, telling `report` once whether it was read whole (true) or cut off (false).
function watched(body, report) {
  const reader = body.getReader();
  let told = false;
  const tell = (whole) => {
    if (!told) {
      told = true;
      report(whole);
    }
  };
  return new ReadableStream({
    async pull(controller) {
      try {
        const { value, done } = await reader.read();
        if (done) {
          controller.close();
          tell(true);
        } else controller.enqueue(value);
      } catch (e) {
        tell(false);
        controller.error(e);
      }
    },
    cancel(reason) {
      tell(false);
      return reader.cancel(reason);
    },
  });
}

// A field every answer carries (the policy), to tell whether the response has them.
const FIRST = "ratelimit-policy";

// Adds `fields` to the response the handler made (a copy when its headers are frozen,
// as those of a response from `fetch` are).
function withFields(c, fields) {
  try {
    for (const [k, v] of Object.entries(fields)) c.res.headers.set(k, v);
  } catch {
    c.res = new Response(c.res.body, c.res);
    for (const [k, v] of Object.entries(fields)) c.res.headers.set(k, v);
  }
}

function clientOf(c) {
  const workers = typeof navigator !== "undefined" && navigator.userAgent === "Cloudflare-Workers";
  const address = workers
    ? c.req.header("cf-connecting-ip")
    : (c.env?.incoming?.socket?.remoteAddress ?? c.env?.requestIP?.(c.req.raw)?.address ?? c.env?.remoteAddr?.hostname);
  if (typeof address !== "string" || address.length === 0) {
    fail("this runtime told no client address: pass keyGenerator(c)");
  }
  return address;
}

export default rateLimiter;
