// A rate-limit middleware for Express (5, and 4), from portero's limiters: GCRA by
// default, with the IETF `RateLimit` and `RateLimit-Policy` fields and an exact
// `Retry-After`. Its options are named as express-rate-limit's where the meaning is
// the same, so switching is a change of the import:
//
//   import { rateLimit } from "portero/express";
//   app.use(rateLimit({ windowMs: 60_000, limit: 100 }));
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
 * The middleware. The key is `req.ip` (Express's client address, which honours its
 * `trust proxy` setting) unless `keyGenerator(req, res)` says otherwise.
 */
export function rateLimit(options = {}) {
  const settings = settingsOf(options);
  if (settings.shard !== null) fail("shard is for Workers (Hono): Express has no Durable Objects");
  let limiter = null;
  // The user's functions are awaited only when they answer a promise: a request
  // whose functions all answer at once is decided without a turn of the event loop.
  return async function porteroRateLimit(req, res, next) {
    try {
      limiter ??= await onceLimiterOf(settings);
      if (settings.skip !== null) {
        let skip = settings.skip(req, res);
        if (skip instanceof Promise) skip = await skip;
        if (skip) return next();
      }
      let key = settings.keyGenerator === null ? clientOf(req) : settings.keyGenerator(req, res);
      if (key instanceof Promise) key = await key;
      let cost = settings.cost === null ? 1 : settings.cost(req, res);
      if (cost instanceof Promise) cost = await cost;
      key = checkedKey(key);
      cost = checkedCost(cost);
      if (settings.redis !== null) {
        const decided = await decideInRedis(settings.redis, key, cost);
        if (decided === null) return next(); // Redis away, failing open
        if (decided.unavailable) {
          res.status(503).set({ "Retry-After": "1", "Cache-Control": "no-store" });
          return res.json(UNAVAILABLE_MESSAGE);
        }
        const { decision, admission } = decided;
        res.set(fieldsOf(decision, settings));
        if (!decision.allowed) return await refuse(req, res, next, decision, settings);
        if (settings.outcome !== null) {
          afterResponse(req, res, settings.outcome, (success, reported) =>
            settleOutcome(inRedis(settings.redis), settings.outcome, key, admission, cost, success, reported),
          );
        }
        return next();
      }
      if (settings.outcome !== null) {
        const { decision, admission } = limiter.acquire(key, Date.now(), cost);
        res.set(fieldsOf(decision, settings));
        if (decision.allowed) {
          afterResponse(req, res, settings.outcome, (success, reported) =>
            settleOutcome(inMemory(limiter), settings.outcome, key, admission, cost, success, reported),
          );
          return next();
        }
        return await refuse(req, res, next, decision, settings);
      }
      const decision = limiter.check(key, Date.now(), cost);
      res.set(fieldsOf(decision, settings));
      if (decision.allowed) return next();
      // Awaited: a custom handler that rejects is this request's error (next(e)).
      return await refuse(req, res, next, decision, settings);
    } catch (e) {
      return next(e);
    }
  };
}

function refuse(req, res, next, decision, settings) {
  if (settings.handler !== null) return settings.handler(req, res, next, { decision, statusCode: settings.statusCode });
  res.status(settings.statusCode);
  return typeof settings.message === "string" ? res.send(settings.message) : res.json(settings.message);
}

// Calls `done(success, reported)` once the response is done: sent whole ("finish"),
// or cut off before ("close" first: a failure, and the user's `settle` not asked — a
// response cut off keeps its estimate, as a Hono body cancelled does). A user's
// function that throws there has no request left to fail: the estimate stands.
function afterResponse(req, res, outcome, done) {
  let settled = false;
  const once = async (finished) => {
    if (settled) return;
    settled = true;
    try {
      const success = finished && (await successful(outcome, res.statusCode, req, res));
      let reported = finished && outcome.settle !== null ? outcome.settle(req, res) : undefined;
      if (reported instanceof Promise) reported = await reported;
      done(success, reported);
    } catch {
      // The estimate stands.
    }
  };
  res.once("finish", () => once(true));
  res.once("close", () => once(res.writableFinished === true));
}

function clientOf(req) {
  if (typeof req.ip !== "string" || req.ip.length === 0) {
    fail("the request has no client address (req.ip): pass keyGenerator");
  }
  return req.ip;
}

export default rateLimit;
