// A rate-limit middleware for Express (5, and 4), from portero's limiters: GCRA by
// default, with the IETF `RateLimit` and `RateLimit-Policy` fields and an exact
// `Retry-After`. Its options are named as express-rate-limit's where the meaning is
// the same, so switching is a change of the import:
//
//   import { rateLimit } from "portero/express";
//   app.use(rateLimit({ windowMs: 60_000, limit: 100 }));
import { fail } from "./errors.js";
import { checkedCost, checkedKey, fieldsOf, limiterOf, settingsOf } from "./middleware.js";

/**
 * The middleware. The key is `req.ip` (Express's client address, which honours its
 * `trust proxy` setting) unless `keyGenerator(req, res)` says otherwise.
 */
export function rateLimit(options = {}) {
  const settings = settingsOf(options);
  let limiter = null;
  // The user's functions are awaited only when they answer a promise: a request
  // whose functions all answer at once is decided without a turn of the event loop.
  return async function porteroRateLimit(req, res, next) {
    try {
      limiter ??= await limiterOf(settings);
      if (settings.skip !== null) {
        let skip = settings.skip(req, res);
        if (skip instanceof Promise) skip = await skip;
        if (skip) return next();
      }
      let key = settings.keyGenerator === null ? clientOf(req) : settings.keyGenerator(req, res);
      if (key instanceof Promise) key = await key;
      let cost = settings.cost === null ? 1 : settings.cost(req, res);
      if (cost instanceof Promise) cost = await cost;
      const decision = limiter.check(checkedKey(key), Date.now(), checkedCost(cost));
      res.set(fieldsOf(decision, settings));
      if (decision.allowed) return next();
      if (settings.handler !== null) return settings.handler(req, res, next, { decision, statusCode: settings.statusCode });
      res.status(settings.statusCode);
      return typeof settings.message === "string" ? res.send(settings.message) : res.json(settings.message);
    } catch (e) {
      return next(e);
    }
  };
}

function clientOf(req) {
  if (typeof req.ip !== "string" || req.ip.length === 0) {
    fail("the request has no client address (req.ip): pass keyGenerator");
  }
  return req.ip;
}

export default rateLimit;
